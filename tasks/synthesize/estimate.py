"""Cost of a build before it runs (`frame build --dry-run`): requests and tokens per synthesis role.

The real synthesis code renders every prompt (`OpenAIBackend` with a client that records the request and
answers without sending anything), so digests, budgets and retrieval are the build's own. What a prompt
holds of G is counted when the snapshot is grounded in `data_dir`; what the model would have replied
(structures, questions, the fill text) is stood in by a reference release's report for the same snapshot,
or by a report of the same category. Snapshots not grounded are the reference's same snapshot, replayed, or
the per-snapshot means of its category. Every row says which (`basis`). Nothing is called or written.
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import BaseModel

from schemas.config import FrameConfig, LLMSettings
from schemas.domains import DomainBase
from schemas.estimate import COUNTED, Estimate, EstimateRow, usd
from schemas.release import SEMVER
from schemas.release_rows import structure_from_row
from schemas.structure import (
    CONTAINERS,
    FillOutput,
    NodeQuestions,
    QuestionsOutput,
    ReportStructure,
    StructureNode,
    StructureOutput,
)
from tasks.errors import FrameInputError
from tasks.ground.load import GroundingSet, grounding_set_from_rows, load_grounding_set
from tasks.llm.backend import StepContext
from tasks.llm.budget import tokenizer_note
from tasks.llm.client import LLMResult
from tasks.llm.openai_backend import ROLE_FILL, ROLE_QUESTIONS, ROLES, OpenAIBackend
from tasks.synthesize.fill import fill_report
from tasks.synthesize.outline import render_outline, skeleton_segments
from tasks.synthesize.questions import augment_questions
from tasks.synthesize.structure import synthesize_structure
from tasks.tokens import count_tokens

__all__ = ["Reference", "estimate_build", "fill_budget", "message_tokens", "find_reference"]

MESSAGE_FRAMING = 3  # chat framing per message (and for the reply's priming), as OpenAI bills it
FILL_JSON_TOKENS = 6  # {"content": "..."} around the filled Markdown


def message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Input tokens of one chat request: o200k_base counts of every message plus the chat framing."""
    return (
        sum(count_tokens(str(m.get("content") or "")) + MESSAGE_FRAMING for m in messages) + MESSAGE_FRAMING
    )


