"""Cost of a scoring run before it runs (`frame score --dry-run`): per judge role and per generating system.

Every selected family whose judges ask a model runs its own scoring code (the registry's class, so a family
added since is counted with no edit here): its code builds every request (chunking by input budget,
batches, excerpts, cuts), with an `ask` that renders and counts the prompt and answers with a stand-in
reply instead of calling the model (the smallest reply its schema allows for a role known only to it);
identical requests count once, as the response cache answers the repeats. Counted: prompts built from the
release (S, Y, G) and from reports already on disk. Estimated, and said so per row: reports not generated
yet (an LLM, command or submission system: the size of Y; `extractive`: the size of S), what depends on
the judge's replies (information units, claims, scaffold items: the offline extractors' counts; claims
sent to the second stage: `STAGE2_SHARE`) and every output token. Generating systems' prompts come from the
`generators` given (tasks.generate sits beside this package). Nothing is called, nothing is written.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import BaseModel

from schemas.config import LLMSettings, ModelPrice
from schemas.estimate import COUNTED, Estimate, EstimateRow, usd
from schemas.evaluation import STRATEGY_ROLES
from schemas.scoring import ScoreSettings
from tasks.errors import FrameInputError
from tasks.llm.budget import input_budget, tokenizer_note
from tasks.llm.client import LLMResult
from tasks.llm.prompts import render
from tasks.markdown.document import heading_of
from tasks.markdown.text import split_sentences
from tasks.score import registry
from tasks.score.inputs import available_inputs
from tasks.score.llm_judge import LLMJudge
from tasks.score.metric import JudgeEnv, instance_seed
from tasks.score.reply_size import expected_items
from tasks.synthesize.estimate import Overflow, message_tokens, overflow_notes
from tasks.tokens import count_tokens

__all__ = ["BUILTINS", "STAGE2_SHARE", "Generator", "estimate_score"]

BUILTINS = ("gold", "copy-sample", "extractive")
STAGE2_SHARE = 0.3  # claims assumed below the support threshold after stage 1 (sent to score_entail)
GOLD = "gold"
ONE_SHOT_ROLE = STRATEGY_ROLES["one-shot"]
ITEM_WORDS = 30  # words of one stand-in extracted item (a fact, a question's answer, an attribute)
# A generating system's requests for one instance: (system config, instance row, its grounding rows,
# the system's LLM settings) -> the chat messages of each request it would send.
Generator = Callable[[Any, Mapping[str, Any], Sequence[Mapping[str, Any]], LLMSettings], list[list[dict]]]
# Roles whose number of requests follows from the judge's earlier replies (never only from the inputs).
REPLY_DRIVEN = {
    "score_coverage": "units per report: what a compliant extractor lists (tasks.score.reply_size)",
    "score_verify": "claims per report: what a compliant extractor lists (tasks.score.reply_size)",
    "score_entail": f"{STAGE2_SHARE:.0%} of the sampled claims below the threshold after stage 1",
    "score_scaffold_align": "facts and questions: the middle of the range each part asks for",
    "score_scaffold_entity_check": "attributes: the middle of the range each part asks for",
}


# ------------------------------------------------------------------------------------- systems


@dataclass
class _System:
    name: str
    kind: str  # builtin | openai | command | submission
    config: Any
    builtin: str | None = None

    @property
    def strategy(self) -> str:
        return str(getattr(self.config, "strategy", "one-shot") or "one-shot")

    def llm(self) -> LLMSettings:
        make = getattr(self.config, "llm_settings", None)
        if callable(make):
            return make()
        values = {
            k: getattr(self.config, k)
            for k in ("model", "max_output_tokens", "context_tokens", "base_url")
            if getattr(self.config, k, None) is not None
        }
        return LLMSettings(backend="openai", **values)


def _systems(systems: Mapping[str, Any]) -> list[_System]:
    out = []
    for name, cfg in systems.items():
        kind = getattr(cfg, "kind", None)
        if kind is None and name in BUILTINS:
            out.append(_System(name, "builtin", cfg, name))
        elif kind == "builtin":
            out.append(_System(name, kind, cfg, getattr(cfg, "builtin", None) or name))
        elif kind in ("openai", "command", "submission"):
            out.append(_System(name, kind, cfg))
        else:
            raise FrameInputError(f"systems.{name}", f"not a system config (kind {kind!r})")
    return out


def _on_disk(release: Path, system: str) -> dict[str, str]:
    """Reports a system already has for this release (data/generations/...), by instance id."""
    path = release.resolve().parents[2] / "generations" / release.parent.name / release.name / system
    f = path / "generations.parquet"
    if not f.is_file():
        return {}
    return {
        r["instance_id"]: r["markdown"]
        for r in pq.read_table(f, columns=["instance_id", "markdown"]).to_pylist()
    }


def _reports(release: Path, inst: list[dict], systems: list[_System]) -> tuple[dict, dict[str, str]]:
    """R' per system and instance, and per system how it was obtained ("counted" or the stand-in)."""
    reports: dict[str, dict[str, str]] = {}
    basis: dict[str, str] = {}
    for s in systems:
        disk = _on_disk(release, s.name) if s.builtin != GOLD else {}
        if s.builtin == GOLD:
            reports[s.name], basis[s.name] = {i["instance_id"]: i["target_markdown"] for i in inst}, COUNTED
        elif s.builtin == "copy-sample":
            reports[s.name], basis[s.name] = {i["instance_id"]: i["sample_markdown"] for i in inst}, COUNTED
        elif disk and all(i["instance_id"] in disk for i in inst):
            reports[s.name], basis[s.name] = disk, COUNTED
        elif s.builtin == "extractive":  # S's headings filled with passages of G: about S's size
            reports[s.name], basis[s.name] = _stand_in(inst, "sample_markdown", s.name), "S"
        else:
            reports[s.name], basis[s.name] = _stand_in(inst, "target_markdown", s.name), "Y"
    return reports, basis


