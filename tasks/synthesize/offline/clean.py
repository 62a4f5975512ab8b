"""Sentences of a paper made fit to stand in a report (used by the offline `fill` role for arXiv sets).

A sentence copied from a paper may carry things that only make sense inside the paper. `clean_sentence`
returns the sentence with those removed, or None when they cannot be removed cleanly (the sentence is
then not used). Nothing is added or reworded; only whole citation groups, reference parentheticals and
footnote brackets are cut, so every number left was in the paper.

- **Citation keys** the paper's HTML shows instead of author-year text (LaTeXML renders an unresolved
  `\\cite` as its key): INSPIRE keys `Smith:2016qas`, ADS bibcodes `2022arXiv221106397W` /
  `2019PASA...36...10T`, author-year-word keys `khan2016frequency`, ACL keys `wang-etal-2025-coderag`,
  Zenodo keys `kaze_wong_2023_7706605`, LaTeXML anchors `bib.bib12`, unresolved references
  `LABEL:tab:x`, `[?]`, DOIs, UUIDs, `Shoemaker:T0900288`, `Storn1997DifferentialE`, `PhysRevD.89.061502`.
  Inside a parenthesis or bracket group (items split at ';', then ',') the key items are dropped, and
  so are `gwtc3`-like tokens and, in a group that holds a key, every lone token ("(lalsuite;
  Smith:2019ucc)"); a group left without content (or with only "e.g."/"see") is removed together
  with the space before it, so "(Smith:2016qas; Lee:2022jpn)." leaves no "( )" or " ." behind. A
  bracket holding only lower-case tokens (`[repocoder, evor]`) is such a group too. A key outside any
  group ("as shown by khan2016frequency") cannot be cut without breaking the sentence: None.
- **Cross-references** to parts of the paper the report does not have (`cross_reference`): "Section
  4", "Sec. 2.1", "§5", "Fig. 3", "Table 2", "Eq. (5)", "Appendix C", "Algorithm 1", "shown above",
  "as follows", "in this section", "the following subsections", "the above equation", "in the
  figure". A parenthesis holding only such references ("(Section 2)", "(see Fig. 3)", "(top left
  panel of Figure 6)", "(Equations 6, 7)") is removed, and so is a trailing ", see Section 3" clause
  inside a parenthesis; any other reference: None.
- **Footnotes** inlined by the grounding as "[Footnote 1: ...]" are cut out of the paragraph around
  them; a paragraph that is a footnote alone is unwrapped (`strip_footnotes`).
- Sentences that end with ':' (they introduce a list, equation or table that is not quoted) and
  licence lines ("grants permission to reproduce") are None.
- Garbled remnants: a space before ',' ';' or '.' outside math, or "( )" left by the source: None.
- Colour commands in math (`\\color[rgb]{0,0,0}`) are dropped, what they colour kept.

`$...$` math is never looked into (it is masked while the rules run).
"""

from __future__ import annotations

import re

from tasks.markdown.text import split_sentences

__all__ = ["clean_caption", "clean_sentence", "cross_reference", "has_citation_key", "strip_footnotes"]

_KEY = (
    r"(?:[A-Z][A-Za-z-]+:\d{4}[a-z]{2,4}"  # INSPIRE
    r"|(?:19|20)\d\d[A-Za-z&][A-Za-z&.\d]{12,15}[A-Z]"  # ADS bibcode (19 characters)
    r"|\d{4}arXiv\d{7,}[A-Z]"
    r"|(?:19|20)\d\d[A-Z][A-Za-z]+(?:-[A-Za-z]+)*"  # 2020SciPy-NMeth
    r"|[a-z][a-z_-]*[a-z](?:19|20)\d\d[a-z][a-z0-9_]*"  # khan2016frequency
    r"|[a-z][a-z_-]*[a-z](?:19|20)\d\d\b"  # smith2016
    r"|[a-z]+-etal-\d{4}-[a-z0-9-]+"  # ACL anthology
    r"|[a-z]+_[a-z]+_\d{4}_\d+"  # Zenodo
    r"|[A-Z][a-z]+(?:19|20)\d\d[A-Z][A-Za-z]+"  # Storn1997DifferentialE (not Cook2006: Astro2020 is a name)
    r"|[a-z]+_(?:19|20)\d\d"  # arviz_2019
    r"|[A-Z][A-Za-z-]+:[A-Z]+\d+\w*"  # Shoemaker:T0900288 (not "Results:We", a run-in heading)
    r"|[A-Z][a-z]+[A-Z][A-Za-z]*\.\d+\.\d+"  # PhysRevD.89.061502
    r"|(?:doi:)?10\.\d{4,9}/[^\s;,()\[\]]+"  # a DOI
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # a UUID
    r"|bib\.bib\d+"  # LaTeXML anchor
    r"|(?:[A-Z][a-z]+\s+)?LABEL:[\w:.-]*\w)"  # LaTeXML unresolved \ref (with its "Table" word)
)
_KEY_RE = re.compile(rf"(?<![\w.:/-]){_KEY}(?![\w:/-])")
_KEY_ITEM = re.compile(rf"(?:(?:e\.g\.|i\.e\.|see|cf\.|also)[,\s]*)*{_KEY}")
_LOWER_TOKEN = re.compile(r"[a-z][\w:-]*")
_GROUP_KEY = re.compile(r"[a-z][a-z_]{2,}\d{1,4}[a-z_]*")  # gelmanbda04, gwtc3: a key inside a group only
_TOKEN = re.compile(r"[\w.:/&-]+")
_FILLER_ONLY = re.compile(r"(?:e\.g\.|i\.e\.|see|cf\.|also|and|or|[,;\s])*", re.IGNORECASE)

