"""The offline judge: figures and embeddings, deterministic (docs/metrics/faithfulness.md), with the
stage-2 checks (number support, derivations, combined-evidence windows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schemas.scoring import Claim, GroundingText, ItemScore
from tasks.lru import BoundedLRU
from tasks.markdown.direction import opposite
from tasks.markdown.numbers import PERCENT, POINTS, Num, derivation, periods_agree, units_agree
from tasks.markdown.text import names, words
from tasks.score.faithfulness.claims import _norm, _sig, claims_of
from tasks.score.faithfulness.ground import _Analysis, _Ground, _GroundCache, _shares, _Unit
from tasks.score.faithfulness.items import _item, _paired, _trim
from tasks.score.faithfulness.params import CLAIMS_KEPT, DERIVE_POOL, SPECIFIC_DIGITS, WIDE_DIGITS
from tasks.score.judges import EmbedFn


def _derive(target: Num, pool: Sequence[Num]) -> str | None:
    """An arithmetic expression over two figures of `pool` giving `target` (``numbers.derivation``), with
    typed operands so that an expression means something:

    * a percentage: a share or percent change of two amounts (100 * a / b, 100 * (a - b) / b), or a
      sum / difference of two percentages;
    * percentage points (and basis points): a sum / difference of two percentages or of two such figures;
    * any other figure (two or more significant digits): a sum or difference of two amounts of its unit
      (a plain figure against any amount unit) and period, at their stated scale ("$95.4 billion" =
      68,714 + 26,645 in a table stated in millions; a figure of unstated scale also from the figures as
      written, never at another factor of 1000); a ratio a / b only for a figure of three or more
      significant digits (per-share amounts).

    A one-digit figure that is not a percentage is never derived: nearly any pool yields it.
    """
    amounts = [m for m in pool if m.unit not in (PERCENT, POINTS)]
    if target.percent or target.unit == POINTS:
        if target.percent:
            expr = derivation(target, amounts, limit=DERIVE_POOL)
            if expr is not None and expr.startswith("100 *"):
                return expr
        as_amount = Num(target.text, target.value, target.step, False, target.start, target.end)
        rates = [m for m in pool if m.unit in (PERCENT, target.unit)]
        expr = derivation(as_amount, rates, limit=DERIVE_POOL)
        return expr if expr is not None and ("+" in expr or "-" in expr) and "/" not in expr else None
    if _sig(target) < 2:
        return None
    allowed = ("{a} + {b}", "|{a} - {b}|") + (("{a} / {b}",) if _sig(target) >= WIDE_DIGITS else ())

    def kind(expr: str | None) -> bool:
        if expr is None or expr.startswith("100 *"):
            return False
        if "/" in expr:
            return "{a} / {b}" in allowed
        return True

    # operands of its unit and of its period (a sum of this year's figures, not of last year's)
    same_unit = [
        m for m in amounts if units_agree(target.unit, m.unit) and periods_agree(target.period, m.period)
    ]
    expr = derivation(target, same_unit, limit=DERIVE_POOL)
    if kind(expr):
        return expr
    if target.bare and any(m.implied != 1.0 for m in same_unit):
        expr = derivation(target, [m.written() for m in same_unit], limit=DERIVE_POOL)
        if kind(expr):
            return expr
    return None


# ---------------------------------------------------------------- offline judge


class OfflineFaithfulnessJudge:
    """Number-aware embedding judge (docs/metrics/faithfulness.md). `embed` returns L2-normalised rows."""

    def __init__(self, embed: EmbedFn, embedder_name: str) -> None:
        self.embed = embed
        self.embedder_name = embedder_name
        self.name = f"offline:number-aware+{embedder_name}"
        self._grounds = _GroundCache()
        self._claims: BoundedLRU[list[Claim]] = BoundedLRU(CLAIMS_KEPT)  # by report: the embed task's, reused

    def __repr__(self) -> str:
        return f"OfflineFaithfulnessJudge({self.embedder_name!r})"

    # -- claims

    def extract_claims(self, generated_markdown: str) -> list[Claim]:
        got = self._claims.get_or_make(generated_markdown, lambda: claims_of(generated_markdown))
        return [c.model_copy() for c in got]

    # -- helpers

    def _vectors(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        arr = np.asarray(self.embed(distinct), dtype=np.float32)
        if arr.shape[0] != len(distinct):
            raise ValueError(f"{self.embedder_name}: embed returned {arr.shape[0]} rows for {len(distinct)}")
        return dict(zip(distinct, arr, strict=True))

    def _analysis(self, g: _Ground, claim: Claim) -> _Analysis:
        """Candidates and evidence units of a claim (no embedding), computed once per G and claim text."""
        key = (claim.content, claim.source_sentence)
        with g.lock:
            a = g.memo.get(key)
        if a is None:
            a = g.analyse(claim)
            if a.verbatim is not None:
                # the unit of the verbatim passage holding the claim stands for it
                text = _norm(claim.source_sentence or claim.content)
                sib = g.units(a.verbatim)
                a.units = [
                    next((u for u in sib if text in _norm(u.source) or _norm(u.source) in text), sib[0])
                ]
            else:
                a.units = g.top_units(claim, a)
            # a unit stating the opposite direction ("fell" for "rose") gives no text support
            # and a prose claim about named things ("Americas net sales ...") is supported only as far as
            # the unit names them too ("Europe net sales ..." says something else)
            a.opposed = [opposite(claim.content, u.text) for u in a.units]
            row = (claim.source_sentence or "").lstrip().startswith("|")
            a.about = frozenset() if row or a.verbatim is not None else names(claim.content)
            a.gates = [
                0.0 if opp else (len(a.about & words(u.text)) / len(a.about) if a.about else 1.0)
                for u, opp in zip(a.units, a.opposed, strict=True)
            ]
            with g.lock:
                a = g.memo.setdefault(key, a)
        return a

    @staticmethod
    def _empty(claims: Sequence[Claim], stage: int, why: str) -> list[ItemScore]:
        return [_item(c, 0.0, stage, rationale=why) for c in claims]

    # -- stage 1

    def verify(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[ItemScore]:
        claims = list(claims)
        if not claims:
            return []
        g = self._grounds.get(grounding)
        if not g.passages:
            return self._empty(claims, 1, "the grounding set has no passage")
        analyses = [self._analysis(g, c) for c in claims]
        vec = self._vectors(self._stage1_texts(claims, analyses))
        return [self._stage1(g, c, a, vec) for c, a in zip(claims, analyses, strict=True)]

    @staticmethod
    def _stage1_texts(claims: Sequence[Claim], analyses: Sequence[_Analysis]) -> list[str]:
        texts: list[str] = []
        for c, a in zip(claims, analyses, strict=True):
            if a.verbatim is None:
                texts.append(c.content)
                texts.extend(u.text for u in a.units)
        return texts

    def embedding_texts(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[str]:
        """The texts stage 1 of `verify(claims, grounding)` embeds (its analyses are memoised for it)."""
        g = self._grounds.get(grounding)
        if not claims or not g.passages:
            return []
        return self._stage1_texts(claims, [self._analysis(g, c) for c in claims])

    def _stage1(self, g: _Ground, claim: Claim, a: _Analysis, vec: dict[str, np.ndarray]) -> ItemScore:
        units = list(a.units)  # fixed by _analysis; only scores are (re)computed here
        if a.verbatim is not None:
            cos = [1.0]  # identical text: cosine 1, not embedded
        else:
            cv = vec[claim.content]
            cos = [float(np.clip(np.dot(cv, vec[u.text]), -1.0, 1.0)) for u in units]
        scores = []
        for u, c, gate in zip(units, cos, a.gates, strict=True):
            t = 1.0 if a.verbatim is not None else a.text_support(c) * gate
            scores.append(a.combine(a.numbers_in_passage(u.passage), t))
        a.cos, a.scores = cos, scores
        if not units:
            a.best = -1
            return self._empty([claim], 1, "no passage of G shares a term or a figure with the claim")[0]
        best = min(range(len(units)), key=lambda i: (-round(scores[i], 9), -cos[i], i))
        a.best = best
        u = units[best]
        score = float(round(scores[best], 6))
        return _item(
            claim,
            min(1.0, max(0.0, score)),
            1,
            evidence=_trim(g.passages[u.passage].text, u.source),
            evidence_ref=g.doc_id(u.passage),
            rationale=self._why1(a, u, cos[best], a.verbatim is not None, a.gates[best], a.opposed[best]),
        )

    @staticmethod
    def _why1(
        a: _Analysis, u: _Unit, cos: float, verbatim: bool, gate: float = 1.0, opposed: bool = False
    ) -> str:
        text = (
            "verbatim in the passage (text support 1)"
            if verbatim
            else (f"cosine {cos:.3f} -> text support {a.text_support(cos) * gate:.3f}")
        )
        if opposed:
            text += " (the passage states the opposite direction)"
        elif gate < 1.0 and a.about:
            held = sorted(a.about & words(u.text))
            text += f" (names of the claim in the passage: {len(held)}/{len(a.about)})"
        if not a.figs:
            return f"no figures; {text}"
        found = [n.text for n, o in zip(a.figs, a.owners, strict=True) if u.passage in o]
        missing = [n.text for n, o in zip(a.figs, a.owners, strict=True) if u.passage not in o]
        out = f"figures stated in the passage {len(found)}/{len(a.figs)}"
        if found:
            out += f" (found: {', '.join(found[:8])})"
        if missing:
            out += f" (missing: {', '.join(missing[:8])})"
        return f"{out}, numbers {a.numbers_in_passage(u.passage):.3f}; {text}; {a.formula()}"

    # -- stage 2

    def entail(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[ItemScore]:
        claims, stage1 = _paired(claims, stage1)
        if not claims:
            return []
        g = self._grounds.get(grounding)
        if not g.passages:
            return self._empty(claims, 2, "the grounding set has no passage")
        analyses, support, windows = self._stage2_plan(g, claims, stage1)
        vec = self._vectors(self._stage2_texts(claims, windows))
        return [
            self._stage2(g, c, it, a, w, vec, sup)
            for c, it, a, w, sup in zip(claims, stage1, analyses, windows, support, strict=True)
        ]

    def entail_texts(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[str]:
        """The texts `entail(claims, stage1, grounding)` embeds (the windows depend on stage 1's cosines, so
        these are known only once stage 1's texts are embedded)."""
        claims, stage1 = _paired(claims, stage1)
        g = self._grounds.get(grounding)
        if not claims or not g.passages:
            return []
        return self._stage2_texts(claims, self._stage2_plan(g, claims, stage1)[2])

    def _stage2_plan(
        self, g: _Ground, claims: Sequence[Claim], stage1: Sequence[ItemScore]
    ) -> tuple[list[_Analysis], list[tuple[float, list[str]]], list[list[str]]]:
        """Each claim's analysis (stage 1 redone when it ran in another judge object), number support and
        combined-evidence windows."""
        analyses = []
        for c in claims:
            a = self._analysis(g, c)
            if len(a.scores) != len(a.units):
                texts = [] if a.verbatim is not None else [c.content, *(u.text for u in a.units)]
                self._stage1(g, c, a, self._vectors(texts))
            analyses.append(a)
        support = [self._support(g, a) for a in analyses]
        windows: list[list[str]] = []
        for c, a, it, sup in zip(claims, analyses, stage1, support, strict=True):
            # the windows can only matter when full text support would lift the score above stage 1
            best_text = max(a.unit_texts(), default=0.0)
            ceiling = sup[0] if a.figs else 1.0
            windows.append(self._windows(g, a, c.content) if best_text < 1.0 and ceiling > it.score else [])
        return analyses, support, windows

    @staticmethod
    def _stage2_texts(claims: Sequence[Claim], windows: Sequence[list[str]]) -> list[str]:
        return [c.content for c, w in zip(claims, windows, strict=True) if w] + [
            t for w in windows for t in w
        ]

    def _support(self, g: _Ground, a: _Analysis) -> tuple[float, list[str]]:
        if not a.units or not a.figs:
            return 0.0, []
        # memoised per stage-1 outcome: the embed-ahead pass and the score task both need it
        key = (tuple(a.scores), tuple(a.cos))
        got = a.support.get(key)
        if got is None:
            order = self._ranked_units(a)
            top = [a.units[i] for i in order[:3]]
            got = self._number_support(g, a, top[0], top, list(dict.fromkeys(u.passage for u in top)))
            a.support[key] = got
        return got

    @staticmethod
    def _ranked_units(a: _Analysis) -> list[int]:
        return sorted(range(len(a.units)), key=lambda i: (-round(a.scores[i], 9), -a.cos[i], i))

    def _windows(self, g: _Ground, a: _Analysis, claim: str) -> list[str]:
        """The best unit joined with its partner (the next best unit, else its neighbour); none when either
        states the opposite direction to the claim: a window mixing "Americas net sales increased" with
        "Wearables net sales decreased" is no support for "Americas net sales decreased"."""
        if not a.units:
            return []
        order = self._ranked_units(a)
        best = a.units[order[0]]
        others = sorted(
            (i for i in order[1:] if (a.units[i].passage, a.units[i].pos) != (best.passage, best.pos)),
            key=lambda i: (-a.cos[i], i),
        )
        if others:
            partner = a.units[others[0]]
        else:
            sib = g.units(best.passage)
            if len(sib) < 2:
                return []
            partner = sib[best.pos + 1] if best.pos + 1 < len(sib) else sib[best.pos - 1]
        if opposite(claim, best.text) or opposite(claim, partner.text):
            return []
        if a.about and not a.about <= words(f"{best.text} {partner.text}"):
            return []  # the pair does not name what the claim is about
        pair = sorted([best, partner], key=lambda u: (u.passage, u.pos))
        return [f"{pair[0].text} {pair[1].text}"]

    @staticmethod
    def _number_support(
        g: _Ground, a: _Analysis, best: _Unit, top: list[_Unit], near: list[int]
    ) -> tuple[float, list[str]]:
        """Stage-2 number support in [0, 1] and one note per figure (docs/metrics/faithfulness.md,
        "Stage 2")."""
        where: list[int | None] = []  # passage stating the figure: best or near passage, else None
        for o, wk in zip(a.owners, a.weak, strict=True):
            if best.passage in o:
                where.append(best.passage)
            else:  # a year or date must be in the best passage itself
                where.append(None if wk else next((p for p in near if p in o), None))
        stated = [
            frozenset() if w else g.owners(n, precise=True) for n, w in zip(a.figs, a.weak, strict=True)
        ]
        # operands: G's strong figures of the best unit (resp. the three best units), plus the claim's
        # figures that G states (in the evidence passages, or elsewhere when specific); never figures that
        # are themselves only derived or only coincidentally present: no circular support
        grounded = [
            n
            for n, w, wk, st in zip(a.figs, where, a.weak, stated, strict=True)
            if not wk and (w is not None or (st and _sig(n) >= SPECIFIC_DIGITS))
        ]
        small = list(best.figs) + grounded
        wide = small + [n for u in top for n in u.figs]
        credits: list[float] = []
        notes: list[str] = []
        for n, w, wk, st in zip(a.figs, where, a.weak, stated, strict=True):
            if w is not None:
                credits.append(1.0)
                notes.append(
                    f"{n.text}: in the best passage" if w == best.passage else f"{n.text}: in {g.doc_id(w)}"
                )
                continue
            if wk:
                credits.append(0.0)
                notes.append(f"{n.text}: a year/date not in the best passage")
                continue
            same = (n.magnitude, n.step)
            expr = _derive(n, [m for m in small if (m.magnitude, m.step) != same])
            if expr is None and _sig(n) >= WIDE_DIGITS:
                expr = _derive(n, [m for m in wide if (m.magnitude, m.step) != same])
            if expr is not None:
                credits.append(1.0)
                notes.append(f"{n.text} = {expr}")
            elif st:
                c = 1.0 if _sig(n) >= SPECIFIC_DIGITS else 0.5
                credits.append(c)
                notes.append(f"{n.text}: elsewhere in G ({g.doc_id(min(st))}, credit {c:g})")
            else:
                credits.append(0.0)
                notes.append(f"{n.text}: not in G, not derivable")
        return _shares(credits, a.weak), notes

    def _stage2(
        self,
        g: _Ground,
        claim: Claim,
        item1: ItemScore,
        a: _Analysis,
        windows: list[str],
        vec: dict[str, np.ndarray],
        support: tuple[float, list[str]],
    ) -> ItemScore:
        if not a.units:
            return item1.model_copy(
                update={"stage": 2, "rationale": "no passage of G shares a term or a figure with the claim"}
            )
        best = a.units[self._ranked_units(a)[0]]
        # text support: stage-1 units and the combined-evidence windows
        text_scores = a.unit_texts()
        t2, how = max(text_scores), f"best unit cosine {max(a.cos):.3f}"
        if a.opposed and all(a.opposed):
            how += " (every unit states the opposite direction)"
        cv = vec.get(claim.content)
        for w in windows:
            if cv is None:
                break
            c = float(np.clip(np.dot(cv, vec[w]), -1.0, 1.0))
            if a.text_support(c) > t2 and not opposite(claim.content, w):
                t2, how = a.text_support(c), f"combined-evidence window cosine {c:.3f}"
        notes: list[str] = []
        if a.figs:
            nf, notes = support
            s2 = a.combine(nf, t2)
            formula = f"numbers {nf:.3f}, text {t2:.3f}: {a.formula()}"
        else:
            s2 = t2
            formula = f"text {t2:.3f}"
        score = float(round(max(item1.score, s2), 6))
        why = f"stage 2: {'; '.join(notes) + '; ' if notes else ''}{how}; {formula} = {s2:.3f}"
        if s2 < item1.score:
            why += f"; kept the stage-1 score {item1.score:.3f}"
        return _item(
            claim,
            min(1.0, max(0.0, score)),
            2,
            evidence=item1.evidence or _trim(g.passages[best.passage].text, best.source),
            evidence_ref=item1.evidence_ref or g.doc_id(best.passage),
            rationale=why,
        )