def _stand_in(inst: list[dict], column: str, system: str) -> dict[str, str]:
    """S or Y as a system's report not generated yet, with one line naming the system: a real report is
    never byte-identical to gold's or another system's, so its requests must not be taken as repeats."""
    return {i["instance_id"]: f"{str(i[column]).rstrip()}\n\nReport of {system}.\n" for i in inst}


# ------------------------------------------------------------------------------------ recording


@dataclass
class _Role:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    proxies: set[str] = field(default_factory=set)  # systems whose R' was a stand-in


class _Recorder:
    """Counts each distinct request once per role (the response cache answers repeats); a reply expected
    past its role's output budget is counted uncapped and listed (`overflows`)."""

    def __init__(self, settings: LLMSettings | None = None) -> None:
        self.settings = settings
        self.roles: dict[str, _Role] = defaultdict(_Role)
        self.seen: set[str] = set()
        self.system = ""
        self.proxy = False
        self.instance = ""
        self.overflows: list[Overflow] = []

    def record(self, role: str, messages: list[dict], reply: BaseModel) -> None:
        key = role + json.dumps(messages, sort_keys=True, ensure_ascii=False)
        if key in self.seen:
            return
        self.seen.add(key)
        r = self.roles[role]
        r.requests += 1
        r.input_tokens += message_tokens(messages)
        out = count_tokens(json.dumps(reply.model_dump(mode="json"), ensure_ascii=False))
        r.output_tokens += out
        budget = self.settings.output_budget(role) if self.settings is not None else None
        if budget is not None and out > budget:
            where, setting = f"{self.instance} ({self.system})", f"[judge] max_output_tokens_by_role.{role}"
            self.overflows.append(Overflow(role, where, out, budget, setting))
        if self.proxy:
            r.proxies.add(self.system)


def _result(value: BaseModel, model: str) -> LLMResult:
    return LLMResult(value, "", 0, 0, False, "", model, 1)


def _instrument(judge: Any, rec: _Recorder, settings: LLMSettings) -> Any:
    """`judge` with `ask` / `ask_messages` replaced (on this instance) by count-and-stand-in versions."""

    def ask(
        role: str, schema: type, *, check: Any = None, on_length: str = "grow", **variables: Any
    ) -> LLMResult:
        messages = render(judge.prompts[role], **variables)
        reply = schema.model_validate(_reply(role, variables, messages, schema))
        rec.record(role, messages, reply)
        return _result(reply, settings.model)

    def ask_messages(role: str, messages: list[dict], schema: type, *, check: Any = None) -> LLMResult:
        reply = schema.model_validate(_reply(role, {}, messages, schema))
        rec.record(role, messages, reply)
        return _result(reply, settings.model)

    judge.ask = ask
    judge.ask_messages = ask_messages
    return judge


