"""Raw source bytes -> grounding documents (Markdown + documents.json + facts.parquet).

`ground_filing` and `ground_paper` build the documents of one filing or paper (`tasks.sources` picks
which for a source); `write_grounding` writes a folder with its manifest all or nothing (temp folder,
then one atomic exchange), so a failure or a kill never leaves half a folder nor loses an earlier one.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from schemas.documents import GroundingDocument, doc_kind
from schemas.facts import FACTS_SCHEMA
from tasks.errors import FrameInputError
from tasks.ground.ixbrl import CleanFiling, Fact
from tasks.ground.split import FilingSection, render_section, split_filing
from tasks.manifest import write_folder
from tasks.markdown.tables import markdown_tables
from tasks.tokens import count_tokens


@dataclass
class Grounded:
    """Grounding documents of one raw source (one filing or one paper)."""

    kind: str  # the source kind's name (tasks.sources)
    source_sha256: str
    documents: list[GroundingDocument]
    markdown: dict[str, str]  # file name -> Markdown text, same order as documents
    facts: list[Fact] | None = None
    meta: dict = field(default_factory=dict)


_DOCTYPE_SUBSET = re.compile(rb"<!DOCTYPE[^\[>]*\[", re.I)


def sniff_head(data: bytes, size: int = 200_000) -> bytes:
    """The first `size` bytes of the document proper: a DOCTYPE's internal subset (entity declarations,
    which are never expanded) is skipped, so a long one cannot hide what kind of file this is."""
    m = _DOCTYPE_SUBSET.search(data[:4096])
    if m is not None:
        end = data.find(b"]>", m.end())
        if end != -1:
            return data[:4096][: m.start()] + data[end + 2 : end + 2 + size]
    return data[:size]


def ground_paper(
    data: bytes, source_name: str, kind: str, meta: dict | None = None, source_ref: str | None = None
) -> Grounded:
    """One paper's HTML -> one grounding document of source kind `kind`. `source_name` names the input in
    error messages; `source_ref` (default `source_name`) is what the document records as its source."""
    from tasks.ground.paper import paper_to_markdown  # imported lazily: filings never need it

    sha = hashlib.sha256(data).hexdigest()
    paper = paper_to_markdown(data, source_name=source_name, meta=meta, source_ref=source_ref)
    md = paper.markdown
    arxiv_id = paper.metadata.get("arxiv_id") or Path(source_name).stem
    doc_id = "paper-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in arxiv_id)
    tables = markdown_tables(md)
    table_chars = sum(len(" ".join(" ".join(r) for r in t)) for t in tables)
    doc = GroundingDocument(
        doc_id=doc_id,
        title=paper.title,
        kind=doc_kind(max(len(md) - table_chars, 0), table_chars),
        tokens=count_tokens(md),
        tables=paper.tables,
        images=paper.figures,
        source_sha256=sha,
        source_kind=kind,
        file=f"{doc_id}.md",
        source_ids=[arxiv_id],
        metadata={
            **paper.metadata,
            "authors": paper.authors,
            "sections": len(paper.sections),
            "equations": paper.equations,
            "references": paper.references,
        },
    )
    return Grounded(kind, sha, [doc], {doc.file: md}, None, dict(paper.metadata))


def ground_filing(
    clean: CleanFiling,
    sha: str,
    source_name: str,
    expected_form: str | None,
    meta: dict,
    sections: list[FilingSection] | None = None,
    *,
    kind: str,
) -> Grounded:
    """One filing's sections -> grounding documents of source kind `kind` (a kind of iXBRL filings)."""
    form = clean.form.strip().upper()
    if expected_form and form != expected_form.upper():
        raise FrameInputError(
            source_name,
            f"filing is a {form or 'document without dei:DocumentType'}, but {expected_form} was expected",
        )
    info = {
        "form": form,
        "company": clean.dei.get("EntityRegistrantName", ""),
        "cik": clean.dei.get("EntityCentralIndexKey", ""),
        "period_end": clean.dei.get("DocumentPeriodEndDate", ""),
        "fiscal_year": clean.dei.get("DocumentFiscalYearFocus", ""),
        "fiscal_period": clean.dei.get("DocumentFiscalPeriodFocus", ""),
        **meta,
    }
    docs: list[GroundingDocument] = []
    markdown: dict[str, str] = {}
    for order, sec in enumerate(sections if sections is not None else split_filing(clean)):
        r = render_section(sec)
        doc = GroundingDocument(
            doc_id=sec.doc_id,
            title=sec.title,
            kind=doc_kind(r.prose_chars, r.table_chars),
            tokens=count_tokens(r.markdown),
            tables=r.tables,
            images=r.images,
            source_sha256=sha,
            source_kind=kind,
            file=f"{sec.doc_id}.md",
            source_ids=[x for x in (info.get("accession"), info["cik"]) if x],
            metadata={
                "order": order,
                "section_type": sec.section_type,
                "part": sec.part,
                "item": sec.item,
                "source_span": sec.span,
                "items_covered": sec.covers,
                **{k: info[k] for k in ("form", "company", "period_end")},
            },
        )
        docs.append(doc)
        markdown[doc.file] = r.markdown
    return Grounded(kind, sha, docs, markdown, clean.facts, info)


