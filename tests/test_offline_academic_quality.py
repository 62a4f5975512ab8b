"""Quality of the offline backend's academic gold reports (issue 12), measured over every arXiv report
of the demo release (configs/demo.toml: every academic_simple / academic_complex domain, every window):

1. no sentence appears twice in one report (in two sections, or twice within one section);
2. no raw citation key (`Smith:2016qas`, `2022arXiv221106397W`, `khan2016frequency`, `bib.bib12`,
   LaTeXML remnants such as `LABEL:tab:x`) and no artefact of a removed citation (`( )`, `(; )`, ` ,`);
3. no table cell that says a value was not found ("not stated", "n/a — not reported", ...) unless the
   table row is copied as is from the grounding documents (a source table may show "NA");
4. no out-of-context cross-reference in prose ("in Section 4", "see Fig. 3", "Table 2 shows", "Eq. (5)",
   "as shown above", "in this section", ...); a caption's own label ("Figure 2: ...") is not one.

Prose is split into sentences with headings, table rows, image lines, code and display equations left
out; 2 and 4 also look at the cells of table rows that are not copied from the grounding documents
(the comparison grid the fill builds from sentences).

The detectors below are independent of the fill code (their own sentence splitter and patterns) and
are unit-tested on constructed bad examples. The release comes from the session-scoped `demo_release`
fixture (tests/conftest.py), shared with the scoring and generation tests: no extra build.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import pyarrow.parquet as pq
import pytest

from schemas.config import ArxivDomain
from tasks.config import load_config
from tests.conftest import ROOT

ACADEMIC = ("academic_simple", "academic_complex")

# ---------------------------------------------------------------- prose of a report


@dataclass(frozen=True)
class Sentence:
    section: str  # the heading path, e.g. "Research Themes > LEGWORK: ..."
    text: str


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_ROW = re.compile(r"^\s*\|")
_IMAGE = re.compile(r"^\s*!\[")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
_CAPTION_LABEL = re.compile(r"^(?:Table|TABLE|Tab\.|Figure|FIGURE|Fig\.)\s*[A-Z]?\d+[a-z]?\s*[:.|]\s*")
# a full stop after one of these does not end a sentence
_NO_END = re.compile(
    r"(?:\b(?:e\.g|i\.e|et al|etc|vs|cf|approx|Fig|Figs|Eq|Eqs|Sec|Secs|Ref|Refs|Tab|No|Nos|Dr|Mr|Ms|St|resp|"
    r"viz|al|Inc|Co|Corp|Ltd|Jr|Sr)|\b[A-Z])\.$"
)


def prose_paragraphs(markdown: str) -> list[tuple[str, str]]:
    """(heading path, paragraph) for every prose paragraph and list item of a Markdown report; headings,
    table rows, image lines, code fences and display equations are left out."""
    out: list[tuple[str, str]] = []
    path: list[tuple[int, str]] = []
    buf: list[str] = []
    fence = False

    def flush() -> None:
        if buf:
            out.append((" > ".join(t for lv, t in path if lv >= 2), " ".join(buf)))
            buf.clear()

    for line in markdown.splitlines():
        s = line.strip()
        if s.startswith("```"):
            flush()
            fence = not fence
            continue
        if fence:
            continue
        m = _HEADING.match(line)
        if m:
            flush()
            level = len(m.group(1))
            path = [(lv, t) for lv, t in path if lv < level] + [(level, m.group(2))]
            continue
        if not s or _TABLE_ROW.match(line) or _IMAGE.match(s) or s.startswith("$$"):
            flush()
            continue
        if _ITEM.match(line):
            flush()
            buf.append(_ITEM.sub("", line).strip())
            flush()
            continue
        buf.append(s)
    flush()
    return out


def sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph: a cut after . ! ? (and closing quotes/brackets) before an upper-case
    letter, digit or opening bracket, except after an abbreviation or an initial or inside $...$."""
    out, start = [], 0
    for m in re.finditer(r"[.!?][\"”’)\]]*\s+(?=[\"“(\[]?[A-Z0-9])", paragraph):
        head = paragraph[start : m.start() + 1].rstrip('"”’)]')
        if _NO_END.search(head) or paragraph.count("$", 0, m.start()) % 2:
            continue
        out.append(paragraph[start : m.end()].strip())
        start = m.end()
    if paragraph[start:].strip():
        out.append(paragraph[start:].strip())
    return out