# ------------------------------------------------------------------------------- stand-in replies

_WHY = "The report states this with the same figures and period as the reference."


def _ids(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def _sentences(text: str) -> list[str]:
    """Sentences of a part (at most ITEM_WORDS words each: what one extracted item restates)."""
    out = [s.strip() for s in split_sentences(re.sub(r"\s+", " ", text)) if len(s.split()) >= 4]
    return [" ".join(s.split()[:ITEM_WORDS]) for s in out] or ["The part states one fact."]


def _items(variables: Mapping[str, Any]) -> int:
    lo, hi = int(variables.get("min_items") or 2), int(variables.get("max_items") or 5)
    return max(1, (lo + hi) // 2)


def _scaffold_reply(role: str, variables: Mapping[str, Any]) -> dict:
    sents, n = _sentences(str(variables.get("report_part", ""))), _items(variables)
    pick = [sents[i % len(sents)] for i in range(n)]
    if role == "score_scaffold_facts":
        return {"facts": [{"fact": s, "tier": "main", "source": s[:60]} for s in pick]}
    if role == "score_scaffold_questions":
        qs = [
            {"question": f"What does the report say about {s[:50]}?", "answer": s, "tier": "main"}
            for s in pick
        ]
        return {"questions": qs}
    per = 3  # attributes per entity
    ents = [pick[i : i + per] for i in range(0, n, per)]
    return {
        "entities": [
            {
                "name": f"Entity {k}",
                "type": "other",
                "attributes": [{"attribute": a, "tier": "main"} for a in e],
            }
            for k, e in enumerate(ents)
        ]
    }


def _reply(role: str, v: Mapping[str, Any], messages: list[dict], schema: type[BaseModel]) -> dict:
    """A valid reply of `role` sized like a real one (what it holds never changes a count but its own);
    a role frame's judges do not know (a family added since) gets the smallest reply its schema allows."""
    if role == "score_units":  # what a compliant model lists: every sentence, every figure of every row
        return {"units": expected_items(str(v["report_part"]))}
    if role == "score_coverage":
        return {"judgments": [{"unit_id": i, "score": 1.0, "rationale": _WHY} for i in _ids(v["unit_ids"])]}
    if role == "score_claims":
        items = expected_items(str(v["report_part"]))
        return {"claims": [{k: i[k] for k in ("content", "source_sentence", "section")} for i in items]}
    if role in ("score_verify", "score_entail"):
        ids = [int(x) for x in re.findall(r"^### Claim (\d+)", str(v["claims"]), re.M)]
        low = {i for i in ids if (i * 7919) % 100 < STAGE2_SHARE * 100} if role == "score_verify" else set()
        return {
            "verdicts": [{"claim_id": i, "score": 0.5 if i in low else 1.0, "rationale": _WHY} for i in ids]
        }
    if role.startswith("score_scaffold_") and role[15:] in ("facts", "questions", "entities"):
        return _scaffold_reply(role, v)
    if role == "score_scaffold_align":
        return {"alignments": [{"id": i, "ok": True, "justification": _WHY} for i in _ids(v["item_ids"])]}
    if role == "score_scaffold_entity_check":  # every listed entity found, with all its attributes
        listed = [json.loads(ln) for ln in str(v["entities"]).splitlines() if ln.strip().startswith("{")]
        return {
            "entities": [
                {"name": e.get("entity", ""), "preserved_ids": [a["id"] for a in e.get("attributes", [])]}
                for e in listed
            ]
        }
    if role == "score_scaffold_faithful":
        return {
            "sentences": [
                {"id": i, "supported": True, "justification": _WHY} for i in _ids(v["sentence_ids"])
            ]
        }
    if role == "score_scaffold_focus":  # every sentence states the first listed fact
        first = re.search(r"^\[(\d+)\]", str(v["facts"]), re.M)
        return {
            "sentences": [
                {"id": i, "aligned": bool(first), "fact_ids": [int(first.group(1))] if first else []}
                for i in _ids(v["sentence_ids"])
            ]
        }
    if role == "score_rubric":
        ids = [x.strip() for x in str(v["item_ids"]).split(",") if x.strip()]
        return {"decisions": [{"item_id": i, "decision": "pass", "rationale": _WHY} for i in ids]}
    if role == "score_holistic":
        return dict.fromkeys(("faithfulness", "completeness", "understandability", "hallucination"), 7) | {
            "rationale": _WHY
        }
    if role == "score_pairwise":
        return {"winner": "tie", "rationale": _WHY}
    if role == "score_structure":
        lines = str(messages[-1]["content"]).splitlines()
        heads = [h.title.strip() for h in map(heading_of, lines) if h is not None]
        return {"title": "", "children": [{"type": "section", "title": h, "objective": h} for h in heads]}
    return _schema_reply(schema.model_json_schema())


def _schema_reply(node: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """The smallest value a JSON schema (pydantic's) accepts: its required keys, lists at their minimum
    length, numbers at their minimum, the first of an enum or a union."""
    defs = node.get("$defs", defs) or {}
    if "$ref" in node:
        return _schema_reply(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return _schema_reply(node[key][0], defs)
    if "const" in node or "enum" in node:
        return node.get("const", (node.get("enum") or [None])[0])
    kind = node.get("type", "object")
    if kind == "object":
        props = node.get("properties", {})
        return {k: _schema_reply(props[k], defs) for k in node.get("required", [])}
    if kind == "array":
        return [_schema_reply(node.get("items", {}), defs) for _ in range(node.get("minItems", 0))]
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return low + (1 if "exclusiveMinimum" in node else 0)
    if kind == "string":
        return "x" * max(1, node.get("minLength", 1))
    return False if kind == "boolean" else None


# ---------------------------------------------------------------------------------------- judges


class _EstimateEnv(JudgeEnv):
    """The run's JudgeEnv as the dry run sees it: no client (every LLM judge a family makes is instrumented
    before it asks anything) and stand-in embeddings (no model loaded, no endpoint called)."""

    @property
    def client(self) -> Any:
        return None

    def _embedder(self) -> tuple[Callable[[Sequence[str]], Any], str]:
        return _stand_in_embed, self.settings.embedder


def _stand_in_embed(texts: Sequence[str]) -> Any:
    # unit vectors seeded by each text: what a score computes from them never reaches a count
    import numpy as np

    out = np.empty((len(texts), 8), dtype=np.float32)
    for i, t in enumerate(texts):
        out[i] = np.random.default_rng(int.from_bytes(t.encode()[:8].ljust(8, b"\0"), "little")).random(8)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _llm_judges(obj: Any, depth: int = 2) -> list[LLMJudge]:
    """The LLM judges a family holds (as attributes, or attributes of its attributes)."""
    found: list[LLMJudge] = []
    for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
        if isinstance(value, LLMJudge):
            found.append(value)
        elif depth > 1 and not isinstance(value, JudgeEnv) and hasattr(value, "__dict__"):
            found += _llm_judges(value, depth - 1)
    return list({id(j): j for j in found}.values())


@dataclass
class _Judges:
    """The selected families whose judges ask a model, each with its LLM judges instrumented: the dry run
    runs their own scoring code, so a new family's requests are counted as its score run would send them."""

    rec: _Recorder
    families: list[Any] = field(default_factory=list)
    comparisons: list[Any] = field(default_factory=list)

    @classmethod
    def make(cls, judge: LLMSettings | None, settings: ScoreSettings, fams: list[str], comps: list[str]):
        rec = _Recorder(judge)
        out = cls(rec)
        if judge is None:
            return out
        llm = judge.model_copy(update={"concurrency": 1})  # one thread: the recorder counts in order
        env = _EstimateEnv(settings, llm, Path("."))
        for made, names, get in (
            (out.families, fams, registry.family),
            (out.comparisons, comps, registry.comparison),
        ):
            for name in names:
                family = get(name)(env)
                judges = _llm_judges(family)
                for j in judges:
                    _instrument(j, rec, llm)
                if judges:  # a family with offline judges only asks nothing
                    made.append(family)
        return out


def _judge_instance(
    j: _Judges, inst: Mapping[str, Any], reports: Mapping[str, str], proxy, release: Path, seed: int
):
    """Every judge request of one instance: each family's preparation of Y, its score of every system,
    then the comparison of the contenders."""
    iid, rec = str(inst["instance_id"]), j.rec
    rec.instance = iid
    seed = instance_seed(seed, iid)
    rec.system, rec.proxy = GOLD, False
    gold = str(inst["target_markdown"])
    prepared = {f.name: f.prepare(gold) for f in j.families if f.prepares}
    available = available_inputs(release, dict(inst), None)  # the same for every system of the instance
    for system, report in reports.items():
        rec.system, rec.proxy = system, proxy[system]
        for f in j.families:
            f.score(f.inputs(iid, report, seed, **{**available, "prepared": prepared.get(f.name)}))
    contenders = [s for s in reports if s != GOLD]
    if len(contenders) >= 2:
        rec.system, rec.proxy = "+".join(s for s in contenders if proxy[s]), any(proxy[s] for s in contenders)
        for c in j.comparisons:
            c.compare(iid, gold, {s: reports[s] for s in contenders}, {})


# ------------------------------------------------------------------------------------ generation


def _generation_row(
    s: _System,
    inst: list[dict],
    rows: Mapping[str, list[dict]],
    generators: Mapping[str, Generator],
    prices: Mapping[str, ModelPrice],
    overflows: list[Overflow],
) -> EstimateRow:
    """Requests and tokens of one system generating a report per instance; a one-shot report expected past
    the system's output budget goes to `overflows`."""
    if s.kind != "openai":
        what = {
            "builtin": "frame's own baseline",
            "command": "a local program",
            "submission": "reports given",
        }
        return EstimateRow(
            role=s.name,
            kind="system",
            model="-",
            requests=0,
            input_tokens=0,
            output_tokens=0,
            usd=0.0,
            basis=COUNTED,
            note=f"{s.kind}: {what[s.kind]}, no model request",
        )
    llm = s.llm()
    gen = generators.get(s.strategy)
    requests = tokens_in = tokens_out = 0
    for i in inst:
        y = count_tokens(json.dumps({"report_markdown": i["target_markdown"]}, ensure_ascii=False))
        if s.strategy == "one-shot" and y > llm.output_budget(ONE_SHOT_ROLE):
            budget, setting = llm.output_budget(ONE_SHOT_ROLE), f"[systems.{s.name}] max_output_tokens"
            overflows.append(Overflow(s.name, str(i["instance_id"]), y, budget, setting))
        g_rows = rows.get(str(i["grounding_set_id"]), [])
        if gen is not None:
            plans = gen(s.config, i, g_rows, llm)
            requests += len(plans)
            tokens_in += sum(message_tokens(m) for m in plans)
        else:  # no generator given: S + G + the prompt, never more than the input budget
            budget = input_budget(llm, ONE_SHOT_ROLE, 2500)
            need = (
                count_tokens(str(i["sample_markdown"])) + sum(int(r.get("tokens") or 0) for r in g_rows) + 900
            )
            requests += 1
            tokens_in += min(need, budget)
        tokens_out += y
    basis = COUNTED if gen is not None else "estimated: S + G + prompt, capped at the input budget"
    return EstimateRow(
        role=s.name,
        kind="system",
        model=llm.model,
        requests=requests,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        usd=usd(llm.model, tokens_in, tokens_out, prices),
        basis=basis,
        note=f"{s.strategy}; output tokens: the size of Y",
    )


# -------------------------------------------------------------------------------------- estimate


def estimate_score(
    release: Path,
    systems: Mapping[str, Any],
    judge: LLMSettings | None,
    families: Sequence[str] | None,
    settings: ScoreSettings,
    *,
    prices: Mapping[str, ModelPrice] | None = None,
    generators: Mapping[str, Generator] | None = None,
    only: Collection[str] | None = None,
) -> Estimate:
    """Requests, input and output tokens and cost of scoring `release` with `systems` (name -> system
    config of schemas.evaluation, or None for a builtin named as such) and the `families` selected
    (`--metrics` names; None: FRAME's three), judged by `judge` (None: offline judges). `generators` maps
    a generation strategy ("one-shot", "section-by-section") to the function listing its requests; `only`:
    these instance ids (--limit / --instances), else every instance."""
    release, prices, generators = Path(release), prices or {}, generators or {}
    sys_list = _systems(systems)
    contenders = [s for s in sys_list if s.name != GOLD]
    _, fams, comps = registry.plan(list(families) if families else None, len(contenders))
    if judge is None and settings.tree == "llm" and "structure" in fams:
        raise FrameInputError("--tree", "llm trees need a judge endpoint ([judge] or FRAME_LLM_BASE_URL)")
    inst = sorted(_table(release, "instances"), key=lambda r: r["instance_id"])
    if only is not None:
        inst = [r for r in inst if r["instance_id"] in set(only)]
    rows: dict[str, list[dict]] = defaultdict(list)
    for r in _table(release, "grounding_documents"):
        rows[str(r["grounding_set_id"])].append(r)
    reports, basis = _reports(release, inst, sys_list)
    gen_overflows: list[Overflow] = []
    out = [_generation_row(s, inst, rows, generators, prices, gen_overflows) for s in sys_list]
    j = _Judges.make(judge, settings, fams, comps)
    for i in inst:
        by_system = {s.name: reports[s.name][i["instance_id"]] for s in sys_list}
        proxy = {s.name: basis[s.name] != COUNTED for s in sys_list}
        _judge_instance(j, i, by_system, proxy, release, settings.seed)
    out += _judge_rows(j.rec, judge, basis, prices)
    return Estimate(
        title=f"score dry run: {release.parent.name}/{release.name}, {len(inst)} instance(s)",
        rows=out,
        notes=_notes(judge, settings, basis, fams, comps) + overflow_notes(gen_overflows + j.rec.overflows),
    )


def _table(release: Path, name: str) -> list[dict]:
    path = release / f"{name}.parquet"
    if not path.is_file():
        raise FrameInputError(path, "missing: not a frame release folder")
    return pq.read_table(path).to_pylist()


def _judge_rows(
    rec: _Recorder, judge: LLMSettings | None, basis: Mapping[str, str], prices
) -> list[EstimateRow]:
    out = []
    for role, r in rec.roles.items():
        assert judge is not None
        if role in REPLY_DRIVEN:
            b = f"estimated: {REPLY_DRIVEN[role]}"
        elif r.proxies:
            names = sorted(n for s in r.proxies for n in s.split("+") if n)
            b = "counted; R' estimated for " + ", ".join(f"{n} (size of {basis[n]})" for n in names)
        else:
            b = COUNTED
        out.append(
            EstimateRow(
                role=role,
                model=judge.model,
                requests=r.requests,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                usd=usd(judge.model, r.input_tokens, r.output_tokens, prices),
                basis=b,
            )
        )
    return out


def _notes(
    judge, settings: ScoreSettings, basis: Mapping[str, str], fams: list[str], comps: list[str]
) -> list[str]:
    notes = [
        f"Families: {', '.join([*fams, *comps])}; judge: {judge.model if judge else 'offline'}"
        f"{', trees by the judge' if settings.tree == 'llm' else ''}; "
        f"up to {settings.max_items} items per report."
    ]
    if judge is None or (settings.judge != "openai" and settings.tree != "llm"):
        notes.append("Offline judges: no judge request.")
    notes += [
        "Input tokens of judge prompts are o200k_base counts of the prompts the judges build; each distinct "
        "request counts once (the response cache answers repeats).",
        "Output tokens are estimated everywhere (stand-in replies the size of real ones; generation: the "
        "size of Y), never capped at the output budget: requests expected past it are listed below. Assumes "
        "every reply is valid at once.",
    ]
    if judge is not None:
        notes.append(tokenizer_note(judge))
    if settings.embedder.startswith("openai:"):
        notes.append(f"Embedding requests of {settings.embedder} are not included.")
    return notes