_REF_NOUN = (
    r"(?:sub)?(?:sections?|secs?\.|§|figures?|figs?\.|tables?|tabs?\.|equations?|eqns?\.?|eqs?\.|"
    r"appendix|appendices|app\.|algorithms?|listings?|theorems?|lemmas?|corollar(?:y|ies)|propositions?|"
    r"definitions?)"
)
_REF_NUM = r"(?:\s*~?\(?(?-i:[A-Z])?\d+(?:\.\d+)*[a-z]?\)?|\s+(?-i:[A-Z]|[IVX]+)\b)"
_REF = rf"(?:{_REF_NOUN}{_REF_NUM}(?:\s*(?:,|and|&|–|-|to){_REF_NUM})*|§\s*\d+(?:\.\d+)*)"
_XREF = re.compile(
    rf"(?<![\w-]){_REF}"
    r"|\b(?:shown|seen|discussed|described|mentioned|noted|given|illustrated|listed|presented|explained|"
    r"outlined|derived|defined|demonstrated|detailed|introduced|summari[sz]ed|reported|stated|cited)\s+"
    r"(?:above|below|earlier|previously|later)\b"
    r"|\bas (?:follows|above|below)\b|\b(?:above|below)-mentioned\b"
    r"|\b(?:this|the (?:next|following|previous|preceding|present|current|last|remaining|subsequent|above|"
    r"below)|later|earlier|subsequent|previous|following|preceding|next)\s+(?:sub)?(?:sections?|chapters?|"
    r"paragraphs?|appendix|appendices)\b"
    r"|\bthe (?:above|following|preceding|aforementioned) (?:equations?|figures?|tables?|expressions?|"
    r"relations?|plots?|panels?)\b"
    r"|\b(?:in|of|from|see) (?:the|this) (?:figures?|tables?|plots?|panels?|insets?)\b"
    r"|\bin (?:the )?appendix\b"
    r"|LABEL:",
    re.IGNORECASE,
)
_REF_FILLER = (
    r"(?:see|cf\.|compare|e\.g\.,?|i\.e\.,?|also|and|or|as in|in|of|the|top|bottom|left|right|middle|upper|"
    r"lower|panels?|[,;]|\s)*"
)
_REF_GROUP = re.compile(rf"\s*\(\s*{_REF_FILLER}{_REF}(?:{_REF_FILLER}{_REF})*\s*\)", re.IGNORECASE)
_REF_TAIL = re.compile(rf"\s*[,;]\s*(?:see|cf\.|compare)\s+(?:also\s+)?{_REF}(?=\s*\))", re.IGNORECASE)
_NOTE_OPEN = r"\[Footnote(?: [^\s:\]]{1,4})?:\s*"  # "[Footnote 1: ", "[Footnote: ", "[Footnote a: "
_FOOTNOTE = re.compile(rf"\s*{_NOTE_OPEN}((?:[^\[\]]|\[[^\[\]]*\])*)\]")
_LICENCE = re.compile(
    r"grants? permission to reproduce|all rights reserved|licensed under|creative commons", re.IGNORECASE
)
_GARBLED = re.compile(r"\w\s+[,;.](?:\s|$)|(?<![\w\])])\(\s*[,;]*\s*\)|\[\s*[,;]*\s*\]|\(\s*[,;]|[,;]\s*\)")
_MATH = re.compile(r"\$[^$]*\$")
_CAPTION_LABEL = re.compile(r"^(?:Table|TABLE|Tab\.|Figure|FIGURE|Fig\.)\s*[A-Z]?\d+[a-z]?\s*[:.|]\s*")


def _mask(text: str) -> tuple[str, list[str]]:
    spans: list[str] = []

    def keep(m: re.Match[str]) -> str:
        spans.append(m.group(0))
        return f"\x00{len(spans) - 1}\x00"

    return _MATH.sub(keep, text), spans


