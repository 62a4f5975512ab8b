"""What `frame` shows on an 80-column terminal (issue 18): every command's --help read whole (no `<bool>`,
no `{path}`, no `[...]` swallowed, repeated options said to repeat), the documented bad inputs in one line
with exit 2, tables that never cut a number, `frame status` per domain / --all / --failed, log lines
printed above the progress bar, and a CLI start that loads none of the heavy libraries (issue 17)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.conftest import ROOT
from tests.test_score_openai_flow import write_release

FRAME = str(Path(sys.executable).with_name("frame"))
BOX = "│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┃└┘┌┐├┤┬┴┼"


def _commands(cmd, path):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():  # a group
        yield from _commands(sub, [*path, name])


def _flat(text: str) -> str:
    """Rendered text as one line: box drawing gone, whitespace collapsed (wrapped lines join)."""
    return " ".join(text.translate({ord(c): " " for c in BOX}).split())


def _as_written(help_text: str) -> str:
    return " ".join(help_text.replace("\\[", "[").split())


def test_every_help_reads_whole_at_80_columns():
    from flows.cli import app

    runner = CliRunner()
    root = typer.main.get_command(app)
    checked = repeated = flags = 0
    for path, cmd in _commands(root, []):
        res = runner.invoke(app, [*path, "--help"], prog_name="frame", env={"COLUMNS": "80", "TERM": "dumb"})
        where = f"frame {' '.join(path)} --help"
        assert res.exit_code == 0, (where, res.output)
        out = res.output
        assert max(len(line) for line in out.splitlines()) <= 80, where
        assert "<bool>" not in out and "<list[" not in out, (where, out)
        assert "…" not in out, (where, out)  # nothing cut to fit
        usage = next(line for line in out.splitlines() if "Usage:" in line)
        assert not re.search(r"\{\w+\}", usage), (where, usage)
        shown = _flat(out)
        shown_params = [p for p in cmd.params if not getattr(p, "hidden", False)]  # hidden: not in --help
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in shown_params]
        texts += [(sub.help or "").split("\n\n")[0] for sub in getattr(cmd, "commands", {}).values()]
        for t in filter(None, texts):
            assert _as_written(t) in shown, f"{where} does not show {t!r} whole:\n{out}"
            checked += 1
        for p in shown_params:
            if getattr(p, "multiple", False):
                assert f"{_as_written(p.help)} (repeat for several)" in shown, where
                repeated += 1
            if getattr(p, "is_flag", False):
                row = next(x for x in out.splitlines() if re.match(rf"│\s*\*?\s*{p.opts[0]}\s", x))
                assert "<" not in row.split(p.opts[0], 1)[1][:20], (where, row)  # no value placeholder
                flags += 1
    assert checked > 100 and repeated >= 3 and flags >= 10
    # the bracketed config sections are text, not markup
    score = _flat(runner.invoke(app, ["score", "--help"], env={"COLUMNS": "80"}).output)
    for name in ("[llm]", "[systems.NAME]", "[score]", "[judge]"):
        assert name in score
    usage = runner.invoke(app, ["release", "diff", "--help"], prog_name="frame", env={"COLUMNS": "80"}).output
    assert "Usage: frame release diff [OPTIONS] A B" in usage


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FRAME_"))}
    return env | {"PREFECT_HOME": str(tmp / "ph"), "HF_HUB_OFFLINE": "1", "COLUMNS": "80"}


def frame(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([FRAME, *args], capture_output=True, text=True, env=_env(tmp), cwd=tmp, timeout=300)


def error_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:], res.stdout[-500:])
    err = res.stderr.strip()
    assert "\n" not in err and "Traceback" not in res.stdout + res.stderr, err
    return err


def test_the_documented_bad_inputs_give_one_line_and_exit_2(tmp_path):
    release = write_release(tmp_path)
    assert error_line(frame(["score", "--release", str(release), "--systems", "gold,gpt4"], tmp_path)) == (
        "frame: error: --systems: unknown system 'gpt4' (one of copy-sample, extractive, gold, one-shot)"
    )
    near = error_line(frame(["score", "--release", str(release), "--systems", "gold,extractiv"], tmp_path))
    assert "unknown system 'extractiv' (did you mean 'extractive'?" in near
    # `frame generate` names the flag it has, and not gold (it has nothing to generate)
    assert error_line(frame(["generate", "--release", str(release), "--system", "gpt4"], tmp_path)) == (
        "frame: error: --system: unknown system 'gpt4' (one of copy-sample, extractive, one-shot)"
    )

    good = (ROOT / "configs" / "demo.toml").read_text(encoding="utf-8")
    assert good.count('category = "financial_quarterly"') >= 1
    typo = tmp_path / "typo.toml"
    typo.write_text(good.replace('category = "financial_quarterly"', 'categroy = "financial_quarterly"', 1))
    err = error_line(
        frame(["build", "--config", str(typo), "--release", "r", "--version", "1.0.0"], tmp_path)
    )
    assert re.fullmatch(
        rf"frame: error: {re.escape(str(typo))}: field domains\[\d+\]: unknown key 'categroy' "
        r"\(did you mean 'category'\?\) \(\+1 more\)",
        err,
    ), err

    plain = tmp_path / "not-a-release"
    plain.mkdir()
    (plain / "notes.txt").write_text("x")
    assert error_line(frame(["release", "verify", str(plain)], tmp_path)) == (
        f"frame: error: {plain}: not a frame release folder (no manifest.json, no release tables)"
    )
    assert error_line(frame(["release", "verify", str(tmp_path / "absent")], tmp_path)) == (
        f"frame: error: {tmp_path / 'absent'}: no such folder"
    )
    # a damaged release is a failed check (exit 1), not bad input
    (release / "manifest.json").unlink(missing_ok=True)
    assert frame(["release", "verify", str(release)], tmp_path).returncode == 1


def test_tables_never_cut_a_number():
    from rich.console import Console

    from flows.terminal import fit_tables

    cols = ["category", "instances", "g_files", "g_tokens", "g_tables", "g_images", "s_tokens"]
    cols += ["s_sections", "s_tables", "y_tokens", "y_sections", "y_tables"]
    rows = [
        ["financial_quarterly", 12, 3.5, 172345.25, 12.0, 0.0, 1234.5, 7.25, 3.0, 98765.5, 9.0, 2.5],
        ["academic_complex", 6, 14.0, 1234567.0, 41.5, 3.25, 88888.0, 12.5, 4.0, 123456.0, 10.0, 1.75],
    ]
    for width in (60, 80, 200):
        console = Console(width=width, record=True)
        tables = fit_tables("stats", [(c, c != "category") for c in cols], rows, width)
        for t in tables:
            console.print(t)
        out = console.export_text()
        assert max(len(line) for line in out.splitlines()) <= width and "…" not in out
        cells = re.split(rf"[\s{BOX}]+", out)  # every value and header is one word
        for row in rows:
            for v in row[1:]:
                assert str(v) in cells, (width, v, out)
        for c in cols[1:]:
            assert c in cells, (width, c)
        assert (len(tables) == 1) == (width == 200)
    # text folds (never an ellipsis) and stays text: "[run]" is not markup
    console = Console(width=40, record=True)
    (t,) = fit_tables(
        None, [("domain", False), ("error", False), ("n", True)], [("d", "no key [run] here", 123456789)], 40
    )
    console.print(t)
    out = console.export_text()
    assert "[run]" in out and "123456789" in out


def _run_record(data: Path) -> dict:
    """A run record written by flows.observe from step lines: two domains, one failed step."""
    from flows.observe import active_dir, finish_run, start_run

    start_run(data)
    lines = []
    for domain, snaps in (
        ("gravitational-wave-astrophysics", ["W1", "W2", "W3"]),
        ("AAPL-10-Q", ["2025-03-29"]),
    ):
        for snap in snaps:
            for step in ("fetch", "convert", "fill"):
                status = "cached" if snap != "W3" else "ran"
                error = ""
                if domain == "AAPL-10-Q" and step == "fill":
                    status, error = "failed", "field [llm] model: no reply (HTTP 503)"
                lines.append(
                    {"domain": domain, "snapshot": snap, "step": step, "status": status, "wall_s": 1.25}
                    | {"runs": 1, "llm_calls": 3, "llm_cache_hits": 1, "prompt_tokens": 123456}
                    | {"completion_tokens": 7890, "error": error}
                )
    for domain in ("gravitational-wave-astrophysics", "AAPL-10-Q"):
        with (active_dir(data) / f"steps-{domain}.jsonl").open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in lines if r["domain"] == domain)
    from tasks.synthesize.outcome import DomainOutcome

    results = [
        DomainOutcome("gravitational-wave-astrophysics", "academic_complex", "arxiv"),
        DomainOutcome(
            "AAPL-10-Q",
            "financial_quarterly",
            "edgar",
            "failed",
            error="fill 2025-03-29: no reply [HTTP 503]",
        ),
    ]
    from schemas.config import ModelPrice

    prices = {"m": ModelPrice(input_per_mtok=2.5, output_per_mtok=10.0)}
    return finish_run(data, results, kind="build", model="m", backend="openai", prices=prices, wall_s=9.5)


def test_status_per_domain_all_steps_and_failures(tmp_path):
    run = _run_record(tmp_path / "data")
    assert run["totals"]["steps_failed"] == 1

    default = frame(["status", "--data", "data"], tmp_path)
    assert default.returncode == 0, default.stderr
    out = default.stdout
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    gw = next(line for line in out.splitlines() if "gravita" in line)  # the row's first line
    assert re.search(r"│\s+3 │\s+3 │\s+6 │\s+0 │", gw), gw  # snapshots, steps computed, cached, failed
    # the snapshot this build computed, beside those the cache served
    assert "computed gravitational-wave-astrophysics: W3 (the other 2 from the cache)" in " ".join(
        out.split()
    )
    assert "1,182,114" in out and "$3.4879" in out  # tokens and cost of its 9 steps, never cut
    assert "last error AAPL-10-Q: fill 2025-03-29: no reply [HTTP 503]" in " ".join(out.split())
    assert "fetch" not in out  # no step rows

    every = frame(["status", "--data", "data", "--all"], tmp_path).stdout
    fetches = sum(" fetch " in line for line in every.splitlines())
    assert fetches and fetches % 4 == 0  # one row per step (in each table when split to fit)
    assert "131,346" in every and "$0.3875" in every and max(len(line) for line in every.splitlines()) <= 80

    failed = frame(["status", "--data", "data", "--failed"], tmp_path).stdout
    assert " fill " in failed and " fetch " not in failed and " convert " not in failed
    assert "field [llm] model: no reply (HTTP 503)" in " ".join(failed.split())

    both = frame(["status", "--data", "data", "--all", "--failed"], tmp_path)
    assert error_line(both) == "frame: error: --all/--failed: give one of them"
    as_json = json.loads(frame(["status", "--data", "data", "--json"], tmp_path).stdout)
    assert as_json["run_id"] == run["run_id"] and len(as_json["steps"]) == 12


BAR_SCRIPT = textwrap.dedent(
    """
    import logging, sys, time
    from prefect.logging.handlers import PrefectConsoleHandler

    handler = PrefectConsoleHandler(stream=sys.stdout)  # as flows.settings.route_prefect_console leaves it
    handler.setFormatter(logging.Formatter("%(asctime)s | %(levelname)s | %(message)s"))
    logging.getLogger().handlers = [handler]
    logging.getLogger().setLevel(logging.INFO)
    import flows.cli as cli

    done = {"n": 0}

    def work():
        for i in range(4):
            time.sleep(0.6)
            logging.getLogger("prefect.flow_runs").info("LOGLINE %d [run]", i)
            done["n"] += 1
        return "finished"

    print(cli._run_with_bar("build", "snapshots", work, lambda: (done["n"], 4)))
    """
)


def test_log_lines_print_above_the_bar_on_a_terminal(tmp_path):
    """On a terminal (a pty) the bar is live while Prefect logs: each log line starts a line of its own
    (the bar erased first, then redrawn below), never glued to the end of the bar."""
    script = tmp_path / "bar.py"
    script.write_text(BAR_SCRIPT)
    main, child = pty.openpty()
    env = _env(tmp_path) | {
        "TERM": "xterm",
        "PYTHONPATH": str(ROOT),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    proc = subprocess.Popen([sys.executable, str(script)], stdout=child, stderr=child, env=env, cwd=ROOT)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=120) == 0
    os.close(main)
    raw = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode("utf-8", "replace"))  # colours off
    assert "snapshots" in raw and "finished" in raw  # the bar was drawn
    for i in range(4):
        at = raw.index(f"LOGLINE {i} [run]")
        line = raw[raw.rfind("\n", 0, at) + 1 : at]
        visible = line.split("\r")[-1]  # what a carriage return left on the line before the log text
        assert "snapshots" not in visible and "━" not in visible, repr(line)


def test_the_cli_starts_without_heavy_libraries():
    heavy = ("pandas", "pyarrow", "numpy", "torch", "prefect", "rich")  # rich: only where something is drawn
    code = f"import sys, flows.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_frame_ground_ends_without_teardown_but_with_its_output_and_exit_hooks(tmp_path):
    # A successful `frame ground` skips the interpreter's object-by-object teardown (~0.1 s of a 0.7 s
    # run): its summary line still reaches a pipe, atexit hooks still run, the folder is complete;
    # a failing run keeps the normal exit (code 2, its one line).
    from tests.conftest import CORPUS

    filing = next(iter(sorted((CORPUS / "edgar").glob("*/10-Q/*.htm"))), None)
    if filing is None:
        pytest.skip("no EDGAR filing in the corpus")
    code = textwrap.dedent(
        """
        import atexit, sys
        atexit.register(lambda: print("exit hook ran", file=sys.stderr))

        class Teardown:
            def __del__(self):
                print("teardown ran", file=sys.stderr)

        kept = Teardown()  # freed by the interpreter's teardown only
        from flows.cli import main
        sys.argv = ["frame", "ground", *sys.argv[1:]]
        main()
        """
    )
    out = tmp_path / "grounding"
    run = subprocess.run(
        [sys.executable, "-c", code, str(filing), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{out}: ") and "documents" in run.stdout
    assert "exit hook ran" in run.stderr and "teardown ran" not in run.stderr, run.stderr
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest and (out / "documents.json").is_file() and (out / "facts.parquet").is_file()

    bad = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "missing.htm"), "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert bad.returncode == 2 and "teardown ran" in bad.stderr and "no such file" in bad.stderr
