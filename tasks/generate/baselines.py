"""Non-LLM baseline generators for FRAME instances (paper §5): given the sample report S (form) and the
grounding documents G of the target period, produce a report R' for the target period.

* `copy_sample` returns S unchanged: the "nothing changed" floor (perfect form, stale content).
* `extractive` keeps S's skeleton - every heading line of S in order, the H1 title included,
  byte-identical but for the period it names (`Renewal`: a heading naming the sample's period, "...
  for the period ended July 30, 2023", names the target's instead) - and under each heading puts
  passages of G retrieved for that section with the BM25 index of `tasks.synthesize.retrieve` (query =
  S's heading path as written + the first sentence of S's content under the heading, so the form of S
  steers what is pulled). Where S had a table under a heading, one table of G
  is preferred there; elsewhere only prose/list passages are used. Passages are copied verbatim (whole,
  never cut), so no number is invented or altered; each passage is used at most once per report; each
  section gets at most `TEXT_BUDGET` tokens of prose (at most `TEXT_K` passages) and at most one table of
  at most `TABLE_BUDGET` tokens. Headings of S with no content of their own (pure containers) stay empty.

`Renewal` is shared with the section-by-section LLM strategy (`tasks/generate/sections.py`): a heading
of S that names S's period (t_sample) is rewritten for the target period (t_target) by
`tasks.markdown.periods.rewrite_title`; the target's fiscal year and quarter are read from G's text
(`fiscal_from_text`: the release's rows carry no dei facts), the sample's counted back from them. Other
headings stay byte-identical, and so does every heading of an instance without t_sample / t_target.

Both are deterministic. `generate_report(system, instance_row, grounding_rows)` dispatches by name over
`GENERATORS`. Rows are plain mappings as read from the release tables (`instances.parquet`,
`grounding_documents.parquet`), e.g. `pyarrow.parquet.read_table(...).to_pylist()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schemas.structure import StructureNode
from tasks.ground.load import grounding_set_from_rows
from tasks.markdown.document import Heading, code_mask, heading_of
from tasks.markdown.periods import Period, find_periods, rewrite_title, snapshot_period
from tasks.markdown.text import split_sentences
from tasks.synthesize.retrieve import RetrievalIndex, parse_blocks

__all__ = [
    "GENERATORS",
    "HONOURED",
    "Renewal",
    "TABLE_BUDGET",
    "TEXT_BUDGET",
    "TEXT_K",
    "SampleSection",
    "copy_sample",
    "extractive",
    "generate_report",
    "grounding_rows_for",
    "sample_sections",
]

TEXT_BUDGET = 300  # o200k_base tokens of prose/list passages per section
TEXT_K = 3  # at most this many prose/list passages per section
TABLE_BUDGET = 1500  # largest table copied into a section (a larger one is skipped whole, never cut)


# ---------------------------------------------------------------- rows -> grounding set


def grounding_rows_for(instance_row: Mapping[str, Any], grounding_rows: Iterable[Mapping[str, Any]]) -> list:
    """The rows of `grounding_documents` that make up this instance's G (its grounding set, restricted to
    its `grounding_doc_ids` when given), in the order of `grounding_doc_ids`."""
    gid = instance_row.get("grounding_set_id")
    rows = [r for r in grounding_rows if gid is None or r.get("grounding_set_id") == gid]
    ids = instance_row.get("grounding_doc_ids")  # a list, or a numpy array when read from parquet
    wanted = list(ids) if ids is not None else []
    if not wanted:
        return rows
    by_id = {r["doc_id"]: r for r in rows}
    return [by_id[d] for d in wanted if d in by_id]


# ---------------------------------------------------------------- the skeleton of S


@dataclass(frozen=True)
class SampleSection:
    """One heading line of S with its heading path and what S put directly under it."""

    line: str  # the heading line, byte-identical
    level: int
    path: tuple[str, ...]  # heading texts from the top down to (and including) this one
    body: str  # S's content between this heading and the next heading of any level
    has_table: bool
    first_sentence: str


def _heading(line: str) -> Heading | None:
    """A heading line of a report as the generators read one: '#'s at column 0, then spaces or tabs and
    a non-blank character (a stricter reading than retrieval's)."""
    return heading_of(line, indent="none", space="tabs", text="word")


def sample_sections(markdown: str) -> tuple[str, list[SampleSection]]:
    """(preamble before the first heading, one SampleSection per heading line of S, in order).
    Lines inside fenced code blocks are never headings."""
    preamble: list[str] = []
    heads: list[tuple[str, int, tuple[str, ...], list[str]]] = []
    stack: list[tuple[int, str]] = []
    lines = markdown.splitlines()
    for line, code in zip(lines, code_mask(lines, "any-fence"), strict=True):
        h = None if code else _heading(line)
        if h is not None:
            while stack and stack[-1][0] >= h.level:
                stack.pop()
            stack.append(h)
            heads.append((line, h.level, tuple(t for _, t in stack), []))
            continue
        (heads[-1][3] if heads else preamble).append(line)
    sections = []
    for line, level, path, body_lines in heads:
        body = "\n".join(body_lines).strip()
        blocks = parse_blocks(body) if body else []
        first = ""
        for b in blocks:
            if b.kind in ("text", "list") and not b.code:
                sents = split_sentences(b.text)
                first = sents[0] if sents else b.text.strip()
                break
        has_table = any(b.kind == "table" for b in blocks)
        sections.append(SampleSection(line, level, path, body, has_table, first))
    return "\n".join(preamble).strip(), sections


# ---------------------------------------------------------------- S's headings for the target period


class Renewal:
    """S's headings for the target period (module docstring): `title` and `line` rewrite a heading that
    names the sample's period; the periods are worked out on the first heading that names any period."""

    def __init__(self, instance_row: Mapping[str, Any], grounding_rows: Iterable[Mapping[str, Any]] = ()):
        self._sample = str(instance_row.get("t_sample") or "")
        self._target = str(instance_row.get("t_target") or "")
        self._annual = instance_row.get("category") == "financial_annual"
        self._rows = grounding_rows
        self._periods: tuple[Period, Period] | None = None

    def periods(self) -> tuple[Period, Period]:
        """(the sample's period, the target's)."""
        if self._periods is None:
            texts = (str(r.get("markdown") or "") for r in self._rows)
            new = snapshot_period(self._target, annual=self._annual, texts=texts)
            old = snapshot_period(self._sample, annual=self._annual)
            if old.end is not None and new.end is not None:
                old = new.at(old.end)
            self._periods = (old, new)
        return self._periods

    def title(self, title: str) -> str:
        if not self._sample or not self._target or self._sample == self._target:
            return title
        if not find_periods(title) and self._sample not in title:  # cheap: most headings name no period
            return title
        return rewrite_title(title, *self.periods())

    def line(self, line: str) -> str:
        """A heading line of S, its '#'s and spacing kept."""
        h = _heading(line)
        if h is None or not h.title:
            return line
        at = line.rfind(h.title)
        new = self.title(h.title)
        return line if at < 0 or new == h.title else line[:at] + new + line[at + len(h.title) :]


# ---------------------------------------------------------------- generators


def copy_sample(instance_row: Mapping[str, Any], grounding_rows: Iterable[Mapping[str, Any]] = ()) -> str:
    """The sample report S, unchanged."""
    return str(instance_row["sample_markdown"])


def _safe(text: str) -> str:
    """A passage never introduces a heading line into the output (it would change S's skeleton)."""
    return "\n".join("\\" + ln if _heading(ln) else ln for ln in text.splitlines())


# Rules of a generation skill (schemas.evolve.Rule.tag) that `extractive` can honour, since it can
# check them itself: a section ends on a complete sentence, no near-repeat of a passage already used, no
# section of S left empty. Other rules leave its output unchanged.
HONOURED = frozenset({"complete-ending", "no-repetition", "fill-empty"})
EMPTY_NOTE = "The documents of this period do not cover this section."
# a complete ending as the rubric's not-truncated gate reads one: ":" and ";" announce more text
_END = (".", "!", "?", ")", "]", '"', "'", "|", "…", "”", "’", "$")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s)")


