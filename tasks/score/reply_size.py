"""How long a reply the extraction prompts ask for: information units (score_units) and claims
(score_claims) restate every sentence and every figure of every table row of the text they are given,
each item with its source sentence or row copied verbatim, so their reply grows with the figures of the
part, not with its tokens (a 10-Q part of 2,000 tokens can hold 200 figures: a reply of about 18,000
tokens). Parts are cut so that the reply expected here fits the role's output budget (docs/endpoints.md,
"Output budgets").

The expected reply is the one a model following the prompt writes: per prose sentence (or list item,
caption) about one item per two figures it states (at least one), restating the sentence; per table row
one item per figure cell, "<row label> were <value> (<unit>) in <column heading>", the row as its source;
each with its type and section path. Its tokens are counted as the JSON the prompt asks for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from tasks.markdown.pieces import markdown_pieces, row_parts, strong_numbers, unit_note
from tasks.tokens import count_tokens

__all__ = ["REPLY_FILL", "expected_items", "expected_reply_tokens", "extraction_measure"]

# Share of the output budget the expected reply may fill: the estimate is of a compliant model, and
# models restate with more or fewer words
REPLY_FILL = 0.75


def _item(content: str, source: str, section: str) -> dict[str, str]:
    return {"type": "statistic", "content": content, "source_sentence": source, "section": section}


def expected_items(text: str) -> list[dict[str, str]]:
    """The items a compliant reply lists for `text` (Markdown), in order."""
    items: list[dict[str, str]] = []
    for p in markdown_pieces(text):
        section = " > ".join(p.path)
        if p.kind == "row":
            label, context, pairs, stated = row_parts(p.text, p.source)
            note = unit_note(stated) if stated else ""
            figures = [(h, v) for h, v in pairs if strong_numbers(v)] or [("", "")]
            for header, value in figures:
                said = " ".join(x for x in (context, label, "were" if value else "", value, note) if x)
                said = said or p.text or p.source
                items.append(_item(f"{said} in {header}" if header else said, p.source, section))
            continue
        words = p.text.split()
        k = max(1, math.ceil(len(strong_numbers(p.text)) / 2))
        per = max(12, math.ceil(len(words) / k))
        for i in range(k):
            part = words[i * per : (i + 1) * per] or words[-per:]
            items.append(_item(" ".join(part), p.source, section))
    return items


def expected_reply_tokens(text: str) -> int:
    """Tokens of the JSON reply a compliant model writes for `text` ({"units": [...]} or {"claims": ...})."""
    return count_tokens(json.dumps({"units": expected_items(text)}, ensure_ascii=False))


def extraction_measure(input_room: int, output_budget: int) -> Callable[[str], int]:
    """The size of a text as a part of an extraction request whose prompt may hold `input_room` tokens and
    whose reply `output_budget`: its tokens, or its expected reply scaled to the input room, whichever is
    larger. Parts packed to at most `input_room` of this measure fit both."""
    target = max(1, int(output_budget * REPLY_FILL))

    def measure(text: str) -> int:
        return max(count_tokens(text), math.ceil(expected_reply_tokens(text) * input_room / target))

    return measure
