"""Release tables (SPEC §6): the parquet schemas, their key columns and the manifest model.

Every table of a release is defined once here. `tasks/release/write.py` casts and validates rows
against `TABLE_SCHEMAS`, sorts them by `TABLE_KEYS` and writes `<table>.parquet`; `verify.py` checks
the files against the schemas of the release's `schema_version`; `diff.py` matches rows across releases
by the same keys; `schemas/release_rows.py` turns build objects into rows and rows back into objects.

Identifiers:
- report_id and grounding_set_id are "<domain>/<snapshot>";
- instance_id is "<category>/<domain>/<t_sample>-><t_target>" (SPEC §1), an instance being
  (S, G, Y) = (R_t, D_t+1, R_t+1): its sample report is the snapshot t_sample, its grounding set and
  target report are the snapshot t_target, the next snapshot the domain lists; `periods_skipped` says how
  many periods of the source lie between the two (0: consecutive).

Schema versions: 1 (no `schema_version` in manifest.json) held nested values as JSON text and dates as
text; 2 uses Arrow structs, lists and date32; 3 adds instances.periods_skipped. Old releases stay
readable (`TABLE_SCHEMAS_V1`, `TABLE_SCHEMAS_V2`).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import date, datetime
from typing import Annotated

import pyarrow as pa
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$")
"""X.Y.Z with an optional pre-release part (1.0.0-rc.1); build metadata (+...) is not accepted."""
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
"""A release name is a lowercase slug: one path segment, never '.', '..' or hidden."""
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def release_id_problems(name: str, version: str) -> list[tuple[str, str]]:
    """(field, problem) for a release name or version that is not usable; empty when both are."""
    out = []
    # fullmatch, not match: the patterns end in "$", which also matches before a trailing newline.
    if not NAME.fullmatch(name):
        out.append(("--release", f"{name!r} is not a lowercase slug [a-z0-9._-] (max 64)"))
    if not SEMVER.fullmatch(version):
        out.append(("--version", f"{version!r} is not semver X.Y.Z"))
    return out


# ---------------------------------------------------------------- schema version 2 (current)
# Nested values are Arrow structs and lists, dates are date32; JSON text is kept only where the shape
# is open (document metadata keys no column names). Version 1 (below) held them as JSON strings.

RELEASE_SCHEMA_VERSION = 3
"""Bumped whenever a table's columns change; manifest.json records it (absent: version 1)."""