def _complete(text: str) -> str:
    """`text` cut after its last complete sentence ('' if it has none): a passage never ends mid-sentence."""
    text = text.rstrip()
    if not text or text.endswith(_END) or "\n|" in text:
        return text
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()].rstrip() if ends else ""


def _near_repeat(text: str, used: list[str]) -> bool:
    from rapidfuzz import fuzz

    return any(fuzz.token_set_ratio(text, u) >= 90 for u in used)


def _section_passages(
    index: RetrievalIndex, i: int, sec: SampleSection, used: set, honour: frozenset
) -> list:
    node = StructureNode(
        id=f"h{i}",
        type="table" if sec.has_table else "text",
        title=sec.path[-1] if sec.path else "",
        objective=sec.first_sentence,
        questions=list(sec.path[:-1]),  # heading path above, at question weight (0.5)
    )
    ranked = [p for p in index.rank(node) if (p.doc_id, p.text) not in used]
    chosen = []
    if sec.has_table:
        table = next((p for p in ranked if p.kind == "table" and p.tokens <= TABLE_BUDGET), None)
        if table is not None:
            chosen.append(table)
    left = TEXT_BUDGET
    n_text = 0
    for p in ranked:
        if n_text >= TEXT_K:
            break
        if p.kind in ("text", "list") and p.tokens <= left:
            if "no-repetition" in honour and _near_repeat(p.text, [t for _, t in used]):
                continue
            chosen.append(p)
            left -= p.tokens
            n_text += 1
    return chosen