# LaTeXML keeps the paper's colour commands in its math ("{\\color[rgb]{0,0,0}{11^{+0.71}}}"): they
# change no value, Markdown math renderers reject the [model] form, and "[rgb]" reads as a citation key
_COLOR = re.compile(r"\\color\s*(?:\[[A-Za-z]+\])?\s*\{[^{}]*\}")


def plain_math(span: str) -> str:
    """A math span without its colour commands (what they colour stays)."""
    return _COLOR.sub("", span)


def _unmask(text: str, spans: list[str]) -> str:
    return re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], text)


def _is_key(item: str) -> bool:
    return bool(_KEY_ITEM.fullmatch(item.strip()))


def _citation_group(m: re.Match[str]) -> str:
    """A parenthesis/bracket group without its citation keys ('' when nothing else is left)."""
    space, open_, body, close = m.group(1), m.group(2), m.group(3), m.group(4)
    tokens = [x.strip() for x in re.split(r"[,;]", body)]
    if open_ == "[" and body.strip() and all(_LOWER_TOKEN.fullmatch(x) for x in tokens):
        return ""  # [repocoder, evor, ma2025tool]: key-like tokens only
    keyish = any(_is_key(x) or _GROUP_KEY.fullmatch(x) for x in tokens)
    items = []
    changed = False
    for part in body.split(";"):
        subs = part.split(",")
        # in a group that cites by key, a lone token (no space: "pytorch", "lalsuite") is a key too
        kept = [
            x
            for x in subs
            if not (_is_key(x) or _GROUP_KEY.fullmatch(x.strip()) or (keyish and _TOKEN.fullmatch(x.strip())))
        ]
        if len(kept) != len(subs):
            changed = True
        if kept and not _FILLER_ONLY.fullmatch(",".join(kept)):
            items.append(",".join(kept).strip())
    if not changed:
        return m.group(0)
    if not items:
        return ""
    return f"{space}{open_}{'; '.join(items)}{close}"


_GROUP = re.compile(r"(\s*)([(\[])([^()\[\]]*)([)\]])(?!\()")


def _strip_citations(text: str) -> str:
    return _GROUP.sub(_citation_group, text)


def has_citation_key(text: str) -> bool:
    masked, _ = _mask(text)
    return bool(_KEY_RE.search(masked)) or "[?]" in masked or "(?)" in masked


def cross_reference(text: str) -> str | None:
    """The first out-of-context reference in `text` (math ignored), else None."""
    masked, _ = _mask(text)
    m = _XREF.search(masked)
    return m.group(0) if m else None


def strip_footnotes(paragraph: str) -> str:
    """Cut inline "[Footnote N: ...]" out of a paragraph; a paragraph that is one footnote is unwrapped."""
    s = paragraph.strip()
    whole = _FOOTNOTE.fullmatch(s)
    if whole:
        return whole.group(1).strip()
    if re.match(_NOTE_OPEN, s) and "]" not in s:  # a footnote cut by a page break
        return re.sub(f"^{_NOTE_OPEN}", "", s)
    return _FOOTNOTE.sub("", paragraph)


def clean_sentence(sentence: str) -> str | None:
    """The sentence without citation keys and reference parentheticals, or None (module docstring)."""
    text = sentence.strip()
    text = re.sub(f"^{_NOTE_OPEN}", "", text)
    if text.endswith("]") and text.count("]") > text.count("["):
        text = text[:-1].rstrip()
    masked, spans = _mask(text)
    masked = masked.replace("(?)", "").replace("[?]", "")
    masked = _strip_citations(masked)
    masked = _REF_TAIL.sub("", masked)
    masked = _REF_GROUP.sub("", masked)
    masked = re.sub(r"\s{2,}", " ", masked).strip()
    if not masked or _KEY_RE.search(masked) or _XREF.search(masked) or _GARBLED.search(masked):
        return None
    if masked.endswith(":") or _LICENCE.search(masked):
        return None
    if masked[:1].islower() and not sentence.strip()[:1].islower():
        return None  # a cut at the start left a fragment
    return _unmask(masked, [plain_math(x) for x in spans])


def clean_caption(paragraph: str) -> str:
    """A "Figure N: ..." / "Table N: ..." caption (or a table's intro/footnote paragraph) keeping the label
    and the sentences `clean_sentence` accepts; '' when no sentence is left."""
    text = " ".join(paragraph.split())
    m = _CAPTION_LABEL.match(text)
    label, body = (m.group(0), text[m.end() :]) if m else ("", text)
    kept = [c for c in (clean_sentence(s) for s in split_sentences(body)) if c]
    if not kept:
        return ""
    return (label + " ".join(kept)).strip()
