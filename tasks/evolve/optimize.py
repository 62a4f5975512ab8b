"""The optimizer and critic roles of the evolve loop, each with an LLM form and a deterministic offline form.

Optimizer: (current skill K_t, recurrent failures, rules rejected before) -> candidate K_{t+1}. The
offline optimizer adds the template rule (tasks.evolve.skill.TEMPLATES) of each failure it has one for,
most failed first, skipping rejected ones. The LLM optimizer is shown item semantics, aggregate outcomes
and anonymised evidence only (Failure.brief). Critic: removes rules that would make a report state an
analyst's identity or qualifications, a rating or a target price the sources do not support (paper 003
section 5), rules naming instance facts (figures, domain names), rules that copy rubric wording,
near-duplicates and conflicting rules (two rules for one tag), then enforces the word budget (newest rules
go first). The offline critic always runs, also after an LLM critic, so its guarantees hold whatever the
model replies."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, Field
from rapidfuzz import fuzz

from schemas.config import LLMSettings
from schemas.evolve import Rule, Skill
from schemas.rubric import load_rubric
from tasks.evolve.failures import Failure
from tasks.evolve.skill import TEMPLATE_FOR_ITEM, TEMPLATES

__all__ = [
    "CriticReply",
    "SkillReply",
    "critique",
    "llm_critique",
    "llm_propose",
    "propose",
    "unsupported_claim",
]

OPTIMIZER_ROLE = "evolve_optimizer"
CRITIC_ROLE = "evolve_critic"


class SkillReply(BaseModel):
    rules: list[Rule] = Field(max_length=40)


class Removed(BaseModel):
    rule: str
    why: str


class CriticReply(BaseModel):
    rules: list[Rule] = Field(max_length=40)
    removed: list[Removed] = Field(default_factory=list)


def propose(
    current: Skill, failures: list[Failure], rejected: set[str], max_new: int
) -> tuple[Skill, list[str]]:
    """The offline optimizer: K_t plus the template rules of the most failed items (see module docstring)."""
    have = current.tags
    added: list[Rule] = []
    notes: list[str] = []
    for f in failures:
        tag = TEMPLATE_FOR_ITEM.get(f.item)
        if tag is None:
            notes.append(f"no template rule for failure {f.title!r}")
        elif tag in have or tag in rejected:
            continue
        elif len(added) < max_new:
            added.append(TEMPLATES[tag])
            have = have | {tag}
            notes.append(
                f"added a {TEMPLATES[tag].stage} rule for failure {f.title!r} ({f.fail_rate:.0%} failed)"
            )
    return Skill(rules=[*current.rules, *added]), notes


def _rubric_phrases(n: int = 6) -> set[tuple[str, ...]]:
    """Every run of `n` words of a rubric criterion (a rule containing one copies the rubric's wording)."""
    out: set[tuple[str, ...]] = set()
    for item in load_rubric():
        words = re.findall(r"[a-z]+", item.criterion.lower())
        out.update(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return out


def _copies_rubric(rule: Rule, phrases: set[tuple[str, ...]], n: int = 6) -> bool:
    words = re.findall(r"[a-z]+", f"{rule.when} {rule.do} {rule.check}".lower())
    return any(tuple(words[i : i + n]) in phrases for i in range(len(words) - n + 1))


# Paper 003 section 5: the critic "rejects rules that require unsupported analyst identities,
# qualifications, ratings, or target prices". What such a rule asks for, by kind:
_CLAIMS = {
    "an analyst's identity or qualifications": re.compile(
        r"\banalysts?(?:'s|s')?\b[^.;]*?\b(?:name|identit|credential|qualification|licen[cs]e|certif|registration)"
        r"|\b(?:name|identify|sign)\w*\b[^.;]*?\banalysts?\b|\bCFA\b|\bqualifications?\b",
        re.I,
    ),
    "a rating": re.compile(
        r"\b(?:buy|hold|sell|neutral|accumulate|reduce)\s+(?:ratings?|recommendations?|calls?)\b"
        r"|\b(?:strong[- ]buy|overweight|underweight|equal[- ]weight|outperform|underperform)\b"
        r"|\bmarket[- ]perform\b"
        r"|\bratings?\b",
        re.I,
    ),
    "a target price": re.compile(
        r"\b(?:target|objective)\s+prices?\b|\bprice\s+(?:targets?|objectives?)\b", re.I
    ),
}
# ... unless the rule forbids it (in what it says to do) or ties it to what the sources state
_FORBIDS = re.compile(r"\b(?:never|not|don't|avoid|omit|leave out|remove|delete|drop|refrain)\b", re.I)
_FROM_SOURCES = re.compile(
    r"\b(?:sources?|documents?|filings?|evidence)\b[^.;]*\b(?:state|give|name|hold|contain)", re.I
)


def unsupported_claim(rule: Rule) -> str | None:
    """What unsupported claim `rule` would make a report state (see _CLAIMS), or None."""
    text = f"{rule.when} {rule.do} {rule.check}"
    kinds = [kind for kind, pattern in _CLAIMS.items() if pattern.search(text)]
    if not kinds or _FORBIDS.search(rule.do) or _FROM_SOURCES.search(text):
        return None
    return ", ".join(kinds)


def _names_instance(rule: Rule, names: set[str]) -> bool:
    text = f"{rule.when} {rule.do} {rule.check}"
    if re.search(r"\d", text):
        return True
    return any(len(n) >= 3 and re.search(rf"\b{re.escape(n)}\b", text, re.I) for n in names)


def critique(candidate: Skill, current: Skill, names: set[str], budget_words: int) -> tuple[Skill, list[str]]:
    """The offline critic (see the module docstring); returns the revised skill and one note per removal."""
    phrases = _rubric_phrases()
    kept: list[Rule] = []
    notes: list[str] = []
    for rule in candidate.rules:
        why = None
        claim = unsupported_claim(rule)
        if claim:
            why = f"asks for {claim} the sources do not support"
        elif _names_instance(rule, names):
            why = "names an instance fact (a figure or a domain name)"
        elif _copies_rubric(rule, phrases):
            why = "copies rubric wording"
        elif rule.tag and rule.tag in {k.tag for k in kept}:
            why = "conflicts with an earlier rule for the same concern"
        elif any(fuzz.token_set_ratio(rule.do, k.do) >= 90 and rule.stage == k.stage for k in kept):
            why = "duplicates an earlier rule"
        if why:
            notes.append(f"removed {rule.stage} rule {rule.when!r}: {why}")
        else:
            kept.append(rule)
    old = {r.model_dump_json() for r in current.rules}
    while sum(r.words for r in kept) > budget_words and kept:
        newest = [i for i, r in enumerate(kept) if r.model_dump_json() not in old]
        drop = kept.pop(newest[-1] if newest else len(kept) - 1)
        notes.append(f"removed {drop.stage} rule {drop.when!r}: over the {budget_words}-word budget")
    return Skill(rules=kept), notes


def _client(settings: LLMSettings, cache_dir: Path):
    from tasks.llm.client import LLMClient

    return LLMClient(settings, cache_dir)


def llm_propose(
    current: Skill,
    failures: list[Failure],
    rejected: list[Rule],
    budget_words: int,
    settings: LLMSettings,
    cache_dir: Path,
) -> tuple[Skill, list[str]]:
    """The LLM optimizer: one validated request (retried by LLMClient when the reply is invalid)."""
    from tasks.llm.prompts import load_prompt, render

    briefs = "\n".join(json.dumps(f.brief(), ensure_ascii=False, sort_keys=True) for f in failures)
    tried = "; ".join(f"{r.stage}: when {r.when}, {r.do}" for r in rejected) or "none"
    messages = render(
        load_prompt(OPTIMIZER_ROLE),
        skill=current.render() or "(empty)",
        failures=briefs or "(none)",
        rejected=tried,
        budget=budget_words,
    )
    got = _client(settings, cache_dir).complete_json(OPTIMIZER_ROLE, messages, SkillReply, None)
    return Skill(rules=got.value.rules), [f"optimizer {got.model}: {len(got.value.rules)} rules"]


def llm_critique(
    candidate: Skill, budget_words: int, settings: LLMSettings, cache_dir: Path
) -> tuple[Skill, list[str]]:
    from tasks.llm.prompts import load_prompt, render

    messages = render(load_prompt(CRITIC_ROLE), skill=candidate.render() or "(empty)", budget=budget_words)
    got = _client(settings, cache_dir).complete_json(CRITIC_ROLE, messages, CriticReply, None)
    notes = [f"critic {got.model} removed {r.rule!r}: {r.why}" for r in got.value.removed]
    return Skill(rules=got.value.rules), notes