def extractive(
    instance_row: Mapping[str, Any],
    grounding_rows: Iterable[Mapping[str, Any]],
    honour: Iterable[str] = (),
) -> str:
    """S's headings (renewed for the target period), each filled with the most relevant verbatim passages
    of G (see the module docstring); the passages are retrieved for S's headings as written.
    `honour`: skill rule tags of HONOURED to apply (others are ignored)."""
    honour = frozenset(honour) & HONOURED
    rows = list(grounding_rows)
    _, sections = sample_sections(str(instance_row["sample_markdown"]))
    index = RetrievalIndex.shared(grounding_set_from_rows(rows))
    renewal = Renewal(instance_row, rows)
    used: set[tuple[str, str]] = set()
    out: list[str] = []
    for i, sec in enumerate(sections):
        out.append(renewal.line(sec.line))
        out.append("")
        if not sec.body:  # a pure container in S: keep it a container
            continue
        texts = []
        for p in _section_passages(index, i, sec, used, honour):
            used.add((p.doc_id, p.text))
            text = _safe(p.text.strip())
            if "complete-ending" in honour and p.kind != "table":
                text = _complete(text)
            if text:
                texts.append(text)
        if not texts and "fill-empty" in honour:
            texts.append(EMPTY_NOTE)
        for text in texts:
            out.append(text)
            out.append("")
    text = "\n".join(out).strip()
    return text + "\n" if text else ""


Generator = Callable[[Mapping[str, Any], Iterable[Mapping[str, Any]]], str]

GENERATORS: dict[str, Generator] = {"copy-sample": copy_sample, "extractive": extractive}


def generate_report(
    system: str, instance_row: Mapping[str, Any], grounding_rows: Iterable[Mapping[str, Any]]
) -> str:
    """R' for one instance by the named baseline system (a key of GENERATORS)."""
    try:
        gen = GENERATORS[system]
    except KeyError:
        raise ValueError(f"unknown generator {system!r} (known: {', '.join(sorted(GENERATORS))})") from None
    return gen(instance_row, list(grounding_rows))
