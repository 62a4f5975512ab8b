"""The metric families `frame score` knows, in display order, and everything derived from them.

The CLI help, the `--metrics` names, metric ranges and directions, the leaderboard and diagnostic order
and the scoring-code digest of each family (its cache key) all come from here. A new family is one class
(`tasks.score.metric.MetricFamily`) and one `register(...)` call: docs/extending.md.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import threading
from functools import cache
from pathlib import Path

from tasks import ast_guard
from tasks.errors import FrameInputError
from tasks.plugins import plugin_classes
from tasks.score.metric import ComparisonFamily, JudgeEnv, MetricFamily, MetricSpec

__all__ = [
    "build",
    "code_digest",
    "comparison",
    "comparisons",
    "families",
    "families_for",
    "family",
    "group_order",
    "metric_order",
    "metric_range",
    "plan",
    "register",
    "unregister",
    "selectable",
    "spec",
]

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = "frame.metric_families"
DEFAULT: tuple[str, ...] = ("structure", "coverage", "faithfulness")  # FRAME's three metrics
_FAMILIES: dict[str, type[MetricFamily]] = {}
_COMPARISONS: dict[str, type[ComparisonFamily]] = {}
_BUILTIN = (
    "tasks.score.structural_similarity:StructureFamily",
    "tasks.score.coverage:CoverageFamily",
    "tasks.score.faithfulness:FaithfulnessFamily",
    "tasks.score.fidelity:TablesFamily",
    "tasks.score.fidelity:TextEditDistanceFamily",
    "tasks.score.rouge:RougeFamily",
    "tasks.score.scaffold:ScaffoldFamily",
    "tasks.score.rubric:RubricFamily",
    "tasks.score.holistic:HolisticFamily",
    "tasks.score.pairwise:PairwiseFamily",
)
_LOADED = False
_LOCK = threading.RLock()
_BUILT: dict[tuple[str, str], object] = {}


def register(cls: type[MetricFamily] | type[ComparisonFamily]):
    """Add a family (usable as a class decorator). Its metric names must be new."""
    with _LOCK:
        _load()
        _add(cls)
    return cls


def unregister(name: str) -> None:
    """Remove a family registered with `register` (tests, interactive sessions)."""
    with _LOCK:
        _FAMILIES.pop(name, None)
        _COMPARISONS.pop(name, None)
        for key in [k for k in _BUILT if k[0] == name]:
            del _BUILT[key]


def _add(cls) -> None:
    name = cls.name
    if name in _FAMILIES or name in _COMPARISONS:
        if (_FAMILIES.get(name) or _COMPARISONS.get(name)) is cls:
            return
        raise ValueError(f"metric family {name!r} is already registered")
    if issubclass(cls, ComparisonFamily):
        _COMPARISONS[name] = cls
        return
    known = {m for f in _FAMILIES.values() for m in f.metric_names()} | set(_FAMILIES)
    clash = sorted(set(cls.metric_names()) & (known | set(_COMPARISONS)) - {name})
    if clash or not cls.metrics:
        raise ValueError(f"metric family {name!r}: metric names {clash or '(none)'} clash or are missing")
    _FAMILIES[name] = cls


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for cls in plugin_classes(_BUILTIN, ENTRY_POINTS):
        _add(cls)


def families() -> dict[str, type[MetricFamily]]:
    """Every per-(instance, system) family, in display order."""
    with _LOCK:
        _load()
        return dict(_FAMILIES)


def comparisons() -> dict[str, type[ComparisonFamily]]:
    with _LOCK:
        _load()
        return dict(_COMPARISONS)


def family(name: str) -> type[MetricFamily]:
    try:
        return families()[name]
    except KeyError:
        raise ValueError(f"unknown metric family {name!r}") from None


def comparison(name: str) -> type[ComparisonFamily]:
    return comparisons()[name]


def specs() -> dict[str, MetricSpec]:
    """Every metric's spec, in display order."""
    return {m.name: m for f in families().values() for m in f.metrics}


def spec(metric: str) -> MetricSpec:
    """The spec of `metric`; an unknown metric (e.g. from an older score table) gets the defaults."""
    return specs().get(metric) or MetricSpec(metric, group="other")


def metric_range(metric: str) -> tuple[float, float]:
    return spec(metric).range


def lower_is_better() -> frozenset[str]:
    return frozenset(m for m, s in specs().items() if not s.higher_is_better)