STRUCTURE_NODE = pa.struct(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("parent_id", pa.string()),  # null for a top-level section
        pa.field("depth", pa.int32(), nullable=False),  # 0 for a top-level section
        pa.field("type", pa.string(), nullable=False),  # section | subsection | text | table | figure | list
        pa.field("title", pa.string()),
        pa.field("objective", pa.string()),
        pa.field("questions", pa.list_(pa.string())),
        pa.field("sources", pa.list_(pa.string())),  # doc_ids of G
    ]
)
PROVENANCE = pa.struct(
    [
        pa.field("backend", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("role", pa.string(), nullable=False),
        pa.field("prompt_sha256", pa.string()),
        pa.field("calls", pa.int64()),
        pa.field("prompt_tokens", pa.int64()),
        pa.field("completion_tokens", pa.int64()),
    ]
)
PROMPT_HASH = pa.struct(
    [pa.field("role", pa.string(), nullable=False), pa.field("prompt_sha256", pa.string(), nullable=False)]
)
UNSUPPORTED_NUMBER = pa.struct(
    [
        pa.field("number", pa.string(), nullable=False),  # as displayed in the report
        pa.field("node_id", pa.string()),  # the structure element it was written for
        pa.field("context", pa.string()),
    ]
)
DIMENSION = pa.struct(
    [pa.field("axis", pa.string(), nullable=False), pa.field("member", pa.string(), nullable=False)]
)
# The metadata keys the grounding step always writes (EDGAR sections, arXiv papers), typed; any other key
# (or a value of another type) goes to metadata_extra_json. `schemas.release_rows` converts both ways.
DOCUMENT_METADATA = pa.struct(
    [
        # EDGAR: one section of a filing
        pa.field("form", pa.string()),
        pa.field("company", pa.string()),
        pa.field("period_end", pa.string()),  # as the filing's cover states it; snapshot_date is the ISO date
        pa.field("order", pa.int64()),  # position of the section in the filing
        pa.field("section_type", pa.string()),  # cover | item | statement | auditor-report | note | ...
        pa.field("part", pa.int64()),
        pa.field("item", pa.string()),
        pa.field("items_covered", pa.list_(pa.string())),
        pa.field("source_span", pa.list_(pa.int64())),  # [first, end) block of the cleaned filing
        # arXiv: one paper
        pa.field("arxiv_id", pa.string()),
        pa.field("arxiv_id_source", pa.string()),
        pa.field("title", pa.string()),
        pa.field("authors", pa.list_(pa.string())),
        pa.field("first_version_date", pa.string()),  # as arXiv gives it: a day or only a month
        pa.field("license", pa.string()),
        pa.field("source_name", pa.string()),
        pa.field("subtitle", pa.string()),
        pa.field("keywords", pa.string()),
        pa.field("sections", pa.int64()),
        pa.field("equations", pa.int64()),
        pa.field("references", pa.int64()),
    ]
)


def _items(t: pa.DataType) -> pa.DataType:
    """A list whose items are never null."""
    return pa.list_(pa.field("item", t, nullable=False))


INSTANCES_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),  # financial_quarterly/AAPL-10-Q/t1->t2
        pa.field("category", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("t_sample", pa.string(), nullable=False),  # snapshot of S
        pa.field("t_target", pa.string(), nullable=False),  # snapshot of G and Y
        pa.field("t_sample_date", pa.date32()),  # t_sample as a date when it is one (filings), else null
        pa.field("t_target_date", pa.date32()),
        # source periods between t_sample and t_target (0: consecutive editions; null: not recorded,
        # a release of schema < 3). The leaderboard's headline scopes leave out instances with > 0.
        pa.field("periods_skipped", pa.int32()),
        pa.field("sample_report_id", pa.string(), nullable=False),  # -> reports.report_id
        pa.field("target_report_id", pa.string(), nullable=False),  # -> reports.report_id
        pa.field("grounding_set_id", pa.string(), nullable=False),  # -> grounding_documents
        pa.field("grounding_doc_ids", pa.list_(pa.string()), nullable=False),  # doc_ids of G, in order
        pa.field("sample_markdown", pa.string(), nullable=False),  # S (copy of the sample report)
        pa.field("target_markdown", pa.string(), nullable=False),  # Y (copy of the target report)
    ]
)

GROUNDING_DOCUMENTS_SCHEMA = pa.schema(
    [
        pa.field("grounding_set_id", pa.string(), nullable=False),  # "<domain>/<snapshot>"
        pa.field("domain", pa.string(), nullable=False),
        pa.field("snapshot", pa.string(), nullable=False),
        pa.field("snapshot_date", pa.date32()),  # the snapshot as a date (a filing's period end), else null
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("kind", pa.string()),  # prose | table | mixed
        pa.field("tokens", pa.int64()),  # o200k_base
        pa.field("tables", pa.int32()),
        pa.field("images", pa.int32()),
        pa.field("source_sha256", pa.string()),
        pa.field("source_kind", pa.string()),  # edgar | arxiv
        pa.field("markdown", pa.string(), nullable=False),
        pa.field("metadata", DOCUMENT_METADATA),
        pa.field("metadata_extra_json", pa.string()),  # JSON object of the other metadata keys; null: none
    ]
)