def fill_budget(llm: LLMSettings) -> int:
    """Passage tokens per fill request, as flows/build.py's fill task sets it for an LLM backend."""
    return max(1000, min(12_000, llm.context_tokens // 4))


# ------------------------------------------------------------------------------------ reference


def find_reference(data_dir: Path, given: Path | None) -> Path:
    """`given`, else the newest version of the demo release under `data_dir/releases/demo/`."""
    if given is not None:
        if not (Path(given) / "reports.parquet").is_file():
            raise FrameInputError(given, "not a release folder (no reports.parquet)")
        return Path(given)
    demo = Path(data_dir) / "releases" / "demo"
    versions = [p for p in demo.glob("*") if SEMVER.match(p.name) and (p / "reports.parquet").is_file()]
    if not versions:
        raise FrameInputError(
            demo, "no reference release for the estimate: build the demo (`make demo`) or name one"
        )
    return max(versions, key=lambda p: tuple(int(x) for x in SEMVER.match(p.name).groups()[:3]))


def _reply_json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)


def _strip_questions(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip_questions(v) for k, v in data.items() if k != "questions"}
    if isinstance(data, list):
        return [_strip_questions(v) for v in data]
    return data


@dataclass
class _Report:
    report_id: str
    domain: str
    category: str
    snapshot: str
    structure: ReportStructure
    fill_tokens: float  # output tokens of one fill reply (the report's content per placeholder)
    g_tokens: int

    @property
    def replied(self) -> ReportStructure:
        """The structure as the build holds it after the stand-in replies: questions on sections and
        subsections only (what the questions role returns), the previous snapshot of the next one."""
        s = self.structure.model_copy(deep=True)
        for n in s.walk():
            if n.type not in CONTAINERS:
                n.questions = []
        return s


@dataclass
class Reference:
    """A release read for estimates: per report its structure (questions included), what one fill reply
    held, and its grounding set; `order` lists each domain's snapshots as built."""

    path: Path
    reports: dict[str, _Report]
    order: dict[str, list[str]]
    rows: dict[str, list[dict]]  # grounding_set_id -> grounding_documents rows, in G's order
    _cache: dict[tuple, _Replayed] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    @classmethod
    def load(cls, path: Path) -> Reference:
        """The release at `path`, read once per process while its files are unchanged (the replays it
        memoizes are reused by later estimates)."""
        path = Path(path).resolve()
        return _load_reference(str(path), (path / "reports.parquet").stat().st_mtime_ns)

    @classmethod
    def read(cls, path: Path) -> Reference:
        reports = pq.read_table(path / "reports.parquet").to_pylist()
        structures = {r["report_id"]: structure_from_row(r) for r in _table(path, "structures")}
        instances = _table(path, "instances")
        rows: dict[str, list[dict]] = defaultdict(list)
        for r in _table(path, "grounding_documents"):
            rows[r["grounding_set_id"]].append(r)
        for inst in instances:  # G in the order the build gave it (the table is sorted by doc_id)
            order = {d: i for i, d in enumerate(inst["grounding_doc_ids"])}
            rows[inst["grounding_set_id"]].sort(key=lambda r: order.get(r["doc_id"], len(order)))
        out: dict[str, _Report] = {}
        for r in reports:
            if r["report_id"] not in structures:
                continue
            out[r["report_id"]] = _Report(
                report_id=r["report_id"],
                domain=r["domain"],
                category=r["category"],
                snapshot=r["snapshot"],
                structure=structures[r["report_id"]],
                fill_tokens=_fill_tokens(r["markdown"], r.get("outline") or ""),
                g_tokens=sum(int(x.get("tokens") or 0) for x in rows.get(r["report_id"], [])),
            )
        return cls(path, out, _snapshot_order(out, instances), dict(rows))

    def gset(self, report_id: str) -> GroundingSet | None:
        rows = self.rows.get(report_id)
        return grounding_set_from_rows(rows) if rows else None

    def previous(self, report_id: str) -> str | None:
        rep = self.reports[report_id]
        snaps = self.order.get(rep.domain, [])
        i = snaps.index(rep.snapshot)
        return f"{rep.domain}/{snaps[i - 1]}" if i > 0 else None


@functools.lru_cache(maxsize=2)
def _load_reference(path: str, mtime_ns: int) -> Reference:
    return Reference.read(Path(path))


def _table(path: Path, name: str) -> list[dict]:
    f = path / f"{name}.parquet"
    return pq.read_table(f).to_pylist() if f.is_file() else []


def _snapshot_order(reports: Mapping[str, _Report], instances: list[dict]) -> dict[str, list[str]]:
    """Each domain's snapshots in build order: the instances chain them (t_sample -> t_target)."""
    nxt = {(i["domain"], i["t_sample"]): i["t_target"] for i in instances}
    out: dict[str, list[str]] = {}
    for domain in dict.fromkeys(r.domain for r in reports.values()):
        snaps = sorted(r.snapshot for r in reports.values() if r.domain == domain)
        targets = {nxt[k] for k in nxt if k[0] == domain}
        first = [s for s in snaps if s not in targets] or snaps[:1]
        chain = [first[0]]
        while (domain, chain[-1]) in nxt and nxt[(domain, chain[-1])] not in chain:
            chain.append(nxt[(domain, chain[-1])])
        out[domain] = chain + [s for s in snaps if s not in chain]
    return out


def _fill_tokens(markdown: str, outline: str) -> float:
    """Mean tokens of one placeholder's content: the report minus its skeleton, over the placeholders."""
    segments = skeleton_segments(outline) if outline else [""]
    n = len(segments) - 1
    if n <= 0:
        return 0.0
    content = max(0, count_tokens(markdown) - count_tokens("".join(segments)))
    return content / n + FILL_JSON_TOKENS


# --------------------------------------------------------------------------------------- replay


@dataclass
class _Figures:
    requests: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0

    def add(self, other: _Figures, weight: float = 1.0) -> None:
        self.requests += other.requests * weight
        self.input_tokens += other.input_tokens * weight
        self.output_tokens += other.output_tokens * weight


@dataclass(frozen=True)
class Overflow:
    """A request whose expected reply is longer than its role's output budget."""

    role: str
    where: str  # domain/snapshot
    expected: int
    budget: int
    setting: str = ""  # the config key that raises the budget (default: [llm] for the role)


class _ReplayClient:
    """Stands in for `LLMClient`: records each request's tokens and answers with `answer(role)`; the reply
    counts as `out_tokens(role, reply)` output tokens, uncapped: a reply expected past the role's output
    budget is an `Overflow`. Nothing is sent, nothing is cached."""

    def __init__(
        self,
        settings: LLMSettings,
        answer: Callable[[str], BaseModel],
        out_tokens: Callable[[str, Any], float],
    ):
        self.settings = settings
        self.model = settings.model
        self.answer = answer
        self.out_tokens = out_tokens
        self.figures: dict[str, _Figures] = defaultdict(_Figures)
        self.overflows: list[Overflow] = []

    def complete_json(self, role: str, messages, schema, ctx, *, check=None, on_length="grow") -> LLMResult:
        value = self.answer(role)
        f = self.figures[role]
        f.requests += 1
        f.input_tokens += message_tokens(messages)
        out = self.out_tokens(role, value)
        f.output_tokens += out
        if out > self.settings.output_budget(role):
            where = f"{ctx.domain}/{ctx.snapshot}" if ctx is not None else "-"
            self.overflows.append(Overflow(role, where, round(out), self.settings.output_budget(role)))
        return LLMResult(value, "", 0, 0, False, "", self.model, 1)


def _remap_sources(structure: ReportStructure, doc_ids: Sequence[str], ref_ids: Sequence[str]) -> list[dict]:
    """The stand-in's sections with every source a doc_id of G (the role's check demands it): kept when
    G has it, else the G document sharing most words with it, else the one at the same position."""
    known = set(doc_ids)
    words = {d: set(re.split(r"[-_.]+", d.lower())) for d in doc_ids}

    def best(src: str) -> str:
        if src in known:
            return src
        w = set(re.split(r"[-_.]+", src.lower()))
        score, pick = max(((len(w & words[d]), -i), d) for i, d in enumerate(doc_ids))
        if score[0] > 0:
            return pick
        pos = ref_ids.index(src) if src in ref_ids else 0
        return doc_ids[pos % len(doc_ids)]

    def node(n: StructureNode) -> dict:
        return {
            "id": n.id,
            "type": n.type,
            "title": n.title,
            "objective": n.objective,
            "sources": list(dict.fromkeys(best(s) for s in n.sources)),
            "children": [node(c) for c in n.children],
        }

    return [node(n) for n in structure.nodes]


@dataclass
class _Replayed:
    figures: dict[str, _Figures]
    overflows: list[Overflow]


def _replay(
    settings: LLMSettings,
    gset: GroundingSet,
    stand_in: _Report,
    prev: ReportStructure | None,
    ctx: StepContext,
    ref_ids: Sequence[str],
) -> _Replayed:
    """One snapshot's synthesis through the real backend code, the model's replies being `stand_in`'s."""
    doc_ids = [d.doc_id for d in gset.documents]
    sections = _remap_sources(stand_in.structure, doc_ids, ref_ids)
    reply_structure = StructureOutput.model_validate(
        {"title": stand_in.structure.title, "sections": sections}
    )
    questions = QuestionsOutput(
        sections=[
            NodeQuestions(id=n.id, questions=n.questions)
            for n in stand_in.structure.walk()
            if n.type in CONTAINERS and n.questions
        ]
    )
    replies = {ROLE_QUESTIONS: questions, ROLE_FILL: FillOutput(content="(stand-in)")}

    def out_tokens(role: str, value: Any) -> float:
        if role == ROLE_FILL:
            return stand_in.fill_tokens
        if role == ROLE_QUESTIONS:
            return count_tokens(_reply_json(value.model_dump(mode="json")))
        return count_tokens(_reply_json(_strip_questions(value.model_dump(mode="json"))))

    client = _ReplayClient(settings, lambda role: replies.get(role, reply_structure), out_tokens)
    backend = OpenAIBackend(settings, Path("."), client=client)  # type: ignore[arg-type]
    structure = synthesize_structure(backend, gset, prev, ctx)
    structure = augment_questions(backend, structure, gset, prev, ctx)
    fill_report(backend, render_outline(structure), structure, gset, ctx, budget_tokens=fill_budget(settings))
    return _Replayed(dict(client.figures), list(client.overflows))


def _ctx(domain: str, snapshot: str, category: str, gset: GroundingSet) -> StepContext:
    # callers refuse an empty set first: the kind is the documents' own, and a replay needs it
    kind = gset.documents[0].source_kind
    if kind is None:
        raise FrameInputError(f"{domain}/{snapshot}", "its grounding documents name no source_kind")
    return StepContext(domain, snapshot, category, kind)


def _settings_key(s: LLMSettings) -> tuple:
    """What of the settings changes a replay's figures (the budgets; not the model's name)."""
    return (s.context_tokens, tuple(s.output_budget(r) for r in ROLES), s.token_margin)


# ------------------------------------------------------------------------------------- estimate


def _proxy(ref: Reference, category: str, position: int, g_tokens: int | None) -> _Report:
    """A reference report standing in for a snapshot the reference lacks: same category (any when it has
    none) and same position (first snapshot or later), G closest in size (the median when unknown)."""
    pool = [r for r in ref.reports.values() if r.category == category] or list(ref.reports.values())
    firsts = [r for r in pool if (ref.previous(r.report_id) is None) == (position == 0)]
    pool = sorted(firsts or pool, key=lambda r: (r.g_tokens, r.report_id))
    if g_tokens is None:
        return pool[(len(pool) - 1) // 2]
    return min(pool, key=lambda r: (abs(r.g_tokens - g_tokens), r.report_id))


def _reference_replay(
    ref: Reference, report_id: str, prev: _Report | None, settings: LLMSettings
) -> _Replayed:
    """The reference's snapshot replayed on its own G with its own replies, after `prev`'s structure."""
    key = (report_id, prev.report_id if prev else None, _settings_key(settings))
    if key not in ref._cache:
        rep = ref.reports[report_id]
        gset = ref.gset(report_id)
        if gset is None or not gset.documents:
            raise FrameInputError(ref.path / "grounding_documents.parquet", f"no grounding set {report_id}")
        ctx = _ctx(rep.domain, rep.snapshot, rep.category, gset)
        prev_s = prev.replied if prev else None
        ref._cache[key] = _replay(settings, gset, rep, prev_s, ctx, [d.doc_id for d in gset.documents])
    return ref._cache[key]


def _category_means(ref: Reference, category: str | None, settings: LLMSettings) -> dict[str, _Figures]:
    """Per-snapshot means of each role over the reference's reports of `category` (None: all), each
    replayed after its own previous snapshot."""
    ids = [rid for rid, r in ref.reports.items() if category is None or r.category == category]
    totals: dict[str, _Figures] = defaultdict(_Figures)
    counts: dict[str, int] = defaultdict(int)
    for rid in ids:
        prev_id = ref.previous(rid)
        figs = _reference_replay(ref, rid, ref.reports[prev_id] if prev_id else None, settings).figures
        for role, f in figs.items():
            totals[role].add(f)
            counts[role] += 1
    out: dict[str, _Figures] = {}
    for role, f in totals.items():
        mean = _Figures()
        mean.add(f, 1.0 / counts[role])
        out[role] = mean
    return out


@dataclass
class _Plan:
    """What each snapshot of the config contributes, by (role, basis)."""

    ref: Reference
    settings: LLMSettings
    acc: dict[tuple[str, str], _Figures] = field(default_factory=lambda: defaultdict(_Figures))
    kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    failures: list[str] = field(default_factory=list)
    overflows: list[Overflow] = field(default_factory=list)
    means: dict[str | None, dict[str, _Figures]] = field(default_factory=dict)

    def add(self, figs: Mapping[str, _Figures], basis: Callable[[str], str]) -> None:
        for role, f in figs.items():
            self.acc[(role, basis(role))].add(f)

    def _means(self, category: str | None) -> dict[str, _Figures]:
        if category not in self.means:
            has = category is None or any(r.category == category for r in self.ref.reports.values())
            self.means[category] = _category_means(self.ref, category, self.settings) if has else {}
        return self.means[category]

    def category(self, category: str, position: int) -> dict[str, _Figures]:
        """Per-snapshot means of the roles a snapshot at `position` asks; a role the category's reports
        never asked (or a category the reference lacks) from all of the reference's reports."""
        roles = (ROLES[0] if position == 0 else ROLES[1], ROLES[2], ROLES[3])
        mine = self._means(category)
        return {r: mine.get(r) or self._means(None)[r] for r in roles if r in mine or r in self._means(None)}


def _snapshot(plan: _Plan, domain: DomainBase, i: int, prev: _Report | None, data_dir: Path):
    """Add one snapshot's figures to `plan`; returns the report standing in for its replies."""
    snap = domain.snapshots[i]
    rid = f"{domain.name}/{snap}"
    ref, label = plan.ref, plan.ref.label
    folder = data_dir / "grounding" / domain.name / snap
    if (folder / "documents.json").is_file():
        gset = load_grounding_set(folder, with_facts=False)
        stand_in = ref.reports.get(rid) or _proxy(ref, domain.category, i, gset.tokens)
        ctx = StepContext(domain.name, snap, domain.category, domain.kind)
        ref_g = ref.gset(stand_in.report_id)
        ref_ids = [d.doc_id for d in ref_g.documents] if ref_g else []
        got = _replay(plan.settings, gset, stand_in, prev.replied if prev else None, ctx, ref_ids)
        whose = "" if stand_in.report_id == rid else f", {stand_in.report_id}'s"
        plan.add(
            got.figures,
            lambda r: COUNTED if r == ROLES[0] else f"counted G; replies estimated from {label}{whose}",
        )
        plan.overflows += got.overflows
        plan.kinds["counted"] += 1
        return stand_in
    if rid in ref.reports and ref.rows.get(rid):
        got = _reference_replay(ref, rid, prev, plan.settings)
        plan.add(got.figures, lambda r: f"estimated from {label} (same snapshot)")
        plan.overflows += got.overflows
        plan.kinds["same"] += 1
        return ref.reports[rid]
    plan.add(plan.category(domain.category, i), lambda r: f"estimated from {label} (per-category means)")
    like = _proxy(ref, domain.category, i, None)  # a typical snapshot of the category: its overflows, if any
    prev_id = ref.previous(like.report_id)
    got = _reference_replay(ref, like.report_id, ref.reports[prev_id] if prev_id else None, plan.settings)
    plan.overflows += [
        Overflow(o.role, f"{rid} (like {o.where})", o.expected, o.budget) for o in got.overflows
    ]
    plan.kinds["category"] += 1
    return _proxy(ref, domain.category, i, None)


def estimate_build(config: FrameConfig, *, data_dir: Path, reference_release: Path | None = None) -> Estimate:
    """Requests, input and output tokens and cost per synthesis role of building `config` through an
    OpenAI-compatible endpoint (config.llm's model and context), priced from config.prices."""
    from tasks.llm.openai_backend import ContextBudgetError

    data_dir = Path(data_dir)
    settings = config.llm.resolved()
    ref = Reference.load(find_reference(data_dir, reference_release))
    plan = _Plan(ref, settings)
    for domain in config.domains:
        prev: _Report | None = None
        for i, snap in enumerate(domain.snapshots):
            try:
                prev = _snapshot(plan, domain, i, prev, data_dir)
            except ContextBudgetError as exc:
                plan.failures.append(f"{domain.name} {snap}: {exc}")
                prev = None
    return _estimate(config, settings, plan)


def overflow_notes(overflows: Sequence[Overflow], limit: int = 12) -> list[str]:
    """One line per role whose replies would pass its output budget, then the requests (largest first)."""
    if not overflows:
        return ["No request is expected to reply past its role's output budget."]
    out = []
    for role in dict.fromkeys(o.role for o in overflows):
        mine = sorted((o for o in overflows if o.role == role), key=lambda o: -o.expected)
        out.append(
            f"would overflow: {len(mine)} {role} request(s) expected past the budget of {mine[0].budget:,} "
            f"tokens (largest {mine[0].expected:,}); raise "
            f"{mine[0].setting or f'[llm] max_output_tokens_by_role.{role}'}: "
            + ", ".join(f"{o.where} ({o.expected:,})" for o in mine[:limit])
            + (f" and {len(mine) - limit} more" if len(mine) > limit else "")
        )
    return out


def _basis_rank(basis: str) -> int:
    """Counted first, then counted G with stand-in replies, then the same snapshot, then category means."""
    if basis == COUNTED:
        return 0
    if basis.startswith("counted"):
        return 1
    return 2 if "same snapshot" in basis else 3


def _estimate(config: FrameConfig, settings: LLMSettings, plan: _Plan) -> Estimate:
    rows = []
    for role in ROLES:
        for (r, basis), f in sorted(plan.acc.items(), key=lambda kv: _basis_rank(kv[0][1])):
            if r != role:
                continue
            rows.append(
                EstimateRow(
                    role=role,
                    model=settings.model,
                    requests=round(f.requests),
                    input_tokens=round(f.input_tokens),
                    output_tokens=round(f.output_tokens),
                    usd=usd(settings.model, f.input_tokens, f.output_tokens, config.prices),
                    basis=basis,
                )
            )
    k = plan.kinds
    total = sum(k.values())
    notes = [
        f"{total} snapshot(s): {k['counted']} grounded (their G counted), {k['same']} replayed from the same "
        f"snapshot of {plan.ref.label}, {k['category']} from per-category means of {plan.ref.label}.",
        f"Model {settings.model}, context {settings.context_tokens:,} tokens; output budgets "
        + ", ".join(f"{r} {settings.output_budget(r):,}" for r in ROLES)
        + f"; fill passages up to {fill_budget(settings):,} tokens per element.",
        tokenizer_note(settings),
        "Output tokens are always estimated (the reference's structures, questions and report text as JSON), "
        "never capped at the budget: a reply expected past its role's budget is listed below.",
        "Assumes every reply is valid at once and no response is cached: a corrective retry re-sends the "
        "prompt, a rebuild answers from data/cache/llm.",
    ]
    if settings.backend != "openai":
        notes.insert(
            0, f"[llm] backend is {settings.backend}: figures are for an OpenAI-compatible endpoint."
        )
    if settings.model not in config.prices:
        notes.append(f'No [prices."{settings.model}"] entry: USD not computed.')
    notes += [f"would fail: {f}" for f in plan.failures]
    notes += overflow_notes(plan.overflows)
    return Estimate(title=f"build dry run: {len(config.domains)} domain(s)", rows=rows, notes=notes)
