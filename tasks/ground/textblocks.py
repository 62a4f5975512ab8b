"""The filing's own evidence of where its notes are: iXBRL note-level text blocks.

US-GAAP tagging puts every footnote of the financial statements in one `ix:nonNumeric` whose
concept ends in `TextBlock` (level 1), continued over pages through an `ix:continuation` chain
(`continuedAt` -> `id`). Accounting-policy (level 2) and table (level 3) blocks are details of a
note: their concepts end in `PolicyTextBlock` / `TableTextBlock`, or they lie inside a note's
extent (from its start to the end of its last continuation), however they are named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

IX = "http://www.xbrl.org/2013/inlineXBRL"
# Cover page, executive compensation / insider trading, cybersecurity (Item 1C): text blocks of the
# Form's items, not notes to the financial statements.
_NON_NOTE_PREFIXES = ("dei:", "ecd:", "cyd:")
_DETAIL_SUFFIXES = ("PolicyTextBlock", "TableTextBlock")


@dataclass(frozen=True)
class NoteBlock:
    """One note-level text block: the element where it starts, its concept and its extent."""

    element: etree._Element
    concept: str
    start: int  # positions among the document's ix:nonNumeric / ix:continuation elements, in order:
    end: int  # where the note starts and where its last continuation starts

    @property
    def label(self) -> str:
        return concept_label(self.concept)


def concept_label(concept: str) -> str:
    """A readable name from a concept: `us-gaap:IncomeTaxDisclosureTextBlock` -> `Income Tax`."""
    local = concept.split(":", 1)[-1]
    local = re.sub(r"(Disclosures?|Notes?)?TextBlock$", "", local)
    local = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", local)
    return local.strip() or "Note"


def _is_text_block(el: etree._Element) -> bool:
    return el.tag == f"{{{IX}}}nonNumeric" and el.get("name", "").endswith("TextBlock")


def note_blocks(root: etree._Element) -> list[NoteBlock]:
    """Note-level text blocks of an iXBRL document, in document order (see the module doc).

    Only the ix: elements are walked (in document order): a block nested in another block or in a
    continuation is excluded by its ancestors, so a note's extent ends where its last continuation
    starts, and a block that starts before that is one of its details."""
    cont, nonnum = f"{{{IX}}}continuation", f"{{{IX}}}nonNumeric"
    position: dict[str, int] = {}  # continuation id -> position
    candidates: list[tuple[int, etree._Element]] = []
    for i, el in enumerate(root.iter(nonnum, cont)):
        if el.tag == cont:
            if el.get("id"):
                position[el.get("id")] = i
        elif el.get("name", "").endswith("TextBlock"):
            candidates.append((i, el))
    continued = {el.get("id"): el.get("continuedAt") for el in root.iter(cont) if el.get("id")}

    notes: list[NoteBlock] = []
    for start, el in candidates:
        name = el.get("name", "")
        if name.startswith(_NON_NOTE_PREFIXES) or name.endswith(_DETAIL_SUFFIXES):
            continue
        if any(
            a.tag in (cont, f"{{{IX}}}hidden", f"{{{IX}}}header") or _is_text_block(a)
            for a in el.iterancestors()
        ):
            continue
        if notes and start <= notes[-1].end:
            continue  # inside the previous note's extent: a detail block of that note
        end, seen, nxt = start, set(), el.get("continuedAt")
        while nxt and nxt not in seen and nxt in position:
            seen.add(nxt)
            end = max(end, position[nxt])
            nxt = continued.get(nxt)
        notes.append(NoteBlock(el, name, start, end))
    return notes