REPORTS_SCHEMA = pa.schema(
    [
        pa.field("report_id", pa.string(), nullable=False),  # "<domain>/<snapshot>"
        pa.field("domain", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("snapshot", pa.string(), nullable=False),
        pa.field("snapshot_date", pa.date32()),
        pa.field("markdown", pa.string(), nullable=False),  # the gold report R_t
        pa.field("outline", pa.string()),  # the Markdown template it was filled from
        pa.field("tokens", pa.int64()),
        pa.field("sections", pa.int32()),
        pa.field("tables", pa.int32()),
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
        pa.field("form_restricted", pa.bool_()),
        pa.field("numbers_total", pa.int32()),
        pa.field("numbers_supported", pa.int32()),
        pa.field("support_rate", pa.float64()),
        pa.field("unsupported", _items(UNSUPPORTED_NUMBER)),  # the numbers G does not support
        pa.field("placeholders_left", pa.int32()),
        pa.field("skeleton_equal", pa.bool_()),
    ]
)

STRUCTURES_SCHEMA = pa.schema(
    [
        pa.field("report_id", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("snapshot", pa.string(), nullable=False),
        pa.field("snapshot_date", pa.date32()),
        pa.field("form_restricted", pa.bool_()),
        pa.field("title", pa.string(), nullable=False),
        # the schemas.structure tree, flattened in document order (pre-order): parent_id rebuilds it
        pa.field("nodes", _items(STRUCTURE_NODE), nullable=False),
        pa.field("provenance", _items(PROVENANCE)),  # one entry per LLM role / offline step
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
        pa.field("prompt_hashes", _items(PROMPT_HASH)),  # role -> prompt sha256, sorted by role
    ]
)

RELEASE_FACTS_SCHEMA = pa.schema(
    [
        pa.field("domain", pa.string(), nullable=False),
        pa.field("snapshot", pa.string(), nullable=False),
        pa.field("snapshot_date", pa.date32()),
        pa.field("fact_id", pa.string()),  # the element's id attribute ("" when absent)
        pa.field("concept", pa.string(), nullable=False),  # e.g. us-gaap:Revenues
        pa.field("fact_type", pa.string(), nullable=False),  # nonFraction | nonNumeric
        pa.field("context_id", pa.string()),
        pa.field("period_start", pa.date32()),  # a duration's start and end; null for an instant
        pa.field("period_end", pa.date32()),
        pa.field("period_instant", pa.date32()),
        pa.field("dimensions", _items(DIMENSION)),  # sorted by axis; empty when none
        pa.field("unit", pa.string()),  # e.g. iso4217:USD, iso4217:USD/xbrli:shares
        pa.field("decimals", pa.int32()),  # null when absent or INF
        pa.field("decimals_inf", pa.bool_(), nullable=False),  # decimals="INF": the value is exact
        pa.field("scale", pa.int32()),
        pa.field("sign", pa.string()),  # "-" when the displayed value is negated
        pa.field("format", pa.string()),
        pa.field("displayed_text", pa.string(), nullable=False),  # what the reader sees
        pa.field("value", pa.float64()),  # numeric value after format, scale and sign
        pa.field("hidden", pa.bool_(), nullable=False),  # inside ix:hidden (not displayed)
    ]
)

STATS_SCHEMA = pa.schema(
    [
        pa.field("category", pa.string(), nullable=False),
        pa.field("instances", pa.int64(), nullable=False),
        # all float64. G: per instance totals over its grounding documents, averaged over the
        # category's instances (max: the largest instance); S: the sample report; Y: the target report
        pa.field("g_files_mean", pa.float64()),
        pa.field("g_tokens_mean", pa.float64()),
        pa.field("g_tokens_max", pa.float64()),
        pa.field("g_tables_mean", pa.float64()),
        pa.field("g_images_mean", pa.float64()),
        pa.field("s_tokens_mean", pa.float64()),
        pa.field("s_tokens_max", pa.float64()),
        pa.field("s_sections_mean", pa.float64()),
        pa.field("s_tables_mean", pa.float64()),
        pa.field("y_tokens_mean", pa.float64()),
        pa.field("y_tokens_max", pa.float64()),
        pa.field("y_sections_mean", pa.float64()),
        pa.field("y_tables_mean", pa.float64()),
    ]
)

TABLE_SCHEMAS: dict[str, pa.Schema] = {
    "instances": INSTANCES_SCHEMA,
    "grounding_documents": GROUNDING_DOCUMENTS_SCHEMA,
    "reports": REPORTS_SCHEMA,
    "structures": STRUCTURES_SCHEMA,
    "facts": RELEASE_FACTS_SCHEMA,
    "stats": STATS_SCHEMA,
}

# Date columns derived from a snapshot column of the same row (the writer fills them, verify checks them).
SNAPSHOT_DATES: dict[str, dict[str, str]] = {
    "instances": {"t_sample_date": "t_sample", "t_target_date": "t_target"},
    "grounding_documents": {"snapshot_date": "snapshot"},
    "reports": {"snapshot_date": "snapshot"},
    "structures": {"snapshot_date": "snapshot"},
    "facts": {"snapshot_date": "snapshot"},
}
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def snapshot_date(snapshot: str | None) -> date | None:
    """A snapshot that is an ISO date (a filing's period end) as a date; None for a window label."""
    if not isinstance(snapshot, str) or not _ISO_DATE.fullmatch(snapshot):
        return None
    try:
        return date.fromisoformat(snapshot)
    except ValueError:
        return None


# ---------------------------------------------------------------- schema version 1 (read only)
# Releases written before the schema version was recorded: nested values as JSON text, dates as text.
# Kept so that verify, diff and the readers still accept them (tasks/release/read.py upgrades them).


TABLE_SCHEMAS_V1: dict[str, pa.Schema] = {
    "instances": pa.schema(
        [f for f in INSTANCES_SCHEMA if f.name not in ("t_sample_date", "t_target_date", "periods_skipped")]
    ),
    "grounding_documents": pa.schema(
        [
            f
            for f in GROUNDING_DOCUMENTS_SCHEMA
            if f.name not in ("snapshot_date", "metadata", "metadata_extra_json")
        ]
        + [pa.field("metadata_json", pa.string())]
    ),
    "reports": pa.schema(
        [
            pa.field("unsupported_json", pa.string()) if f.name == "unsupported" else f
            for f in REPORTS_SCHEMA
            if f.name != "snapshot_date"
        ]
    ),
    "structures": pa.schema(
        [
            pa.field("report_id", pa.string(), nullable=False),
            pa.field("domain", pa.string(), nullable=False),
            pa.field("snapshot", pa.string(), nullable=False),
            pa.field("form_restricted", pa.bool_()),
            pa.field("structure_json", pa.string(), nullable=False),  # the tree as indented JSON
            pa.field("backend", pa.string()),
            pa.field("model", pa.string()),
            pa.field("prompt_hashes_json", pa.string()),  # JSON list of [role, prompt sha256]
        ]
    ),
    "facts": pa.schema(
        [
            pa.field("domain", pa.string(), nullable=False),
            pa.field("snapshot", pa.string(), nullable=False),
            pa.field("fact_id", pa.string()),
            pa.field("concept", pa.string(), nullable=False),
            pa.field("fact_type", pa.string(), nullable=False),
            pa.field("context_id", pa.string()),
            pa.field("period_start", pa.string()),
            pa.field("period_end", pa.string()),
            pa.field("period_instant", pa.string()),
            pa.field("dimensions", pa.string()),  # JSON object {axis: member}
            pa.field("unit", pa.string()),
            pa.field("decimals", pa.string()),  # an integer or "INF"
            pa.field("scale", pa.int32()),
            pa.field("sign", pa.string()),
            pa.field("format", pa.string()),
            pa.field("displayed_text", pa.string(), nullable=False),
            pa.field("value", pa.float64()),
            pa.field("hidden", pa.bool_(), nullable=False),
        ]
    ),
    "stats": STATS_SCHEMA,
}

# Schema version 2: the current tables but instances without periods_skipped.
TABLE_SCHEMAS_V2: dict[str, pa.Schema] = {
    **TABLE_SCHEMAS,
    "instances": pa.schema([f for f in INSTANCES_SCHEMA if f.name != "periods_skipped"]),
}

SCHEMAS_BY_VERSION: dict[int, dict[str, pa.Schema]] = {
    1: TABLE_SCHEMAS_V1,
    2: TABLE_SCHEMAS_V2,
    RELEASE_SCHEMA_VERSION: TABLE_SCHEMAS,
}

TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "instances": ("instance_id",),
    "grounding_documents": ("grounding_set_id", "doc_id"),
    "reports": ("report_id",),
    "structures": ("report_id",),
    # iXBRL ids are optional, so a fact key is not guaranteed unique: rows sharing it are compared
    # as a multiset of row hashes (diff) and ordered by row hash (write).
    "facts": ("domain", "snapshot", "fact_id", "concept", "context_id"),
    "stats": ("category",),
}

UNIQUE_KEY_TABLES = frozenset({"instances", "grounding_documents", "reports", "structures", "stats"})
REQUIRED_TABLES = ("instances", "grounding_documents", "reports")


def semver_key(version: str) -> tuple:
    """Sort key of a semver version by SemVer precedence (a pre-release sorts before its release)."""
    m = SEMVER.fullmatch(version)
    if m is None:
        raise ValueError(f"{version!r} is not semver X.Y.Z")
    core = tuple(int(g) for g in m.groups()[:3])
    pre = m.group(4)
    if pre is None:
        return (*core, 1, ())
    idents = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre[1:].split("."))
    return (*core, 0, idents)


