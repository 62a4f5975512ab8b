"""A paper's author names and affiliation lines, read from its LaTeXML ``ltx_creator`` blocks (the
front matter of tasks.ground.paper's document)."""

from __future__ import annotations

import re
from typing import Any, Protocol

from tasks.ground.paper_html import _MACRO_ERROR, _classes, _math_tex
from tasks.ground.paper_meta import has_class
from tasks.ground.tables import collapse_ws


class _LineRenderer(Protocol):
    """What is used of tasks.ground.paper's renderer (which imports this module, so it is not named)."""

    def flat_text(self, el: Any) -> tuple[str, list]: ...


_AUTHOR_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&|\u2003|\u2002|\u2001|\u2000|\s{3,})\s*")


def _author_names(doc: Any, r: _LineRenderer) -> tuple[list[str], list[str]]:
    """Author names (heuristic: the first line of each author block) and the other author lines
    (affiliations, e-mails) from ``ltx_creator`` elements."""
    names: list[str] = []
    extra: list[str] = []
    for creator in doc.xpath(f".//*[{has_class('ltx_creator')}]"):
        if "ltx_role_author" not in _classes(creator) and "ltx_role_editor" not in _classes(creator):
            continue
        for pn in creator.xpath(f".//*[{has_class('ltx_personname')}]"):
            for group in _personname_groups(pn):
                # names run on over a <br> when each of those lines carries affiliation marks
                # ("A¹ B² <br> C¹ <br> ¹Univ"), the affiliation lines start with their mark
                n = 1
                if _MARK in group[0]:
                    while n < len(group) and _MARK in group[n] and not group[n].startswith(_MARK):
                        if "@" in group[n]:
                            break
                        n += 1
                first = "\u2003".join(x.replace(_MARK, "") for x in group[:n])
                rest = [collapse_ws(x.replace(_MARK, "")) for x in group[n:]]
                for part in _AUTHOR_SPLIT.split(first):
                    part = part.strip(" ,;*†‡§¶∗0123456789")
                    if names and re.fullmatch(r"(?:Jr|Sr)\.?|I{2,3}|IV", part):
                        names[-1] += ", " + part  # "J. I. Bailey, III"
                    elif part and re.search(r"[^\W\d_]", part) and part not in names:
                        names.append(part)
                extra.extend(x for x in rest if x and x not in extra)
        for contact in creator.xpath(f".//*[{has_class('ltx_role_affiliation')}]"):
            t, _ = r.flat_text(contact)
            if t and t not in extra:
                extra.append(t)
    return names, extra


_MARK_TEX = re.compile(r"^\s*(?:\{\})?\s*\^|^\s*\\(?:ast|dagger|ddagger|star|S|P|sharp|flat|natural)\s*$")
_AUTHOR_BREAK_MACROS = {"\\AND", "\\And", "\\and"}
_MARK = "\x01"  # where an affiliation mark (superscript) was dropped


def _personname_groups(pn: Any) -> list[list[str]]:
    """Lines of a personname (split at <br>; superscript marks, notes and contact blocks dropped),
    grouped per author block: a block starts at a line opening with "&" or at LaTeX's \\And."""
    lines: list[list[str]] = [[]]

    def at_line_start() -> bool:
        current = "".join(lines[-1])
        return not current.strip() or bool(re.search(r"\n[ \t\xa0]*$", current))

    def visit(el: Any) -> None:
        if el.text:
            lines[-1].append(el.text)
        for c in el:
            if isinstance(c.tag, str):
                cc = _classes(c)
                if c.tag == "br":
                    lines.append([])
                elif c.tag == "math":
                    tex = _math_tex(c)
                    if not _MARK_TEX.search(tex):
                        lines[-1].append(f"${tex}$")
                    else:
                        if at_line_start():  # "{}^{1}Department of ...": an affiliation line
                            lines.append([])
                        lines[-1].append(_MARK)
                elif "ltx_ERROR" in cc:
                    if c.text_content().strip() in _AUTHOR_BREAK_MACROS:
                        lines.append(["&"])
                    elif not _MACRO_ERROR.match(c.text_content() or ""):
                        visit(c)
                elif c.tag == "sup":
                    lines[-1].append(_MARK)
                elif c.tag == "sub" or cc & {"ltx_note", "ltx_contact", "ltx_author_notes"}:
                    pass
                else:
                    visit(c)
            if c.tail:
                lines[-1].append(c.tail)

    visit(pn)
    groups: list[list[str]] = []
    pieces: list[str] = []
    for parts in lines:  # an "&" at the start of a source line also opens an author block
        raw = re.split(r"\n[ \t\xa0]*(?=&)", "".join(parts))
        pieces.extend(raw)
    for s in pieces:
        s = re.sub(r"[ \t\r\n\f\v\xa0]+", " ", s).strip()  # keep em spaces: they separate authors
        starts_block = s.startswith("&")
        s = s.lstrip("& ").strip()
        if not s.replace(_MARK, "").strip():
            s = ""
        if not s:
            if starts_block:
                groups.append([])
            continue
        if starts_block or not groups:
            groups.append([s])
        else:
            groups[-1].append(s)
    return [g for g in groups if g]
