"""The shape of the scoring code is a contract (issue 13): small functions in flows/ and tasks/score/, a
thin score flow that names no metric family, and Markdown headings recognised in one place only."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80


def _functions(folder: str):
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield path.relative_to(ROOT), node


MAX_MODULE_DOCSTRING_LINES = 12


def test_module_docstrings_are_short():
    """A module docstring says what the module is for; its specification lives in docs/."""
    long = []
    for folder in ("tasks/score", "tasks/markdown", "flows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
            n = len(doc.splitlines()) if doc else 0
            if n > MAX_MODULE_DOCSTRING_LINES:
                long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, "move the specification to docs/, shorten these docstrings:\n" + "\n".join(long)


def test_score_flow_is_thin_and_names_no_family():
    from tasks.score import registry

    source = (ROOT / "flows" / "score.py").read_text(encoding="utf-8")
    assert len(source.splitlines()) < 350
    names = set(registry.families()) | set(registry.comparisons()) | set(registry.specs())
    tree = ast.parse(source)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    literals = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }
    assert not literals & names, f"flows/score.py names families/metrics: {sorted(literals & names)}"


# A heading regex: `#{1,6}`, `#+` followed by a space class, or a line tested with startswith("#").
_HEADING_SYNTAX = re.compile(r"""#\{1,6\}|#\+\\s|#\+ |startswith\(\s*["']#""")


def test_markdown_headings_are_parsed_in_one_place():
    offenders = []
    for folder in ("tasks", "flows", "schemas"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("tasks", "markdown"):
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _HEADING_SYNTAX.search(line):
                    offenders.append(f"{rel}:{i}: {line.strip()[:90]}")
    assert not offenders, "use tasks.markdown instead of a heading regex:\n" + "\n".join(offenders)


def _imports() -> dict[str, set[str]]:
    """Every module of flows/, tasks/ and schemas/ -> the modules of those packages it imports anywhere
    (at the top or inside a function: a deferred import still ties the two modules together)."""
    modules = {}
    for pkg in ("flows", "tasks", "schemas"):
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            graph[name] |= {m for m in found if m in modules and m != name}
    return graph


def test_no_module_import_cycle():
    """Issue 33: the cycles flows.cli <-> flows.meta, flows.server <-> flows.settings and
    tasks.generate.systems <-> tasks.generate.command are gone, and no new one may come."""
    import graphlib

    graph = _imports()
    assert {"flows.meta", "flows.configs", "tasks.errors"} <= graph["flows.cli"]  # the scan sees imports
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_every_module_is_in_the_layers_contract():
    """import-linter checks only the modules its layers name: a new top-level module of tasks/ left out
    of them could import anything (issue 33, point 4)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = {m.strip() for layer in layers for m in layer.split("|")}
    tops = {
        f"tasks.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "tasks").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert {"tasks.score", "tasks.errors"} <= tops  # the scan sees the package
    assert not tops - named, f"add to a layer of pyproject.toml: {sorted(tops - named)}"
    assert {"flows", "schemas"} <= named
    forbidden = [c for c in config["contracts"] if c["type"] == "forbidden"]
    assert any({"tasks", "schemas"} <= set(c["source_modules"]) and "prefect" in c["forbidden_modules"]
               for c in forbidden)  # fmt: skip


def test_no_function_over_80_lines_anywhere():
    found = {
        f"{path.as_posix()}:{fn.name}": fn.end_lineno - fn.lineno + 1
        for folder in ("flows", "tasks", "schemas")
        for path, fn in _functions(folder)
        if fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES
    }
    assert found == {}, f"split these functions (at most {MAX_FUNCTION_LINES} lines): {found}"


MAX_MODULE_LINES = 800


def test_no_module_over_800_lines():
    found = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("flows", "tasks", "schemas")
        for path in sorted((ROOT / folder).rglob("*.py"))
    }
    assert len(found) > 100  # the scan sees the packages
    large = {k: n for k, n in found.items() if n > MAX_MODULE_LINES}
    assert large == {}, f"split these modules (at most {MAX_MODULE_LINES} lines): {large}"


def test_every_builtin_metric_family_lives_in_a_folder_of_its_own():
    """A family's checks, judges and family class sit together in one package of tasks/score/ (as ragas
    keeps one metric per folder); its prompt files stay in prompts/, named by its judges' ROLES."""
    from tasks.score import registry

    folders: dict[str, list[str]] = {}
    for name, cls in {**registry.families(), **registry.comparisons()}.items():
        folder = Path(inspect.getfile(cls)).resolve().parent
        assert folder.parent == ROOT / "tasks" / "score", f"{name}: {inspect.getfile(cls)} is not in a folder"
        assert (folder / "__init__.py").is_file()
        folders.setdefault(folder.name, []).append(name)
    # one family per folder; the two table/text fidelity families of paper 002 share theirs
    assert {k: v for k, v in folders.items() if len(v) > 1} == {"fidelity": ["tables", "text_edit_distance"]}