def schema_fingerprint(schema: pa.Schema) -> str:
    """sha256 over the field names, types and nullability (schema metadata is ignored)."""
    fields = [[f.name, str(f.type), f.nullable] for f in schema]
    return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()


def _check_sha(v: str) -> str:
    if not SHA256.fullmatch(v):
        raise ValueError(f"not a lowercase hex sha256: {v[:80]!r}")
    return v


# ---------------------------------------------------------------- manifest.json
# A manifest may come from anyone (a release folder a user downloads): every string is bounded and holds no
# control character (a name or value is printed, and must not rewrite the terminal or forge a line), and
# every list and mapping is bounded, so that one field cannot make a reader print or hold megabytes.

MAX_TEXT = 2000
"""Longest string of a manifest (a source URL); names, hashes and versions are shorter still."""
MAX_FILES = 10_000
MAX_TABLES = 64
MAX_SOURCES = 500_000


def _printable(v: str) -> str:
    """`v` unless it holds a control, format or line/paragraph separator character (ESC, newline, U+202E)."""
    for i, c in enumerate(v):
        if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp"):
            raise ValueError(f"control character U+{ord(c):04X} at position {i}")
    return v


def _text(max_length: int) -> object:
    return Annotated[str, StringConstraints(max_length=max_length), AfterValidator(_printable)]