def report_sentences(markdown: str) -> list[Sentence]:
    return [Sentence(sec, s) for sec, para in prose_paragraphs(markdown) for s in sentences(para)]


# ---------------------------------------------------------------- detectors


def repeated_sentences(markdown: str, min_words: int = 5) -> list[str]:
    """Sentences (of at least `min_words` words) that occur more than once, with where they occur."""
    where: dict[str, list[str]] = defaultdict(list)
    for s in report_sentences(markdown):
        key = " ".join(s.text.split())
        if len(key.split()) >= min_words:
            where[key].append(s.section)
    out = []
    for key, secs in where.items():
        if len(secs) > 1:
            kind = "across sections" if len(set(secs)) > 1 else "within a section"
            out.append(f"{kind} {secs}: {key}")
    return out


_CITATION_KEYS = [
    re.compile(r"\b[A-Z][A-Za-z-]+:\d{4}[a-z]{2,4}\b"),  # INSPIRE: Smith:2016qas, LIGOScientific:2021usb
    re.compile(r"\b\d{4}arXiv\d{7,}[A-Z]\b"),  # ADS arXiv bibcode: 2022arXiv221106397W
    re.compile(r"\b(?:19|20)\d\d[A-Z][A-Za-z&]{1,5}[.\d]{3,}\.*\d*[A-Z.]?\d*[A-Z]\b"),  # 2019PASA...36...10T
    re.compile(r"\b[a-z][a-z_-]*(?:19|20)\d\d[a-z][a-z0-9_]*\b"),  # khan2016frequency, ilin2021giant
    re.compile(r"\b[a-z]+-etal-\d{4}-[a-z0-9-]+"),  # ACL anthology: wang-etal-2025-coderag
    re.compile(r"\b[a-z]+_[a-z]+_\d{4}_\d+\b"),  # zenodo: kaze_wong_2023_7706605
    re.compile(
        r"\b[A-Z][a-z]+(?:19|20)\d\d[A-Z][A-Za-z]+\b|\b[a-z]+_(?:19|20)\d\d\b"
    ),  # Storn1997DifferentialE
    re.compile(r"\b[A-Z][A-Za-z-]+:[A-Z]+\d+\w*"),  # Shoemaker:T0900288
    re.compile(r"\b[A-Z][a-z]+[A-Z][A-Za-z]*\.\d+\.\d+"),  # PhysRevD.89.061502
    re.compile(
        r"\b10\.\d{4,9}/\S+|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    ),  # DOI, UUID
    re.compile(r"\bbib\.bib\d+\b"),  # LaTeXML anchors
    re.compile(r"\bLABEL:\S+|\bltx_\w+|\\cite[tp]?\*?\{|\\ref\{|\(\?\)|\[\?\]"),  # LaTeXML/TeX remnants
    # a bracket of key-like tokens only: [repocoder, evor], [surveyrag] (a Markdown link is not one)
    re.compile(r"\[[a-z][\w-]*(?:[,;]\s*[a-z][\w:-]*)*\](?!\()"),
]
# what a removed citation leaves behind
_CITATION_ARTEFACTS = [
    re.compile(r"(?<![\w\])])\(\s*[,;]*\s*\)"),  # "( )", "(; )" (a call such as f() is fine)
    re.compile(r"\[\s*[,;]*\s*\]"),  # "[ ]"
    re.compile(r"\((?:e\.g\.|i\.e\.|see|cf\.)[,;]?\s*\)", re.IGNORECASE),  # "(e.g., )"
    re.compile(r"\w \s*[,;.](?:\s|$)"),  # "word ," "word ."
    re.compile(r"\(\s*[,;]|[,;]\s*\)"),  # "(; a)", "(a, )"
]


def _source_rows(grounding: str) -> set[str]:
    return {" ".join(ln.split()) for ln in grounding.splitlines() if _TABLE_ROW.match(ln)}


def generated_cells(markdown: str, grounding: str = "") -> list[Sentence]:
    """Cells of the table rows that are not copied as they are from `grounding` (the comparison grid the
    fill builds from sentences), as `Sentence("table", cell)`."""
    rows = _source_rows(grounding)
    return [
        Sentence("table", cell)
        for line in markdown.splitlines()
        if _TABLE_ROW.match(line)
        and not re.fullmatch(r"[\s|:-]+", line)
        and " ".join(line.split()) not in rows
        for cell in _cells(line)
        if cell
    ]


def citation_defects(markdown: str, grounding: str = "") -> list[str]:
    """Sentences of the prose, and cells of tables not copied from `grounding`, with a citation key or
    what a removed citation leaves behind."""
    out = []
    for s in report_sentences(markdown) + generated_cells(markdown, grounding):
        hits = [m.group(0) for p in _CITATION_KEYS for m in p.finditer(s.text)]
        hits += [repr(m.group(0)) for p in _CITATION_ARTEFACTS for m in p.finditer(s.text)]
        if hits:
            out.append(f"{s.section}: {hits}: {s.text}")
    return out


_NOT_FOUND = re.compile(
    r"\bnot (?:found|stated|reported|available|given|disclosed|provided|mentioned|specified|applicable)\b|"
    r"\bno (?:data|value|information)\b|\bnone (?:reported|found|stated)\b|\bunknown\b|"
    r"^\s*(?:n/?a|none|missing)\b",
    re.IGNORECASE,
)


def _cells(row: str) -> list[str]:
    s = row.strip()
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") and not s.endswith("\\|") else s
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


def not_found_cells(markdown: str, grounding: str = "") -> list[str]:
    """Table cells saying that a value is missing, unless their whole row is copied from `grounding`
    (a source table may show "NA" or "not reported" itself)."""
    source_rows = _source_rows(grounding)
    out = []
    for line in markdown.splitlines():
        if not _TABLE_ROW.match(line) or re.fullmatch(r"[\s|:-]+", line):
            continue
        if " ".join(line.split()) in source_rows:
            continue
        bad = [c for c in _cells(line) if _NOT_FOUND.search(c)]
        if bad:
            out.append(f"{bad}: {line.strip()[:300]}")
    return out


_XREF = re.compile(
    r"\b(?:sections?|secs?\.|§)\s*~?(?:\d+|[IVX]+\b|[A-H]\b)"  # Section 4, Sec. 2.1, Section IV, § 3
    r"|§\s*\d"
    r"|\b(?:figures?|figs?\.)\s*~?\d+"  # Figure 3, Fig. 3, figs. 2 and 3
    r"|\b(?:tables?|tabs?\.)\s*~?\d+"  # Table 2
    r"|\b(?:equations?|eqns?\.?|eqs?\.)\s*~?\(?\d+"  # Eq. (5), equation 3
    r"|\b(?:appendix|appendices|app\.)\s+[A-Z0-9]\b"  # Appendix C
    r"|\b(?:algorithm|listing|theorem|lemma|corollary|proposition|definition)\s+\d+"
    r"|\b(?:shown|seen|discussed|described|mentioned|noted|given|illustrated|listed|presented|explained|"
    r"outlined|derived|defined|demonstrated|detailed|introduced|summari[sz]ed|reported|stated|cited)\s+"
    r"(?:above|below|earlier|previously|later)\b"
    r"|\bas (?:follows|above|below)\b|\b(?:above|below)-mentioned\b"
    r"|\b(?:this|the (?:next|following|previous|preceding|present|current|last|remaining|subsequent|"
    r"above|below)|later|earlier|subsequent|previous|following|preceding|next)\s+(?:sub)?(?:sections?|chapters?|"
    r"paragraphs?|appendix|appendices)\b"
    r"|\bthe (?:above|following|preceding|aforementioned) (?:equations?|figures?|tables?|expressions?|"
    r"relations?|plots?|panels?)\b"
    r"|\b(?:in|of|from|see) (?:the|this) (?:figures?|tables?|plots?|panels?|insets?)\b"  # "of the figure"
    r"|\bin (?:the )?appendix\b"
    r"|\bLABEL:",
    re.IGNORECASE,
)


def cross_references(markdown: str, grounding: str = "") -> list[str]:
    """Sentences of the prose (a caption's leading label left out), and cells of tables not copied from
    `grounding`, that refer to a part of the paper."""
    out = []
    cells = [(c.section, c.text) for c in generated_cells(markdown, grounding)]
    for sec, para in prose_paragraphs(markdown) + cells:
        for s in sentences(_CAPTION_LABEL.sub("", para)):
            m = _XREF.search(s)
            if m:
                out.append(f"{sec}: {m.group(0)!r}: {s}")
    return out


# ---------------------------------------------------------------- the detectors catch what they should


def test_detectors_on_constructed_examples():
    bad = """# Survey

## Overview

We present LEGWORK, a package for LISA sources. It evolves binaries over time.

## Research Themes

### LEGWORK

We present LEGWORK, a package for LISA sources. In Section 2 we describe the package.
Methods include reduced-order quadrature (Canizares:2014fya; Smith:2016qas), as in 2022arXiv221106397W and
khan2016frequency. Earlier work [repocoder, evor] and the bibcode 2019PASA...36...10T are cited ( ).
See bib.bib12 for details, and Table LABEL:tab:starparams for the stars. Noise curves follow
Shoemaker:T0900288 and Storn1997DifferentialE [97be971b-f829-3ce8-80b8-a2e1dc1e11df] (doi:10.2307/2246093).

| Paper | Approach | Key result |
|---|---|---|
| LEGWORK | We present LEGWORK (Smith:2019ucc). | not stated in the retrieved passages |
| GRASS | In §5, we present first results. | We find Y. |
| Other | n/a — not reported | We find X. |

![Figure 3: The horizon distance, see Section 3.](S4.F3)

Figure 3: The horizon distance. The colour scale is as in Fig. 2.

- The results are shown below for each model and each run.
- Eq. (5) gives the strain of a circular binary at one frequency.

It evolves binaries over time. In this section, we demonstrate its use. The costs are summarized in Table 1.
"""
    rep = repeated_sentences(bad)
    assert any("across sections" in r and "We present LEGWORK" in r for r in rep), rep
    assert any("It evolves binaries over time." in r for r in rep), rep
    cites = " ".join(citation_defects(bad))
    for key in (
        "Canizares:2014fya",
        "Smith:2016qas",
        "2022arXiv221106397W",
        "khan2016frequency",
        "[repocoder, evor]",
        "2019PASA...36...10T",
        "bib.bib12",
        "LABEL:tab:starparams",
        "Shoemaker:T0900288",
        "Storn1997DifferentialE",
        "97be971b-f829-3ce8-80b8-a2e1dc1e11df",
        "10.2307/2246093",
        "'( )'",
    ):
        assert key in cites, key
    cells = not_found_cells(bad)
    assert len(cells) == 2 and "not stated" in cells[0] and "n/a" in cells[1], cells
    assert any(c.startswith("table:") and "Smith:2019ucc" in c for c in citation_defects(bad)), "table cell"
    assert any(c.startswith("table:") and "§5" in c for c in cross_references(bad)), "table cell"
    source = "| Other | n/a — not reported | We find X. |\n"
    assert len(not_found_cells(bad, grounding=source)) == 1  # a row copied from G may say so itself
    xrefs = " ".join(cross_references(bad))
    for ref in ("Section 2", "Fig. 2", "shown below", "Eq. (5", "In this section", "Table 1", "LABEL:"):
        assert ref in xrefs, ref
    assert "'Figure 3" not in xrefs and "Section 3" not in xrefs  # a caption label and image alt text


def test_detectors_pass_clean_prose():
    good = """# Survey

## Overview

Smith et al. (2016) measured the rate, and the catalogue (Abbott et al., 2021) lists 90 events. The
sampler runs on GPUs, i.e. it is fast. Dr. A. Smith et al. found $x = 1.5$. In this paper we find that
binaries above 10 solar masses merge. The Table Mountain site and the figure of merit are named. The Astro2020
survey is cited. Results:We find no event.

| Parameter | Range |
|---|---|
| $z$ | NA |

Table 1: Summary of the models.

![Figure 2: Strain versus frequency.](S2.F2)

Figure 2: Strain versus frequency. The code calls build_planet() once.
"""
    assert repeated_sentences(good) == []
    assert citation_defects(good) == []
    assert not_found_cells(good, grounding="| $z$ | NA |") == []
    assert cross_references(good) == []
    assert sentences("Dr. A. Smith et al. found $x = 1.5$. It rose by 3.5 per cent. Then it fell.") == [
        "Dr. A. Smith et al. found $x = 1.5$.",
        "It rose by 3.5 per cent.",
        "Then it fell.",
    ]


# ---------------------------------------------------------------- the offline fill on constructed passages


def _paper_leaves():
    from schemas.structure import ReportStructure, StructureNode

    text = StructureNode(id="s1.t1", type="text", title="Waveform model accuracy", sources=["p1"])
    again = StructureNode(id="s2.t1", type="text", title="Waveform model accuracy", sources=["p1"])
    grid = StructureNode(id="s3.tb1", type="table", title="Comparison", sources=["p1", "p2"])
    s = ReportStructure(
        title="r",
        nodes=[
            StructureNode(id="s1", type="section", title="Overview", children=[text]),
            StructureNode(id="s2", type="section", title="Themes", children=[again]),
            StructureNode(id="s3", type="section", title="Comparison", children=[grid]),
        ],
    )
    return s, text, again, grid


def test_offline_fill_cleans_paper_sentences_and_never_repeats_one():
    from tasks.llm.backend import Passage, StepContext
    from tasks.synthesize.offline import NO_EVIDENCE, OfflineBackend

    s, text, again, grid = _paper_leaves()
    paper = StepContext("d", "W1", "academic_simple", "arxiv")
    body = (
        "We improve the waveform model accuracy (khan2016frequency; Smith:2016qas) by calibrating it. "
        "The waveform model accuracy is listed in Tab. 1 for every run. "
        "As shown by khan2016frequency, the waveform model accuracy is limited. "
        "The waveform model accuracy reaches 0.99 in all runs (see Fig. 3) [Footnote 1: Measured twice.]. "
        "In this section we describe the waveform model accuracy in detail."
    )
    passages = [Passage("p1", body, "text", 1.0, 90)]
    be, used = OfflineBackend(), set()
    out = be.fill(text, s, passages, paper, used=used)
    assert out == (
        "We improve the waveform model accuracy by calibrating it. "
        "The waveform model accuracy reaches 0.99 in all runs."
    ), out
    assert not citation_defects(out) and not cross_references(out)
    assert be.fill(again, s, passages, paper, used=used) == NO_EVIDENCE  # everything is placed already
    assert be.fill(again, s, passages, paper) == out  # without `used` the same leaf gets the same text
    # a filing keeps its sentences as they are (no cleaning, no report-wide memory)
    filing = StepContext("d", "t", "financial_quarterly", "edgar")
    kept = be.fill(text, s, passages, filing, used=set())
    assert "khan2016frequency" in kept and "Tab. 1" in kept


def test_offline_comparison_grid_leaves_missing_values_out():
    from tasks.llm.backend import Passage, StepContext
    from tasks.synthesize.offline import OfflineBackend

    s, _, _, grid = _paper_leaves()
    paper = StepContext("d", "W1", "academic_simple", "arxiv")
    passages = [
        Passage("p1", "We present a new sampler for the comparison of waveforms.", "text", 1.0, 12),
        Passage("p2", "We propose a flexible comparison framework (Lee:2022jpn).", "text", 0.9, 12),
    ]
    out = OfflineBackend().fill(grid, s, passages, paper)
    assert out.splitlines() == [
        "| Paper | Approach |",
        "|---|---|",
        "| p1 | We present a new sampler for the comparison of waveforms. |",
        "| p2 | We propose a flexible comparison framework. |",
    ], out  # no result sentence anywhere: no "Key result" column, no "not stated" cell
    passages.append(Passage("p1", "We find that the sampler is 10 times faster.", "text", 0.8, 10))
    rows = OfflineBackend().fill(grid, s, passages, paper).splitlines()
    assert rows == [
        "| Paper | Approach | Key result |",
        "|---|---|---|",
        "| p1 | We present a new sampler for the comparison of waveforms. "
        "| We find that the sampler is 10 times faster. |",
    ], rows  # p2 gives no result: its row is left out rather than shown with an empty cell (issue 34)
    assert not_found_cells("\n".join(rows)) == []


def test_clean_sentence_examples():
    from tasks.synthesize.offline.clean import clean_sentence

    cases = {
        "We use flowMC (2022arXiv221106397W; Gabrie:2021tlu), with MALA as the sampler.": (
            "We use flowMC, with MALA as the sampler."
        ),
        "Flares occur at high latitudes (ilin2021giant, Table LABEL:tab:starparams).": (
            "Flares occur at high latitudes."
        ),
        "Models are trained on outdated repositories [otterly2024knowledge], reducing adaptability.": (
            "Models are trained on outdated repositories, reducing adaptability."
        ),
        "The code talks to PSG (via libpypsg, see Section 3) to make a phase curve.": (
            "The code talks to PSG (via libpypsg) to make a phase curve."
        ),
        "We recover the map (top left panel of Figure 6) with high fidelity.": (
            "We recover the map with high fidelity."
        ),
        "The catalogue (Abbott et al., 2021) lists GW150914 (GW150914; GW151226).": (
            "The catalogue (Abbott et al., 2021) lists GW150914 (GW150914; GW151226)."
        ),
        "Cross sections through the bed show a band at $x (1)$.": (
            "Cross sections through the bed show a band at $x (1)$."
        ),
        "More chains help, as shown in this work and 2022arXiv221106397W, to cut burn-in.": None,
        "Lastly, the costs of DeepSeek-V3, summarized in Table 1, are low.": None,
        "In Section 2 we give an overview of the package.": None,
        "We show scatter plots in the upper-right inset of the figure.": None,
        "The pseudocode is given as follows:": None,
        "Google hereby grants permission to reproduce the tables and figures in this paper.": None,
    }
    for sentence, want in cases.items():
        assert clean_sentence(sentence) == want, sentence


# ---------------------------------------------------------------- every academic report of the demo


@pytest.fixture(scope="module")
def academic_reports(demo_release) -> list[tuple[str, str, str]]:
    """(report name, Markdown, grounding Markdown) of every academic report of the demo release."""
    reports = pq.read_table(demo_release / "reports.parquet").to_pylist()
    docs = pq.read_table(demo_release / "grounding_documents.parquet").to_pylist()
    grounding: dict[tuple[str, str], list[str]] = defaultdict(list)
    for d in docs:
        grounding[(d["domain"], d["snapshot"])].append(d["markdown"])
    out = [
        (f"{r['domain']}/{r['snapshot']}", r["markdown"], "\n".join(grounding[(r["domain"], r["snapshot"])]))
        for r in reports
        if r["category"] in ACADEMIC
    ]
    demo = load_config(ROOT / "configs" / "demo.toml")  # the config the session's demo release was built from
    windows = sum(len(d.windows) for d in demo.domains if isinstance(d, ArxivDomain))
    assert len(out) == windows, [name for name, _, _ in out]  # one report per arXiv window
    assert all(r["backend"] == "offline" for r in reports)
    return sorted(out)


def _failures(reports, check) -> str:
    lines = [f"{name}: {d}" for name, md, g in reports for d in check(md, g)]
    return f"{len(lines)} defect(s):\n" + "\n".join(lines)


def test_no_repeated_sentences(academic_reports):
    msg = _failures(academic_reports, lambda md, g: repeated_sentences(md))
    assert msg.startswith("0 "), msg


def test_no_raw_citation_keys(academic_reports):
    msg = _failures(academic_reports, citation_defects)
    assert msg.startswith("0 "), msg


def test_no_not_found_table_cells(academic_reports):
    msg = _failures(academic_reports, not_found_cells)
    assert msg.startswith("0 "), msg


def test_no_out_of_context_references(academic_reports):
    msg = _failures(academic_reports, cross_references)
    assert msg.startswith("0 "), msg
