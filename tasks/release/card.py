"""The dataset card (README.md) of a release (SPEC §6).

The card is part of the release content, so it is deterministic: it never shows created_at (that is
in manifest.json) and orders everything it lists. Its YAML header declares one config per table with
one split, `test`, so `load_dataset(<folder or repo>, "<table>", split="test")` works; every code
snippet of "How to load" runs as written from the release folder (tests/test_release_card.py runs them).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.domains import category_labels
from schemas.release import TABLE_KEYS, ReleaseManifest
from tasks.release.paper_table1 import SOURCE, gold_against_paper

TABLE_DESCRIPTIONS = {
    "instances": "one row per instance (S, G, Y): sample and target report Markdown, grounding doc ids",
    "grounding_documents": "the grounding documents G, one row per Markdown document",
    "reports": "the gold reports R_t with their outline and validation results",
    "structures": "the report structures the gold reports were filled from (nodes in document order)",
    "facts": "iXBRL facts of the filings (dated, with their dimensions): the ground truth for numbers",
    "stats": "per-category statistics (the table below)",
}
MEAN_COLUMNS = (
    ("g_files_mean", "G files"),
    ("g_tokens_mean", "G tokens"),
    ("g_tables_mean", "G tables"),
    ("g_images_mean", "G images"),
    ("s_tokens_mean", "S tokens"),
    ("s_sections_mean", "S sections"),
    ("s_tables_mean", "S tables"),
    ("y_tokens_mean", "Y tokens"),
    ("y_sections_mean", "Y sections"),
    ("y_tables_mean", "Y tables"),
)
MAX_COLUMNS = (("g_tokens_max", "G tokens"), ("s_tokens_max", "S tokens"), ("y_tokens_max", "Y tokens"))


SPLIT = "test"  # the one split of every config: FRAME is an evaluation set


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(v: Any, decimals: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{float(v):,.{decimals}f}"


def _category_key(cat: str) -> tuple[int, str]:
    order = list(category_labels())  # every registered kind's categories, in display order
    return (order.index(cat) if cat in order else len(order), cat)


def _overall(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    n = sum(int(r.get("instances") or 0) for r in rows)
    out: dict[str, Any] = {"category": "**all**", "instances": n}
    for col, _ in MEAN_COLUMNS:
        vals = [(r.get(col), int(r.get("instances") or 0)) for r in rows if r.get(col) is not None]
        weight = sum(w for _, w in vals)
        out[col] = sum(v * w for v, w in vals) / weight if weight else None
    for col, _ in MAX_COLUMNS:
        vals = [r[col] for r in rows if r.get(col) is not None]
        out[col] = max(vals) if vals else None
    return out


def stats_markdown(stats_rows: list[Mapping[str, Any]]) -> str:
    """Table 1 of the FRAME paper (000) as Markdown: means per instance, then the largest instance."""
    if not stats_rows:
        return "No statistics recorded.\n"
    rows = sorted(stats_rows, key=lambda r: _category_key(str(r["category"])))
    if len(rows) > 1:
        rows = [*rows, _overall(rows)]

    def label(r: Mapping[str, Any]) -> str:
        return category_labels().get(str(r["category"]), _cell(r["category"]))

    head = ["Category", "Instances"] + [h for _, h in MEAN_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        cells = [label(r), _num(r.get("instances"))] + [_num(r.get(c)) for c, _ in MEAN_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Largest instance per category (tokens, `o200k_base`):", ""]
    head = ["Category"] + [h for _, h in MAX_COLUMNS]
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        lines.append("| " + " | ".join([label(r)] + [_num(r.get(c), 0) for c, _ in MAX_COLUMNS]) + " |")
    return "\n".join(lines) + "\n"


def _against_paper(stats_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The gold report Y's mean length against the paper's (tasks/release/paper_table1.py), with the
    ratio frame / paper; nothing when no category of the release is in the paper."""
    rows = gold_against_paper([dict(r) for r in stats_rows])
    if not rows:
        return []
    head = ["Category"] + [f"Y {w} (frame / {SOURCE} / ratio)" for w in ("tokens", "sections", "tables")]
    out = [
        f"Gold report length against {SOURCE} (means per instance; ratio = frame / paper):",
        "",
        "| " + " | ".join(head) + " |",
        "|---|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: _category_key(str(r["category"]))):
        cells = [category_labels().get(str(r["category"]), _cell(r["category"]))]
        for key, decimals in (("y_tokens_mean", 0), ("y_sections_mean", 1), ("y_tables_mean", 1)):
            ours, ref, ratio = r[key]
            cells.append(f"{_num(ours, decimals)} / {_num(ref, decimals)} / {_num(ratio, 2)}")
        out.append("| " + " | ".join(cells) + " |")
    return [*out, ""]


def _licenses(notes: Mapping[str, Any]) -> list[str]:
    lines = [
        "- **SEC EDGAR filings** (10-Q, 10-K) are public-domain US government filings: information on "
        "sec.gov may be copied and redistributed. The grounding documents and facts derived from them "
        "are redistributed on that basis.",
        "- **arXiv papers** keep their own licenses (the license each author chose on arXiv); the "
        "grounding documents derived from a paper are under that paper's license.",
    ]
    arxiv = notes.get("arxiv_licenses") or {}
    if isinstance(arxiv, Mapping):
        arxiv = [{"id": k, "license": v} for k, v in arxiv.items()]
    if arxiv:
        lines += ["", "| arXiv paper | License |", "|---|---|"]
        for item in sorted(arxiv, key=lambda x: str(x.get("id", ""))):
            lines.append(f"| {_cell(item.get('id', ''))} | {_cell(item.get('license') or 'unknown')} |")
    else:
        lines.append(
            "  The per-paper licenses were not recorded for this release: check each paper's arXiv page."
        )
    if notes.get("license"):
        lines += ["", f"Generated content (structures, gold reports, statistics): {notes['license']}"]
    return lines


def domain_snapshots(instances: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """domain -> {"category", "snapshots" (sorted), "instances" (count)} from instances rows."""
    out: dict[str, dict[str, Any]] = {}
    for r in instances:
        d = out.setdefault(
            str(r["domain"]), {"category": str(r["category"]), "snapshots": set(), "instances": 0}
        )
        d["snapshots"].update((str(r["t_sample"]), str(r["t_target"])))
        d["instances"] += 1
    return {k: {**v, "snapshots": sorted(v["snapshots"], key=_natural)} for k, v in sorted(out.items())}


def _natural(label: str) -> list:
    """Dates in order and window labels W2 before W10."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.findall(r"\d+|\D+", label)]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _instances_text(instances: Sequence[Mapping[str, Any]] | None) -> list[str]:
    rule = (
        "A system is given S and G and must produce Y. Instance ids are "
        "`<category>/<domain>/<t_sample>-><t_target>`; each snapshot of a domain is paired with the next "
        "one the domain lists, so a domain with n snapshots has n - 1 instances."
    )
    if instances is None:
        return [rule, "", PAIRING_RULE]
    domains = domain_snapshots(instances)
    shapes = Counter((len(d["snapshots"]), d["instances"]) for d in domains.values())
    parts = [
        f"{_plural(k, 'domain')} {'has' if k == 1 else 'have'} {_plural(n, 'snapshot')} and "
        f"{_plural(m, 'instance')}{'' if k == 1 else ' each'}"
        for (n, m), k in sorted(shapes.items(), key=lambda x: (-x[0][0], -x[0][1]))
    ]
    summary = f"This release has {_plural(len(instances), 'instance')} from {_plural(len(domains), 'domain')}"
    lines = [rule, "", summary + (": " + "; ".join(parts) if parts else "") + ".", ""]
    lines += ["| Domain | Category | Snapshots | Instances |", "|---|---|---|---:|"]
    for name, d in sorted(domains.items(), key=lambda x: (_category_key(x[1]["category"]), x[0])):
        label = category_labels().get(d["category"], _cell(d["category"]))
        snaps = ", ".join(_cell(s) for s in d["snapshots"])
        lines.append(f"| {_cell(name)} | {label} | {snaps} | {d['instances']} |")
    return [*lines, "", *_pairing_text(instances)]


PAIRING_RULE = (
    "Pairs are meant to be consecutive editions (paper 000 §3): the next fiscal quarter's 10-Q (the "
    "fiscal fourth quarter has none: its 10-K covers it, so Q3 -> next Q1 is consecutive), the next fiscal "
    "year's 10-K, the arXiv window that starts the day after the previous one ends. Where the corpus has "
    "a gap, frame keeps the instance and marks it: `periods_skipped` (instances table) counts the "
    "periods between its two snapshots, 0 for consecutive ones. Marked instances are left out of the "
    "leaderboard's headline scopes (Overall and each category) and scored in a scope of their own, "
    "`skipped_periods`."
)


def _pairing_text(instances: Sequence[Mapping[str, Any]]) -> list[str]:
    """The pairing rule and the instances it marks, with the periods each skips."""
    marked = sorted(
        ((str(r["instance_id"]), int(r.get("periods_skipped") or 0)) for r in instances),
        key=lambda x: _natural(x[0]),
    )
    marked = [(iid, n) for iid, n in marked if n > 0]
    if not marked:
        return [PAIRING_RULE, "", "Every instance of this release pairs consecutive editions."]
    head = f"Instances that skip periods ({len(marked)} of {len(instances)}):"
    rows = [f"| `{_cell(iid)}` | {n} |" for iid, n in marked]
    return [PAIRING_RULE, "", head, "", "| Instance | Periods skipped |", "|---|---:|", *rows]


def _yaml_header(manifest: ReleaseManifest) -> list[str]:
    files = sorted(manifest.tables.items())
    out = ["---", f"pretty_name: {manifest.name} {manifest.version}", "license: other", "configs:"]
    for i, (name, entry) in enumerate(files):
        out += [f"- config_name: {name}", "  data_files:", f"  - split: {SPLIT}", f"    path: {entry.file}"]
        if name == "instances" or (i == 0 and "instances" not in manifest.tables):
            out.append("  default: true")
    return [*out, "---"]


def render_card(
    manifest: ReleaseManifest,
    stats_rows: list[Mapping[str, Any]],
    notes: Mapping[str, Any] | None = None,
    *,
    instances: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The README.md of a release.

    notes (all optional): "title", "summary" (Markdown paragraph), "license" (of the generated
    content), "arxiv_licenses" ({arxiv_id: license} or [{id, license}]), "limits" (list of str),
    "changes" (Markdown, e.g. tasks.release.diff.format_diff_markdown of the previous release).
    instances: the instances rows (domain, category, t_sample, t_target): the card then states how many
    snapshots and instances each domain has.
    """
    notes = notes or {}
    title = notes.get("title") or f"FRAME benchmark release `{manifest.name}` {manifest.version}"
    out: list[str] = _yaml_header(manifest)
    out += ["", f"# {title}", "", f"Version **{manifest.version}**.", ""]
    if notes.get("summary"):
        out += [str(notes["summary"]).strip(), ""]

    out += [
        "## What a FRAME instance is",
        "",
        "FRAME measures form-restricted report generation: writing the next edition of a periodic "
        "report in the form of the previous one. Each instance is a triple (S, G, Y):",
        "",
        "- **S**, the sample report: the gold report R_t of a domain (one company's 10-Q or 10-K series, "
        "or one arXiv topic) at snapshot t. It fixes the form: sections, their order, tables.",
        "- **G**, the grounding documents D_t+1: Markdown documents of the next snapshot (the filing "
        "split by Part/Item with its financial statements, or the window's papers).",
        "- **Y**, the target report R_t+1: the gold report for the next snapshot, in the form of S, "
        "every statement supported by G.",
        "",
        *_instances_text(instances),
        "",
        *_files_table(manifest),
        "",
        "`manifest.json` lists the sha256 of every file (this card included), the row counts and the "
        "build provenance; `tasks.release.verify.verify_release(<folder>)` rechecks all of it.",
        "",
        "## Statistics",
        "",
        "Means per instance (as in Table 1 of the FRAME paper). G counts all grounding documents of the "
        "instance (files; tokens, tables and images summed over them); S and Y are the sample and target "
        "reports. Tokens are `o200k_base`.",
        "",
        stats_markdown(stats_rows).rstrip("\n"),
        "",
        *_against_paper(stats_rows),
        "## How it was built",
        "",
        "Filings and papers were fetched, cleaned (iXBRL to HTML; facts extracted) and split into "
        "grounding documents; a report structure was synthesized for the first snapshot (form-free) and "
        "adapted for the later ones (form-restricted), augmented with guiding questions, turned into an "
        "outline and filled from the grounding documents; every gold report was validated (skeleton equal "
        "to its outline, no placeholder left, numbers checked against the grounding documents and facts).",
        "",
        *_provenance(manifest),
    ]
    out += ["", "## License", "", *_licenses(notes), "", "## Known limits", ""]
    limits = [str(x) for x in notes.get("limits") or []]
    out += [f"- {x}" for x in limits] if limits else ["None recorded."]
    if notes.get("changes"):
        out += ["", "## Changes", "", str(notes["changes"]).strip()]
    out += ["", "## How to load", "", *_how_to_load(set(manifest.tables))]
    return "\n".join(out) + "\n"


def _files_table(manifest: ReleaseManifest) -> list[str]:
    """The card's table of release files: rows, key, content and short sha256 of each table."""
    out = ["## Files", "", "| File | Rows | Key | Content | sha256 |", "|---|---:|---|---|---|"]
    for name, entry in sorted(manifest.tables.items()):
        key = ", ".join(TABLE_KEYS.get(name, ()))
        what = TABLE_DESCRIPTIONS.get(name, "")
        out.append(f"| `{entry.file}` | {entry.rows:,} | {key} | {what} | `{entry.sha256[:12]}` |")
    return out


def _provenance(manifest: ReleaseManifest) -> list[str]:
    """The build's identity (config, code, writer, backends, prompts) and every raw source's sha256."""
    out = [f"- Config sha256: `{manifest.config_sha256}`", f"- Code version: `{manifest.code_version}`"]
    if manifest.writer:
        out.append(f"- Parquet writer: {manifest.writer}")
    backends = sorted({(b.backend, b.model) for b in manifest.backends})
    if backends:
        out.append("- Backends and models: " + ", ".join(f"{b} (`{m}`)" for b, m in backends))
    else:
        out.append("- Backends and models: not recorded")
    if manifest.prompt_hashes:
        out += ["", "| Prompt role | sha256 |", "|---|---|"]
        for role, sha in sorted(manifest.prompt_hashes.items()):
            out.append(f"| {_cell(role)} | `{sha}` |")
    out += ["", "## Provenance", ""]
    if not manifest.sources:
        return [*out, "No source files recorded."]
    out += [
        "Each raw source with the sha256 of its bytes: a URL (fetched live) or a path relative to a "
        "mirror folder laid out like the shared corpus (`edgar/<ticker>/<form>/<period end>.htm`, "
        "`arxiv/<topic>/<arXiv id>.html`, listed with their origin in that folder's `MANIFEST.csv`).",
        "",
        "| Source | sha256 |",
        "|---|---|",
    ]
    for src in sorted(manifest.sources, key=lambda x: (x.path_or_url, x.sha256)):
        out.append(f"| {_cell(src.path_or_url)} | `{src.sha256}` |")
    return out


def _how_to_load(tables: set[str]) -> list[str]:
    """Snippets that run as written from the release folder, for the tables it has. Nested columns are
    Arrow lists and structs, dates are dates: no JSON to parse."""
    py = [
        "import pandas as pd",
        "import pyarrow.parquet as pq",
        "",
        'instances = pd.read_parquet("instances.parquet")',
        'reports = pq.read_table("reports.parquet")',
    ]
    if "structures" in tables:
        py += [
            "",
            "# a structure's nodes in document order; depth 0 are the sections",
            'structure = pq.read_table("structures.parquet").to_pylist()[0]',
            'sections = [n["title"] for n in structure["nodes"] if n["depth"] == 0]',
        ]
    if "facts" in tables:
        py += [
            "",
            "# facts: period_* are dates, dimensions a list of {axis, member}",
            'facts = pd.read_parquet("facts.parquet")',
            'totals = facts[facts["period_end"].notna() & (facts["dimensions"].map(len) == 0)]',
        ]
    sql = [
        "SELECT * FROM 'instances.parquet';",
        "SELECT i.instance_id, g.doc_id, g.tokens",
        "FROM 'instances.parquet' i JOIN 'grounding_documents.parquet' g USING (grounding_set_id);",
    ]
    if "structures" in tables:
        sql += [
            "SELECT report_id, node.title AS section",
            "FROM (SELECT report_id, unnest(nodes) AS node FROM 'structures.parquet')",
            "WHERE node.depth = 0;",
        ]
    if "facts" in tables:
        sql += [
            "SELECT domain, concept, period_end, value FROM 'facts.parquet'",
            "WHERE period_end >= DATE '2024-01-01' AND len(dimensions) = 0;",
        ]
    hf = [
        "import os",
        "",
        "from datasets import load_dataset",
        "",
        'release = os.path.abspath(".")  # this folder, or the Hub repo id it is published under',
        f'instances = load_dataset(release, "instances", split="{SPLIT}")',
        f'docs = load_dataset(release, "grounding_documents", split="{SPLIT}")',
    ]
    return [
        "From the release folder. pandas / pyarrow:",
        "",
        "```python",
        *py,
        "```",
        "",
        "DuckDB:",
        "",
        "```sql",
        *sql,
        "```",
        "",
        f"Hugging Face `datasets`: one config per table (the tables have different columns), each with the "
        f"single split `{SPLIT}`:",
        "",
        "```python",
        *hf,
        "```",
    ]