Text = _text(MAX_TEXT)
Short = _text(200)
TableName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]


def _member_path(rel: str) -> str:
    """A path of a release member: relative, inside the release, '/'-separated, no '.'/'..'/empty parts."""
    if rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in rel.split("/")):
        raise ValueError(f"file path must be relative inside the release: {rel[:120]!r}")
    if any(len(p) > 255 for p in rel.split("/")):
        raise ValueError(f"file path has a part longer than 255 characters: {rel[:120]!r}")
    return rel


MemberPath = Annotated[
    str, StringConstraints(max_length=1000), AfterValidator(_printable), AfterValidator(_member_path)
]


class BackendModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Short = Field(description="offline | openai")
    model: Short


class SourceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path_or_url: Text
    sha256: str

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        return _check_sha(v)


class TableEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: MemberPath = Field(description="parquet file, relative to the release folder: <table>.parquet")
    rows: int = Field(ge=0)
    sha256: str
    schema_fingerprint: str

    @field_validator("sha256", "schema_fingerprint")
    @classmethod
    def _sha(cls, v: str) -> str:
        return _check_sha(v)


class ReleaseManifest(BaseModel):
    """manifest.json of `data/releases/<name>/<version>/`."""

    model_config = ConfigDict(extra="forbid")

    name: Short
    version: Short
    created_at: Short = Field(description="ISO 8601 with a UTC offset, e.g. 2025-05-01T12:00:00+00:00")
    config_sha256: str
    code_version: Short = Field(description="git commit or package version of the code that built it")
    prompt_hashes: dict[Short, Short] = Field(
        default_factory=dict, max_length=1000, description="role -> prompt sha256"
    )
    backends: list[BackendModel] = Field(default_factory=list, max_length=1000)
    sources: list[SourceFile] = Field(default_factory=list, max_length=MAX_SOURCES)
    writer: Short = Field(default="", description="parquet writer, e.g. 'pyarrow 26.0.1'")
    schema_version: int = Field(
        default=1, ge=1, le=1000, description="version of the table schemas (absent in releases of version 1)"
    )
    tables: dict[TableName, TableEntry] = Field(default_factory=dict, max_length=MAX_TABLES)
    files: dict[MemberPath, str] = Field(
        default_factory=dict,
        max_length=MAX_FILES,
        description="relative path -> sha256 of every file except manifest.json",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.fullmatch(v):
            raise ValueError(f"release name must be a lowercase slug [a-z0-9._-], max 64 (got {v[:80]!r})")
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not SEMVER.fullmatch(v):
            raise ValueError(f"version must be semver X.Y.Z (got {v[:80]!r})")
        return v

    @field_validator("created_at")
    @classmethod
    def _created_at(cls, v: str) -> str:
        try:
            dt = datetime.fromisoformat(v)
        except ValueError as e:
            raise ValueError(f"created_at is not ISO 8601: {v[:80]!r}") from e
        if dt.tzinfo is None:
            raise ValueError(f"created_at needs a UTC offset: {v[:80]!r}")
        return v

    @field_validator("config_sha256")
    @classmethod
    def _config_sha(cls, v: str) -> str:
        return _check_sha(v)

    @field_validator("files")
    @classmethod
    def _files(cls, v: dict[str, str]) -> dict[str, str]:
        for rel, sha in v.items():
            if rel == "manifest.json":
                raise ValueError("manifest.json does not list itself")
            _check_sha(sha)
        return v

    @model_validator(mode="after")
    def _table_files(self) -> ReleaseManifest:
        # a table is always <name>.parquet beside manifest.json (tasks/release/write.py): never a path that
        # leaves the release, a folder, or another table's file
        for name, entry in self.tables.items():
            if entry.file != f"{name}.parquet":
                raise ValueError(f"tables.{name}.file must be {name}.parquet (got {entry.file[:120]!r})")
        return self

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
