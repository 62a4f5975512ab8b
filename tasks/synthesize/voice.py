"""Filing text in the third person: a gold report describes the company, it does not speak for it.

A filing says "we" and "our" ("Our primary sources of liquidity are ..."); a sentence copied from it
into a gold report must read "The company's primary sources of liquidity are ...". `third_person`
rewrites the first-person plural of a filing's Markdown:

- "we" -> "the company", with the verb that follows (after adverbs such as "also" or any "-ly" word) in
  the third person singular: are/were/have/do -> is/was/has/does (and their "n't" forms), a base verb
  gets its "-s"/"-es"/"-ies"; a modal (may, will, ...), a past form ("-ed", "had", "sold", ...) and a
  conjunction or preposition after "we" ("we and our subsidiaries") and a name joined to "we" ("NVIDIA
  and we are": a plural subject) leave it alone;
- "our"/"ours" -> "the company's", "us" -> "the company", "ourselves" -> "itself"; "we're", "we've",
  "we'll", "we'd" -> "the company is/has/will/would"; once the sentence has named the company, "it"
  and "its" instead ("The company believes that it has ... to meet its needs"); a sentence start
  keeps its capital.

Left alone: quoted text ("..." and “...”), table rows, code, image lines, a line that is only bold text
(a demoted heading such as "**Our Company**"), and "Our" before a capitalised word inside a sentence
(a title or a name: "see Our Commitments"). Limits: the verb rule reads one word, so an irregular
present is only right when it takes "-s"; "it"/"its" may point at another noun of the sentence named
after the company; "We, as a company, lead" keeps "lead"; a first person in a quotation marked other
than "..." or “...” (or spanning lines) is rewritten.
"""

from __future__ import annotations

import re

__all__ = ["third_person"]

_MODAL = frozenset("may might will would can could should must shall cannot".split())
_IRREGULAR = {"are": "is", "were": "was", "have": "has", "do": "does"}
_IRREGULAR |= {"aren't": "isn't", "weren't": "wasn't", "haven't": "hasn't", "don't": "doesn't"}
_IRREGULAR |= {"aren’t": "isn’t", "weren’t": "wasn’t", "haven’t": "hasn’t", "don’t": "doesn’t"}
_PAST = frozenset(
    """had did made sold paid began grew saw took got went spent held bought built brought kept left led lost
    met ran said sent set thought won wrote became chose drew fell felt found gave knew lent meant rose
    sought shut sat stood struck told understood withdrew""".split()
)
_NOT_VERB = frozenset(
    "and or nor but as with together to in of at for than that who which alone ourselves".split()
)
_ADVERB = frozenset(
    "also currently generally still now often typically primarily further only continually "
    "regularly already always never not again".split()
)
_CONTRACTION = {"'re": "is", "'ve": "has", "'ll": "will", "'d": "would"}

_ADVERBS = r"(?:\s+(?:[a-z]+ly|" + "|".join(sorted(_ADVERB)) + r")\b)*"
_WE = re.compile(r"\b([Ww]e)(['’](?:re|ve|ll|d)\b)?(" + _ADVERBS + r")(\s+)([a-z’']+)")
_WE_ALONE = re.compile(r"\b([Ww]e)\b")
_OUR = re.compile(r"\b([Oo]urs?)\b(\s+[A-Z]\w*)?")
_US = re.compile(r"\bus\b")
_OURSELVES = re.compile(r"\bourselves\b")
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|^\s*(?:[-*+]|\d{1,3}[.)])\s+)$")


def _third(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _MODAL or low in _PAST or low.endswith("ed") or low in _NOT_VERB or low.endswith("n't"):
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _starts(text: str, pos: int) -> bool:
    return bool(_SENTENCE_START.search(text[:pos]))


def _named(text: str, pos: int) -> bool:
    """Whether the sentence around `pos` names the company before it (then "it"/"its" reads right)."""
    sentence = re.split(r"[.!?]\s+", text[:pos])[-1]
    return bool(re.search(r"\b(?:[Tt]he [Cc]ompany|[Ww]e|[Oo]urs?|us)\b", sentence))  # or will once rewritten


def _sub(rx: re.Pattern[str], text: str, fn) -> str:
    """`rx.sub` whose replacement also sees the text it is applied to (for the sentence context)."""
    return rx.sub(lambda m: fn(m, text), text)


def _we(m: re.Match[str], text: str) -> str:
    again = _named(text, m.start())
    start = _starts(text, m.start())
    subject = ("It" if start else "it") if again else ("The company" if start else "the company")
    rest = m.group(3) + m.group(4) + m.group(5)
    if m.group(2):
        return subject + " " + _CONTRACTION["'" + m.group(2)[1:]] + rest
    # "NVIDIA and we are": a name joined to "we" is a plural subject ("..., and we are" is a new clause)
    compound = re.search(r"\b[A-Z][\w.&-]*\s+(?:and|or|nor)\s+$", text[: m.start()])
    verb = m.group(5) if compound else _third(m.group(5))
    return subject + m.group(3) + m.group(4) + verb


def _we_alone(m: re.Match[str], text: str) -> str:
    start = _starts(text, m.start())
    if _named(text, m.start()):
        return "It" if start else "it"
    return "The company" if start else "the company"


def _our(m: re.Match[str], text: str) -> str:
    word, nxt = m.group(1), m.group(2) or ""
    start = _starts(text, m.start())
    if word == "Our" and nxt and not start:
        return m.group(0)  # a title or name inside a sentence ("see Our Commitments")
    if word.lower() == "our" and _named(text, m.start()):
        return ("Its" if start else "its") + nxt
    return ("The company's" if start else "the company's") + nxt


def _us(m: re.Match[str], text: str) -> str:
    return "it" if _named(text, m.start()) else "the company"


def _rewrite(text: str) -> str:
    """The rewrite of one stretch of unquoted prose, rule by rule (each sees the previous one's output)."""
    for rx, fn in ((_WE, _we), (_WE_ALONE, _we_alone), (_OUR, _our), (_US, _us)):
        text = _sub(rx, text, fn)
    return _OURSELVES.sub("itself", text)


def _line(line: str) -> str:
    s = line.strip()
    if not s or s.startswith("|") or s.startswith("![") or re.fullmatch(r"\*\*[^*]+\*\*", s):
        return line
    out, at = [], 0
    for m in _QUOTED.finditer(line):
        out += [_rewrite(line[at : m.start()]), m.group(0)]
        at = m.end()
    out.append(_rewrite(line[at:]))
    return "".join(out)


def third_person(markdown: str) -> str:
    """`markdown` with a filing's first-person plural in the third person (module docstring)."""
    lines, fence = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        lines.append(line if fence or line.lstrip().startswith(("```", "~~~")) else _line(line))
    return "\n".join(lines)