def merge_grounded(parts: list[Grounded]) -> Grounded:
    """One folder per snapshot: an arXiv window holds several papers, a filing snapshot one filing."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        raise ValueError("nothing to merge")
    docs, md, facts = [], {}, None
    for p in parts:
        for d in p.documents:
            if d.file in md:
                raise FrameInputError(d.file, "two sources produce the same document name")
            docs.append(d)
            md[d.file] = p.markdown[d.file]
        if p.facts is not None:
            facts = (facts or []) + p.facts
    sha = hashlib.sha256("".join(p.source_sha256 for p in parts).encode()).hexdigest()
    return Grounded(parts[0].kind, sha, docs, md, facts, {"sources": [p.meta for p in parts]})


def facts_table(facts: list[Fact]) -> pa.Table:
    """The facts as an Arrow table. Built through Arrow's JSON reader, not `Table.from_pydict`: building
    arrays from Python lists makes pyarrow import pandas (~1 s of a `frame ground` run) to ask whether
    they are pandas objects. JSON carries every value here exactly (floats as shortest round-trip
    text); a non-finite float, which JSON cannot carry, takes the from_pydict path."""
    names = [f.name for f in FACTS_SCHEMA]
    rows = [{n: getattr(x, n) for n in names} for x in facts]
    if not rows:
        return FACTS_SCHEMA.empty_table()
    if any(isinstance(v, float) and not math.isfinite(v) for r in rows for v in r.values()):
        return pa.Table.from_pydict({n: [r[n] for r in rows] for n in names}, schema=FACTS_SCHEMA)
    data = "\n".join(json.dumps(r, ensure_ascii=False, allow_nan=False) for r in rows).encode("utf-8")
    opts = pa_json.ParseOptions(explicit_schema=FACTS_SCHEMA, unexpected_field_behavior="error")
    # one block for all rows: a row may not straddle blocks (a TextBlock fact can hold a whole note)
    reads = pa_json.ReadOptions(block_size=max(1 << 20, len(data) + 1))
    table = pa_json.read_json(io.BytesIO(data), read_options=reads, parse_options=opts)
    # The reader refuses a null in a "not null" field but labels every column nullable; the columns
    # are the schema's types already, so they are re-labelled, not cast (a cast imports
    # pyarrow.compute: ~25 ms of a `frame ground` run).
    return pa.Table.from_arrays(table.columns, schema=FACTS_SCHEMA)


def check_output_folder(out_dir: Path) -> None:
    """Refuse, before anything is written, an output that is a file (or a symlink) or that names no
    folder of its own ('.', '..', '/'): replacing it would leave `.NAME.old-PID` or move the wrong folder."""
    out_dir = Path(out_dir)
    if out_dir.name in ("", ".", ".."):
        raise FrameInputError(out_dir, "names no folder of its own; give the folder to write")
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise FrameInputError(out_dir, "is a file, not a folder; give the folder to write")


def write_grounding(result: Grounded, out_dir: Path) -> Path:
    """Write DIR/*.md, DIR/documents.json (+ facts.parquet for filings) and DIR/MANIFEST.json (last),
    all or nothing: a temp folder beside DIR replaces an existing DIR in one atomic exchange
    (`tasks.manifest.write_folder`; what a killed earlier run left beside DIR is cleaned first)."""
    out_dir = Path(out_dir)
    check_output_folder(out_dir)

    def fill(tmp: Path) -> None:
        for name, text in result.markdown.items():
            (tmp / name).write_text(text, encoding="utf-8")
        index = [d.model_dump(mode="json") for d in result.documents]
        (tmp / "documents.json").write_text(
            json.dumps(index, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        if result.facts is not None:
            pq.write_table(facts_table(result.facts), tmp / "facts.parquet")

    write_folder(out_dir, fill)
    return out_dir
