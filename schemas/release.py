"""Release tables (SPEC §6): the parquet schemas, their key columns and the manifest model.

Every table of a release is defined once here. `tasks/release/write.py` casts and validates rows
against `TABLE_SCHEMAS`, sorts them by `TABLE_KEYS` and writes `<table>.parquet`; `verify.py` checks
the files against the same schemas; `diff.py` matches rows across releases by the same keys.

Identifiers:
- report_id and grounding_set_id are "<domain>/<snapshot>";
- instance_id is "<category>/<domain>/<t_sample>-><t_target>" (SPEC §1), an instance being
  (S, G, Y) = (R_t, D_t+1, R_t+1): its sample report is the snapshot t_sample, its grounding set and
  target report are the snapshot t_target.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.facts import FACTS_SCHEMA

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


INSTANCES_SCHEMA = pa.schema(
    [
        pa.field("instance_id", pa.string(), nullable=False),  # financial_quarterly/AAPL-10-Q/t1->t2
        pa.field("category", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("t_sample", pa.string(), nullable=False),  # snapshot of S
        pa.field("t_target", pa.string(), nullable=False),  # snapshot of G and Y
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
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("kind", pa.string()),  # prose | table | mixed
        pa.field("tokens", pa.int64()),  # o200k_base
        pa.field("tables", pa.int32()),
        pa.field("images", pa.int32()),
        pa.field("source_sha256", pa.string()),
        pa.field("source_kind", pa.string()),  # edgar | arxiv
        pa.field("markdown", pa.string(), nullable=False),
        pa.field("metadata_json", pa.string()),  # JSON object
    ]
)

REPORTS_SCHEMA = pa.schema(
    [
        pa.field("report_id", pa.string(), nullable=False),  # "<domain>/<snapshot>"
        pa.field("domain", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("snapshot", pa.string(), nullable=False),
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
        pa.field("unsupported_json", pa.string()),  # JSON list of unsupported numbers
        pa.field("placeholders_left", pa.int32()),
        pa.field("skeleton_equal", pa.bool_()),
    ]
)

STRUCTURES_SCHEMA = pa.schema(
    [
        pa.field("report_id", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("snapshot", pa.string(), nullable=False),
        pa.field("form_restricted", pa.bool_()),
        pa.field("structure_json", pa.string(), nullable=False),  # schemas.structure tree as JSON
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
        pa.field("prompt_hashes_json", pa.string()),  # JSON object role -> prompt sha256
    ]
)

RELEASE_FACTS_SCHEMA = pa.schema(
    [pa.field("domain", pa.string(), nullable=False), pa.field("snapshot", pa.string(), nullable=False)]
    + list(FACTS_SCHEMA)
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


def schema_fingerprint(schema: pa.Schema) -> str:
    """sha256 over the field names, types and nullability (schema metadata is ignored)."""
    fields = [[f.name, str(f.type), f.nullable] for f in schema]
    return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()


def _check_sha(v: str) -> str:
    if not SHA256.match(v):
        raise ValueError(f"not a lowercase hex sha256: {v!r}")
    return v


class BackendModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str = Field(description="offline | openai")
    model: str


class SourceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path_or_url: str
    sha256: str

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        return _check_sha(v)


class TableEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str = Field(description="parquet file, relative to the release folder")
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

    name: str
    version: str
    created_at: str = Field(description="ISO 8601 with a UTC offset, e.g. 2025-05-01T12:00:00+00:00")
    config_sha256: str
    code_version: str = Field(description="git commit or package version of the code that built it")
    prompt_hashes: dict[str, str] = Field(default_factory=dict, description="role -> prompt sha256")
    backends: list[BackendModel] = Field(default_factory=list)
    sources: list[SourceFile] = Field(default_factory=list)
    writer: str = Field(default="", description="parquet writer, e.g. 'pyarrow 26.0.1'")
    tables: dict[str, TableEntry] = Field(default_factory=dict)
    files: dict[str, str] = Field(
        default_factory=dict, description="relative path -> sha256 of every file except manifest.json"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"release name must be a lowercase slug [a-z0-9._-], max 64 (got {v!r})")
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not SEMVER.match(v):
            raise ValueError(f"version must be semver X.Y.Z (got {v!r})")
        return v

    @field_validator("created_at")
    @classmethod
    def _created_at(cls, v: str) -> str:
        try:
            dt = datetime.fromisoformat(v)
        except ValueError as e:
            raise ValueError(f"created_at is not ISO 8601: {v!r}") from e
        if dt.tzinfo is None:
            raise ValueError(f"created_at needs a UTC offset: {v!r}")
        return v

    @field_validator("config_sha256")
    @classmethod
    def _config_sha(cls, v: str) -> str:
        return _check_sha(v)

    @field_validator("files")
    @classmethod
    def _files(cls, v: dict[str, str]) -> dict[str, str]:
        for rel, sha in v.items():
            if rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in rel.split("/")):
                raise ValueError(f"file path must be relative inside the release: {rel!r}")
            if rel == "manifest.json":
                raise ValueError("manifest.json does not list itself")
            _check_sha(sha)
        return v

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
