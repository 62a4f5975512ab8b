"""Gold report validation (SPEC §2 step 8).

- skeleton: the gold report's headings equal the outline's and no placeholder is left;
- numbers: every number in the filled content is found in the grounding documents or facts, or
  follows from two grounding numbers of one document by simple arithmetic (sum, difference,
  ratio or percent change, at the precision shown). Each unsupported number is recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tasks.ground.load import GroundingSet
from tasks.synthesize.outline import headings, is_skeleton_heading

# A displayed number: digits with thousands separators and decimals; signs and units are context.
NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.,])\d+(?:\.\d+)?(?![\d,]\d)")


@dataclass
class GoldValidation:
    skeleton_equal: bool
    placeholders_left: int
    numbers_total: int
    numbers_supported: int
    unsupported: list[dict] = field(default_factory=list)  # {"number", "node_id", "context"}

    @property
    def support_rate(self) -> float:
        return self.numbers_supported / self.numbers_total if self.numbers_total else 1.0

    @property
    def ok(self) -> bool:
        return self.skeleton_equal and self.placeholders_left == 0


def _value(token: str) -> float:
    return float(token.replace(",", ""))


def _decimals(token: str) -> int:
    return len(token.split(".", 1)[1]) if "." in token else 0


class NumberEvidence:
    """Numbers of a grounding set: exact tokens, values, and values per document for arithmetic."""

    def __init__(self, gset: GroundingSet) -> None:
        self.tokens: set[str] = set()
        self.values: set[float] = set()
        self.per_doc: list[np.ndarray] = []
        for text in gset.texts.values():
            found = NUMBER.findall(text)
            self.tokens.update(found)
            vals = sorted({_value(t) for t in found})
            self.values.update(vals)
            self.per_doc.append(np.array(vals[:600], dtype=float))  # bounded pair search per document
        for f in gset.facts:
            shown = (f.get("displayed_text") or "").strip()
            if NUMBER.fullmatch(shown):
                self.tokens.add(shown)
                self.values.add(_value(shown))

    def supports(self, token: str) -> bool:
        if token in self.tokens or _value(token) in self.values:
            return True
        return self.derivable(token)

    def derivable(self, token: str) -> bool:
        target, places = _value(token), _decimals(token)
        tol = 0.5 * 10.0**-places + 1e-9
        for arr in self.per_doc:
            if arr.size < 2:
                continue
            a, b = arr[:, None], arr[None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                candidates = (a + b, np.abs(a - b), 100.0 * (a - b) / b, 100.0 * a / b, a / b)
            for c in candidates:
                if np.any(np.abs(c - target) <= tol):
                    return True
        return False


def validate_gold(gold: str, outline: str, contents: dict[str, str], gset: GroundingSet) -> GoldValidation:
    left = gold.count("<!-- FILL")
    skeleton_equal = headings(gold) == headings(outline) and not any(
        is_skeleton_heading(ln) for c in contents.values() for ln in c.split("\n")
    )
    evidence = NumberEvidence(gset)
    total = supported = 0
    unsupported: list[dict] = []
    for node_id, content in contents.items():
        for m in NUMBER.finditer(content):
            total += 1
            if evidence.supports(m.group()):
                supported += 1
            else:
                ctx = content[max(0, m.start() - 60) : m.end() + 60].replace("\n", " ")
                unsupported.append({"number": m.group(), "node_id": node_id, "context": ctx})
    return GoldValidation(skeleton_equal, left, total, supported, unsupported)
