"""Giving a skill to a report system, and the rule templates of the offline optimizer.

`with_skill(system, skill, folder)` wraps a ReportSystem so that it generates with skill K:
an `openai` system gets K in the system part of its prompt (a derived template file, so the prompt
digest - and so the system's identity and generation cache key - changes with K); a `command` system
finds K as `skill.md` in its instance folder; the builtin `extractive`
honours the rules whose tag it can check (tasks.generate.baselines.HONOURED); other builtins ignore K.
An empty skill leaves a system exactly as it was (same identity, same cached reports).

A skill goes into every generation request, so its length is bounded: `over_budget` says (one line) when a
skill has more words than the run's `[evolve] budget_words`, naming the file it was read from."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from schemas.evolve import STAGES, Rule, Skill
from tasks.atomic import atomic_write_text
from tasks.generate.systems import (
    BuiltinReportSystem,
    CommandReportSystem,
    Generation,
    OpenAIReportSystem,
    ReportSystem,
    without_target,
)
from tasks.markdown.document import heading_of

__all__ = [
    "SKILL_FILE",
    "TEMPLATES",
    "max_skill_file_bytes",
    "over_budget",
    "parse_skill",
    "read_skill",
    "skill_source",
    "with_skill",
]

SKILL_FILE = "skill.md"
_SYSTEM_MARK = "---user---"
_PREAMBLE = (
    "\n\nFollow this report-writing skill. Each rule says when it applies, what to do, and how to check "
    "the result before you reply.\n\n"
)

# The offline optimizer's rules, by tag (the rule text never names a rubric item). Tags also mark the rules
# the offline `extractive` system honours.
_RULES = [
    Rule(
        stage="review",
        when="a section ends on copied or drafted text",
        do="cut it back to its last complete sentence; never end a section mid-sentence",
        check="the last line of every section ends with terminal punctuation, a table row or a heading",
        tag="complete-ending",
    ),
    Rule(
        stage="write",
        when="a passage says what an earlier section already said",
        do="leave it out and use the next most relevant evidence instead",
        check="no two paragraphs of the report are near-duplicates",
        tag="no-repetition",
    ),
    Rule(
        stage="plan",
        when="the sources hold nothing for a section of the sample",
        do="keep the heading and write one sentence saying the period's documents do not cover it",
        check="every heading of the sample is followed by content",
        tag="fill-empty",
    ),
    Rule(
        stage="plan",
        when="drafting the outline",
        do="take every top-level heading of the sample, in the sample's order",
        check="the report's top-level headings match the sample's",
        tag="keep-headings",
    ),
    Rule(
        stage="write",
        when="writing the title",
        do="name the entity and the new period or topic window, updated from the sample's title",
        check="the title names the entity and no earlier period",
        tag="title-period",
    ),
    Rule(
        stage="review",
        when="a period label appears in the text or a table",
        do="make it agree with the period the title names",
        check="no period later than the title's appears",
        tag="period-labels",
    ),
    Rule(
        stage="write",
        when="a table holds numbers",
        do="state the unit and scale in the header or the line above it",
        check="every numeric table carries a unit or scale note",
        tag="table-units",
    ),
    Rule(
        stage="write",
        when="a table compares periods",
        do="name each period in the column headers",
        check="every numeric table names its periods",
        tag="table-periods",
    ),
    Rule(
        stage="review",
        when="prose quotes a figure that a table of the report also holds",
        do="copy the figure from the table with its unit and scale",
        check="each figure in prose matches its table cell",
        tag="numbers-agree",
    ),
]
TEMPLATES: dict[str, Rule] = {r.tag: r for r in _RULES}
# which template addresses which rubric item (frame's bookkeeping: item ids never reach a skill's text)
TEMPLATE_FOR_ITEM: dict[str, str] = {
    "g0_not_truncated": "complete-ending",
    "g2_no_repetition": "no-repetition",
    "g2_no_empty_sections": "fill-empty",
    "g2_sections_present": "keep-headings",
    "g2_section_order": "keep-headings",
    "g1_title_entity": "title-period",
    "g1_period_consistency": "period-labels",
    "g2_table_units": "table-units",
    "g2_table_periods": "table-periods",
    "g2_numbers_agree": "numbers-agree",
}


# a rule line of a rendered skill (Skill.render): "- When ...: ... Check: .... <!-- tag -->"
_RULE_LINE = re.compile(
    r"^- When (?P<when>.+?): (?P<do>.+?) Check: (?P<check>.+?)(?: <!-- (?P<tag>[\w-]+) -->)?$"
)


# sha256 of each skill read by parse_skill -> (where it was read from, its size in bytes): an error about
# the skill (over_budget) names the file, which the Skill itself does not hold.
_READ_FROM: dict[str, tuple[str, int]] = {}
# The longest rule line Rule's field limits allow ("- When " + 300 + ": " + 400 + " Check: " + 300 + "." + a
# tag comment of 40): a longer line is refused before the pattern, which is quadratic on a long line.
MAX_RULE_LINE = 1100
# A skill file larger than this is refused from its size, unread (read_skill): every rule of a full budget
# at its longest in UTF-8 (a rule holds 3 words at least) and 1 MiB of headings, notes and blank lines.
SKILL_FILE_SLACK = 1 << 20


def max_skill_file_bytes(budget_words: int) -> int:
    return 4 * MAX_RULE_LINE * (budget_words // 3 + 1) + SKILL_FILE_SLACK


def _too_long(size: int, words: int | None, budget_words: int) -> str:
    what = f"{size:,} bytes, {words:,} words" if words is not None else f"{size:,} bytes"
    return (
        f"skill of {what}: over the skill budget of {budget_words:,} words "
        "([evolve] budget_words; shorten the skill or raise the budget)"
    )


def read_skill(path: Path, budget_words: int | None = None) -> Skill:
    """`parse_skill` of the UTF-8 file at `path`. With `budget_words`, a file larger than any skill of
    that budget can be (`max_skill_file_bytes`) is refused from its size before it is read. OSError /
    UnicodeDecodeError when it cannot be read; ValueError (one line naming the file) when it is no skill."""
    path = Path(path)
    if budget_words is not None:
        size = path.stat().st_size
        if size > max_skill_file_bytes(budget_words):
            raise ValueError(f"{path}: {_too_long(size, None, budget_words)}")
    return parse_skill(path.read_text(encoding="utf-8"), str(path), budget_words)


def parse_skill(text: str, where: str = "skill", budget_words: int | None = None) -> Skill:
    """The skill of a Markdown file in `Skill.render`'s format; a line it cannot read -> ValueError
    naming `where` and the line number. With `budget_words`, a skill whose rules hold more words ->
    ValueError naming `where`, its size and the budget."""
    size = len(text.encode("utf-8"))
    rules, stage = [], None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        head = heading_of(line)
        if head is not None and head.level == 2:
            stage = head.title.strip().lower()
            if stage not in STAGES:
                raise ValueError(f"{where}:{n}: unknown stage {head.title.strip()!r} (plan, write, review)")
        elif line.startswith("- "):
            if len(line) > MAX_RULE_LINE:
                raise ValueError(
                    f"{where}:{n}: a rule line of {len(line):,} characters (at most {MAX_RULE_LINE:,})"
                )
            m = _RULE_LINE.match(line)
            if m is None or stage is None:
                shape = "'- When ...: ... Check: ....' under a ## Plan / Write / Review heading"
                raise ValueError(f"{where}:{n}: not a rule line ({shape})")
            check = m["check"].rstrip(".")
            rules.append(Rule(stage=stage, when=m["when"], do=m["do"], check=check, tag=m["tag"] or ""))
    skill = Skill(rules=rules)
    _READ_FROM[skill.sha256] = (where, size)
    if budget_words is not None and skill.words > budget_words:
        raise ValueError(f"{where}: {_too_long(size, skill.words, budget_words)}")
    return skill


def skill_source(skill: Skill) -> str | None:
    """The file (parse_skill's `where`) `skill` was read from in this process, if it was read from one."""
    found = _READ_FROM.get(skill.sha256)
    return found[0] if found else None


def over_budget(skill: Skill, budget_words: int, where: str = "skill") -> tuple[str, str] | None:
    """(the skill's file, else `where`; the problem: its size vs the budget) when `skill` has more words
    than `budget_words`; None when it fits."""
    if skill.words <= budget_words:
        return None
    name, size = _READ_FROM.get(skill.sha256, (where, len(skill.render().encode("utf-8"))))
    return name, _too_long(size, skill.words, budget_words)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Skilled:
    """Common part of the wrappers: the base system's name and kind, identity + the skill's digest."""

    def __init__(self, base: ReportSystem, skill: Skill) -> None:
        self.base, self.skill = base, skill
        self.name, self.kind = base.name, base.kind

    def identity(self) -> dict[str, Any]:
        return {**self.base.identity(), "skill_sha256": self.skill.sha256}

    def __getattr__(self, attr: str) -> Any:  # check(), config, ... of the base system
        return getattr(self.base, attr)


class _SkilledCommand(_Skilled):
    """A command system whose instance folders also hold the skill as skill.md."""

    def __init__(self, base: CommandReportSystem, skill: Skill) -> None:
        super().__init__(base, skill)
        files = {**base.files, SKILL_FILE: skill.render()}
        self.runner = CommandReportSystem(base.name, base.config, base.workdir_root, files=files)

    def generate(self, instance: dict[str, Any], grounding: list[dict[str, Any]]) -> Generation:
        return self.runner.generate(instance, grounding)


class _SkilledExtractive(_Skilled):
    def __init__(self, base: ReportSystem, skill: Skill, honoured: set[str]) -> None:
        super().__init__(base, skill)
        self.honoured = sorted(honoured)

    def identity(self) -> dict[str, Any]:  # only the rules it honours change its reports
        return {**self.base.identity(), "honours": self.honoured}

    def generate(self, instance: dict[str, Any], grounding: list[dict[str, Any]]) -> Generation:
        from tasks.generate.baselines import extractive

        report = extractive(without_target(instance), grounding, honour=self.honoured)
        return Generation(str(instance["instance_id"]), report, {"honours": self.honoured}, None)


def skill_prompt(template: Path, skill: Skill, folder: Path) -> Path:
    """A copy of a generation prompt template with `skill` appended to its system part."""
    text = template.read_text(encoding="utf-8")
    if _SYSTEM_MARK not in text:
        raise ValueError(f"{template}: no {_SYSTEM_MARK} section")
    body = skill.render().replace("{{", "{ {").replace("}}", "} }")  # never a placeholder
    head, tail = text.split(_SYSTEM_MARK, 1)
    derived = head.rstrip("\n") + _PREAMBLE + body.rstrip() + "\n" + _SYSTEM_MARK + tail
    path = Path(folder) / f"{template.stem}-skill-{_sha(derived)[:12]}.md"
    if not path.is_file():
        atomic_write_text(path, derived)
    return path


def with_skill(system: ReportSystem, skill: Skill, folder: Path) -> ReportSystem:
    """`system` generating with `skill` (see the module docstring); `folder` keeps derived prompts."""
    if not skill.rules:
        return system
    if isinstance(system, OpenAIReportSystem):
        from schemas.evaluation import DEFAULT_PROMPT

        cfg = system.config
        if cfg.prompt is not None:
            template = Path(cfg.prompt)
        elif cfg.strategy == "one-shot":
            template = DEFAULT_PROMPT
        else:
            template = DEFAULT_PROMPT.with_name("generate_section.md")
        derived = cfg.model_copy(update={"prompt": skill_prompt(template, skill, folder)})
        return OpenAIReportSystem(system.name, derived, system.cache_dir)
    if isinstance(system, CommandReportSystem):
        return _SkilledCommand(system, skill)  # type: ignore[return-value]
    if isinstance(system, BuiltinReportSystem) and system.config.builtin == "extractive":
        from tasks.generate.baselines import HONOURED

        honoured = skill.tags & HONOURED
        return _SkilledExtractive(system, skill, honoured) if honoured else system  # type: ignore[return-value]
    return system
