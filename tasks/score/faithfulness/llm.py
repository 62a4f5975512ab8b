"""The LLM judge: claims and verdicts from an OpenAI-compatible model, with the evidence each request
shows (docs/metrics/faithfulness.md, "Evidence of the LLM judge")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from schemas.config import LLMSettings
from schemas.scoring import Claim, GroundingText, ItemScore
from tasks.errors import FrameInputError
from tasks.llm.prompts import render
from tasks.lru import BoundedLRU
from tasks.markdown.document import title as markdown_title
from tasks.score.evidence import Piece, cut, pick, relevance
from tasks.score.faithfulness.claims import _split_text, report_chunks
from tasks.score.faithfulness.ground import _Ground, _ground_key, _GroundCache, _query
from tasks.score.faithfulness.items import _item, _paired, _trim
from tasks.score.faithfulness.params import (
    BATCH_CLAIMS,
    CLAIM_TOKENS,
    GROUND_CACHE,
    GROUND_CACHE_CHARS,
    MIN_EVIDENCE,
    MORE_K,
    REFS_SHOWN,
    VERDICT_TOKENS,
)
from tasks.score.llm_judge import LLMJudge, ids_check, split_on_length, stripped_text
from tasks.score.reply_size import extraction_measure
from tasks.tokens import count_tokens

_ClaimContent = stripped_text("claim content is empty")


class ClaimOut(BaseModel):
    content: _ClaimContent
    source_sentence: str = ""
    section: str = ""


class ClaimsReply(BaseModel):
    claims: list[ClaimOut]


class Verdict(BaseModel):
    claim_id: int = Field(ge=0)
    score: float = Field(ge=0.0, le=1.0)
    evidence: str = ""
    doc_id: str = ""
    rationale: str = ""


class VerdictsReply(BaseModel):
    verdicts: list[Verdict]


def _check_ids(expected: Sequence[int]) -> Callable[[VerdictsReply], None]:
    want = sorted(expected)

    def explain(dup: list, extra: list, missing: list) -> str:
        parts = [f"missing claim_ids {missing}"] * bool(missing) + [f"unknown claim_ids {extra}"] * bool(
            extra
        )
        parts += [f"repeated claim_ids {dup}"] * bool(dup)
        return f"verdicts must cover exactly claim_ids {want}, one verdict each ({'; '.join(parts)})"

    return ids_check(want, lambda reply: [v.claim_id for v in reply.verdicts], explain)


class LLMFaithfulnessJudge(LLMJudge):
    """Claims and verdicts from an OpenAI-compatible model (docs/metrics/faithfulness.md)."""

    ROLES = ("score_claims", "score_verify", "score_entail")

    def __init__(self, client: Any, settings: LLMSettings) -> None:
        super().__init__(client, settings)
        self._grounds = _GroundCache()
        self.models: set[str] = set()
        self._whole: BoundedLRU[tuple[str, int]] = BoundedLRU(GROUND_CACHE, GROUND_CACHE_CHARS)  # G rendered
        self._parts: BoundedLRU[list[tuple[str, int]]] = BoundedLRU(4096, GROUND_CACHE_CHARS)  # cut passages
        self._heads: BoundedLRU[int] = BoundedLRU(4096)  # excerpt header tokens by document

    def claims_chunk_budget(self) -> int:
        over = self.overhead("score_claims", report_title="", part="", report_part="")
        budget = self.input_budget() - over
        if budget < 100:
            raise FrameInputError(
                "llm.context_tokens",
                f"too small for claim extraction (input budget {self.input_budget()}, prompt {over} tokens)",
            )
        return budget

    def _claims_measure(self) -> Callable[[str], int]:
        return extraction_measure(self.claims_chunk_budget(), self.output_budget("score_claims"))

    def claim_parts(self, generated_markdown: str) -> list[tuple[str, str]]:
        """R' cut into the parts sent to score_claims: each prompt fits the input budget, and the reply it
        asks for (every claim restates its sentence or row) is expected to fit the role's output budget
        (tasks.score.reply_size)."""
        return report_chunks(generated_markdown, self.claims_chunk_budget(), self._claims_measure())

    # -- claims

    def extract_claims(self, generated_markdown: str) -> list[Claim]:
        if not generated_markdown.strip():
            return []
        title = markdown_title(generated_markdown)
        chunks = self.claim_parts(generated_markdown)
        n = len(chunks)
        measure = self._claims_measure()

        def ask(i: int, path: str, text: str) -> list[ClaimOut]:
            part = f"part {i + 1} of {n}" + (f" (starting at section: {path})" if path else "")
            res = self.ask(
                "score_claims",
                ClaimsReply,
                report_title=title or "(untitled)",
                part=part,
                report_part=text,
                on_length="split",
            )
            self.models.add(res.model)
            for c in res.value.claims:
                if not c.section:
                    c.section = path
            return res.value.claims

        def halve(text: str) -> list[str]:
            return _split_text(text, max(1, measure(text) // 2), measure)

        def job(chunk: tuple[int, tuple[str, str]]) -> list[ClaimOut]:
            i, (path, text) = chunk
            got = split_on_length(lambda t: ask(i, path, t), text, halve, "score_claims")
            return [c for claims in got for c in claims]

        found = [c for claims in self.map(job, list(enumerate(chunks))) for c in claims]
        fields = {"content", "source_sentence", "section"}
        return [Claim(claim_id=i, **c.model_dump(include=fields)) for i, c in enumerate(found)]

    # -- evidence (docs/metrics/faithfulness.md, "Evidence of the LLM judge")

    def _rooms(self) -> tuple[int, int]:
        """Tokens left beside each stage's prompt (input budget minus the prompt rendered empty)."""
        rooms = []
        for role in ("score_verify", "score_entail"):
            over = self.overhead(role, documents="", claims="")
            room = self.input_budget() - over
            if room < 200:
                raise FrameInputError("llm.context_tokens", f"too small for {role} (prompt {over} tokens)")
            rooms.append(room)
        return rooms[0], rooms[1]

    def _budgets(self) -> tuple[int, int, int]:
        """(evidence per claim at stage 1, at stage 2, largest piece): a BATCH_CLAIMS-th of the room per
        claim but at least MIN_EVIDENCE (a small window then holds fewer claims per request), twice that
        at stage 2, never more than the room beside one claim; a passage over half the stage-1 share is
        cut. Both stages derive them from the same room, so stage 2 can redo stage 1's choice."""
        room = min(self._rooms())
        alone = max(1, room - CLAIM_TOKENS)
        b1 = min(alone, max(MIN_EVIDENCE, (room - BATCH_CLAIMS * CLAIM_TOKENS) // BATCH_CLAIMS))
        return b1, min(alone, 2 * b1), max(1, b1 // 2)

    def _documents(self, grounding: Sequence[GroundingText]) -> tuple[str, int]:
        """G whole, as one request shows it, and its tokens (counted once per G)."""
        key = _ground_key(grounding)

        def make() -> tuple[str, int]:
            intro = f"The source documents, all {len(grounding)} of them, whole:"
            docs = [
                f"Document - doc_id: {d.doc_id} ({d.title})\n<<<\n{d.markdown.strip()}\n>>>"
                for d in grounding
            ]
            text = "\n\n".join([intro, *docs])
            return text, count_tokens(text)

        return self._whole.get_or_make(key, make, lambda v: len(v[0]))

    def _ranked(self, g: _Ground, claim: Claim, limit: int) -> list[Piece]:
        """The claim's pieces of G, most relevant first, each costing its tokens and its excerpt header:
        the offline candidates (word-for-word, figure and BM25 matches), then the next MORE_K BM25
        passages; a passage over `limit` tokens is cut (`evidence.cut`), its part most relevant to the
        claim at the passage's rank, its other parts after every passage."""
        a = g.analyse(claim)
        raw = g.index.bm25(_query(claim.content))
        more = sorted(raw, key=lambda i: (-raw[i], i))[: len(a.candidates) + MORE_K]
        first: list[Piece] = []
        later: list[Piece] = []
        for p in dict.fromkeys([*a.candidates, *more]):
            ps = g.passages[p]
            head = self._head_tokens(ps.doc_id, g.titles.get(ps.doc_id, ps.doc_id))
            if ps.tokens <= limit:
                first.append(Piece(p, 0, ps.doc_id, ps.text.strip(), ps.tokens + head))
                continue
            parts = self._parts.get_or_make(
                (g.key, p, limit),
                lambda ps=ps: [(t, count_tokens(t)) for t in cut(ps.text.strip(), ps.kind, limit)],
                lambda v: sum(len(t) for t, _ in v),
            )
            pieces = [Piece(p, k + 1, ps.doc_id, t, n + head) for k, (t, n) in enumerate(parts)]
            order = sorted(range(len(pieces)), key=lambda k: (-relevance(claim.content, pieces[k].text), k))
            first.append(pieces[order[0]])
            later.extend(pieces[k] for k in order[1:])
        return first + later

    def _head_tokens(self, doc_id: str, title: str) -> int:
        """Tokens an excerpt of this document costs besides its text (its name line and delimiters)."""
        line = f"Excerpt E000 - doc_id: {doc_id} ({title}), part 00 of a passage cut to fit\n<<<\n\n>>>\n\n"
        return self._heads.get_or_make((doc_id, title), lambda: count_tokens(line))

    def _excerpts(self, g: _Ground, claim: Claim, stage: int) -> list[Piece]:
        """The pieces a claim is shown with when G goes as excerpts: stage 1's within its share, stage 2's
        the same plus more within its larger share (never fewer than stage 1's)."""
        b1, b2, limit = self._budgets()
        ranked = self._ranked(g, claim, limit)
        first = pick(ranked, b1)
        return first if stage == 1 else pick(ranked, b2, base=first)

    @staticmethod
    def _claim_block(claim: Claim, prior: ItemScore | None, refs: list[str] | None) -> str:
        """A claim as a request shows it; `refs` (excerpt mode) names its excerpts, most relevant first."""
        lines = [f"### Claim {claim.claim_id}", f"Claim: {claim.content}"]
        if claim.source_sentence and claim.source_sentence != claim.content:
            lines.append(f"Sentence of the report it comes from: {claim.source_sentence}")
        if claim.section:
            lines.append(f"Section of the report: {claim.section}")
        if prior is not None:
            verdict = f"First-pass verdict: score {prior.score:.2f}; {prior.rationale or 'no rationale'}"
            while count_tokens(verdict) > VERDICT_TOKENS:
                verdict = verdict[: int(len(verdict) * 0.9)].rstrip() + " …"
            lines.append(verdict)
        if refs is not None:
            found = ", ".join(refs[:REFS_SHOWN])
            if len(refs) > REFS_SHOWN:
                found += f" and {len(refs) - REFS_SHOWN} more"
            found = found or "none (no passage shares a term or a figure with this claim)"
            lines.append(f"Excerpts found for it, most relevant first: {found}")
        return "\n".join(lines)

    @staticmethod
    def _excerpt_text(
        g: _Ground, grounding: Sequence[GroundingText], pieces: list[Piece]
    ) -> tuple[str, dict]:
        """The excerpts of one request, in document order, and their names by piece key."""
        ordered = sorted({p.key: p for p in pieces}.values(), key=lambda p: p.key)
        names = {p.key: f"E{k}" for k, p in enumerate(ordered, start=1)}
        intro = (
            f"Excerpts of the source documents ({len(grounding)} documents, too many tokens to send whole), "
            "found by a search for the claims below; the rest of the documents is not shown:"
        )
        out = [intro]
        for p in ordered:
            part = f", part {p.part} of a passage cut to fit" if p.part else ""
            title = g.titles.get(p.doc_id, p.doc_id)
            out.append(f"Excerpt {names[p.key]} - doc_id: {p.doc_id} ({title}){part}\n<<<\n{p.text}\n>>>")
        return "\n\n".join(out), names

    def _requests(
        self,
        role: str,
        g: _Ground,
        grounding: Sequence[GroundingText],
        claims: list[Claim],
        prior: list | None,
    ) -> list[tuple[list[Claim], str, str]]:
        """(claims, documents text, claims text) per request. G goes whole with a claim when it fits beside
        it in either stage's request (so stage 1 whole implies stage 2 whole); otherwise as the excerpts
        of the request's claims. A request never exceeds the input budget: batches are packed by an
        estimate and every request is counted exactly before it is sent (and halved when over)."""
        stage = 2 if role == "score_entail" else 1
        room = self.input_budget()
        over = self.overhead(role, documents="", claims="")
        docs_text, docs_tok = self._documents(grounding)
        margin = VERDICT_TOKENS + 50  # the verdict stage 2 adds, and token-count drift at the joins
        fits_whole = min(self._rooms()) - margin

        items = []
        for i, c in enumerate(claims):
            pr = prior[i] if prior else None
            bare = count_tokens(self._claim_block(c, None, None))
            ev = None if grounding and docs_tok + bare <= fits_whole else self._excerpts(g, c, stage)
            block = count_tokens(self._claim_block(c, pr, None if ev is None else ["E000"] * len(ev))) + 2
            items.append((c, pr, ev, block))

        def estimate(batch: list) -> int:
            return over + self._batch_docs_tokens(batch, docs_tok) + sum(it[3] for it in batch)

        out: list[tuple[list[Claim], str, str]] = []

        def flush(batch: list) -> None:
            docs, text, tokens = self._render_batch(role, g, grounding, docs_text, batch)
            if tokens <= room:
                out.append(([c for c, _, _, _ in batch], docs, text))
            elif len(batch) > 1:
                flush(batch[: len(batch) // 2])
                flush(batch[len(batch) // 2 :])
            elif batch[0][2] is None:  # G whole with this one claim after all: its excerpts instead
                c, pr, _, _ = batch[0]
                flush([(c, pr, self._excerpts(g, c, stage), 0)])
            elif batch[0][2]:  # a long claim: its last pieces go (stage 2's additions first)
                c, pr, ev, _ = batch[0]
                flush([(c, pr, ev[:-1], 0)])
            else:
                cid = batch[0][0].claim_id
                raise FrameInputError("llm.context_tokens", f"claim {cid} alone does not fit {role}")

        cur: list = []
        for it in items:
            if cur and (
                (cur[0][2] is None) != (it[2] is None)
                or len(cur) >= BATCH_CLAIMS
                or estimate([*cur, it]) > room
            ):
                flush(cur)
                cur = []
            cur.append(it)
        if cur:
            flush(cur)
        return out

    @staticmethod
    def _batch_docs_tokens(batch: list, docs_tok: int) -> int:
        """Estimated tokens of a batch's documents: G whole, or the distinct excerpts of its claims."""
        if batch[0][2] is None:
            return docs_tok
        distinct = {p.key: p for _, _, ev, _ in batch for p in ev}.values()
        return 60 + sum(p.tokens for p in distinct)

    def _render_batch(
        self, role: str, g: _Ground, grounding: Sequence[GroundingText], docs_text: str, batch: list
    ) -> tuple[str, str, int]:
        """(documents text, claims text, exact prompt tokens) of one batch of (claim, prior, excerpts, _)."""
        if batch[0][2] is None:
            docs, names = docs_text, {}
        else:
            docs, names = self._excerpt_text(g, grounding, [p for _, _, ev, _ in batch for p in ev])
        blocks = [
            self._claim_block(c, pr, None if ev is None else [names[p.key] for p in ev])
            for c, pr, ev, _ in batch
        ]
        text = "\n\n".join(blocks)
        messages = render(self.prompts[role], documents=docs, claims=text)
        return docs, text, sum(count_tokens(m["content"]) for m in messages)

    # -- verdicts

    def _ask_batch(
        self, role: str, request: tuple[list[Claim], str, str], doc_ids: set[str]
    ) -> list[ItemScore]:
        claims, docs, text = request
        ids = [c.claim_id for c in claims]
        res = self.ask(role, VerdictsReply, check=_check_ids(ids), documents=docs, claims=text)
        self.models.add(res.model)
        by_id = {v.claim_id: v for v in res.value.verdicts}
        out = []
        for c in claims:
            v = by_id[c.claim_id]
            ref = v.doc_id.strip() if v.doc_id.strip() in doc_ids else ""
            why = v.rationale.strip()
            if v.doc_id.strip() and not ref:
                why += f" [doc_id {v.doc_id.strip()!r} is not a document of G]"
            out.append(
                _item(
                    c,
                    float(v.score),
                    2 if role == "score_entail" else 1,
                    evidence=_trim(v.evidence),
                    evidence_ref=ref,
                    rationale=why,
                )
            )
        return out

    def _judge(
        self,
        role: str,
        claims: list[Claim],
        grounding: Sequence[GroundingText],
        prior: list[ItemScore] | None,
    ) -> list[ItemScore]:
        if not claims:
            return []
        g = self._grounds.get(grounding)
        requests = self._requests(role, g, grounding, claims, prior)
        doc_ids = {d.doc_id for d in grounding}
        results = self.map(lambda r: self._ask_batch(role, r, doc_ids), requests)
        return [it for r in results for it in r]

    def verify(self, claims: Sequence[Claim], grounding: Sequence[GroundingText]) -> list[ItemScore]:
        return self._judge("score_verify", list(claims), grounding, None)

    def entail(
        self, claims: Sequence[Claim], stage1: Sequence[ItemScore], grounding: Sequence[GroundingText]
    ) -> list[ItemScore]:
        claims, stage1 = _paired(claims, stage1)
        return self._judge("score_entail", claims, grounding, stage1)