def metric_order() -> tuple[str, ...]:
    return tuple(specs())


def group_of(metric: str) -> str:
    s = spec(metric)
    return s.group or _family_of().get(metric, "other")


def group_order() -> tuple[str, ...]:
    return (*dict.fromkeys(group_of(m) for m in specs()), "other")


def _family_of() -> dict[str, str]:
    return {m.name: f.name for f in families().values() for m in f.metrics}


def selectable() -> tuple[str, ...]:
    """Names `--metrics` accepts: families, their metrics, and comparison families."""
    return tuple(dict.fromkeys((*families(), *specs(), *comparisons())))


def families_for(selection: list[str]) -> list[str]:
    """Families to compute for a `--metrics` selection (names of families or metrics), in order.
    Comparison families are not computed per (instance, system); unknown names raise ValueError."""
    of = _family_of()
    out: list[str] = []
    for name in selection:
        if name in comparisons():
            continue
        fam = name if name in families() else of.get(name)
        if fam is None:
            raise ValueError(name)
        if fam not in out:
            out.append(fam)
    return out


def plan(metrics: list[str] | None, contenders: int) -> tuple[list[str], list[str], list[str]]:
    """(selection, per-system families, comparison families) of a `--metrics` list (None: DEFAULT) for a
    run with `contenders` systems besides gold; a one-line input error for an impossible request."""
    selection = list(metrics or DEFAULT)
    unknown = sorted(set(selection) - set(selectable()))
    if unknown:
        known = ", ".join(selectable())
        raise FrameInputError("--metrics", f"unknown metric(s) {', '.join(unknown)} (known: {known})")
    chosen = families_for(selection)
    compared = [c for c in selection if c in comparisons()]
    for name in compared:
        if not chosen:
            chosen = list(comparison(name).default_families)
        need = comparison(name).min_systems
        if contenders < need:
            raise FrameInputError("--systems", f"{name} needs at least {need} systems besides gold")
    return selection, chosen, compared


def build(name: str, env: JudgeEnv):
    """The family `name` with its judges for `env`, made once per process and env."""
    key = (name, env.key())
    with _LOCK:
        if key not in _BUILT:
            cls = comparisons()[name] if name in comparisons() else family(name)
            _BUILT[key] = cls(env)
        return _BUILT[key]


# ---------------------------------------------------------------- scoring-code digest (cache keys)

_PROMPT_ROLE = re.compile(r"""["']((?:score|generate)_[a-z0-9_]+)["']""")


def code_digest(name: str) -> str:
    """sha256 (16 hex) of what a family's values depend on: the source of its module and of every
    first-party module it imports (transitively), plus the prompt files it names. An edit anywhere else
    (the leaderboard, plots, the CLI, another family) leaves its cached scores valid."""
    cls = comparisons()[name] if name in comparisons() else family(name)
    with _LOCK:
        return _digest_files(tuple(sorted(_code_files(cls.__module__))))


@cache
def _digest_files(files: tuple[Path, ...]) -> str:
    h = hashlib.sha256()
    for p in files:
        try:
            rel = p.relative_to(ROOT).as_posix()
        except ValueError:
            rel = p.name
        h.update(rel.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


@cache
def _code_files(module: str) -> frozenset[Path]:
    files: set[Path] = set()
    todo = [module]
    seen: set[str] = set()
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        path = _source(mod)
        if path is None:
            continue
        files.add(path)
        text = path.read_text(encoding="utf-8")
        for role in _PROMPT_ROLE.findall(text):
            prompt = ROOT / "prompts" / f"{role}.md"
            if prompt.is_file():
                files.add(prompt)
        if path.with_suffix(".toml").is_file():  # data beside its module (schemas/rubric.toml)
            files.add(path.with_suffix(".toml"))
        todo.extend(_imports(text, mod))
    return frozenset(files)


def _source(module: str) -> Path | None:
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if found is None or not found.origin or not found.origin.endswith(".py"):
        return None
    return Path(found.origin).resolve()


def _imports(text: str, module: str) -> list[str]:
    out: list[str] = []
    package = module.rpartition(".")[0]
    for node in ast.walk(ast_guard.parse(text)):  # not beside another thread's parse (tasks/ast_guard.py)
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names if a.name.split(".")[0] in ("tasks", "schemas"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            if base.split(".")[0] not in ("tasks", "schemas"):
                continue
            out.append(base)
            out.extend(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return out
