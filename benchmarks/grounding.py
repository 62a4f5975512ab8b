"""Grounding speed/memory benchmark: `frame ground` vs plain HTML->Markdown converters.

For every primary filing in the EDGAR corpus MANIFEST.csv, each tool runs in a fresh subprocess; wall time is
measured around the child and peak RSS comes from os.wait4's per-child rusage (exact, not cumulative).

    .venv/bin/python benchmarks/grounding.py [--filings N] [--runs R] [--edgartools-runs R] [--json PATH]

Corpus: $FRAME_CORPUS, else ../shared/corpus beside the repo. Exit status is 0 even when the target fails.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

TARGET_BYTES = 2_500_000  # "a 2.5 MB 10-K ..."
TARGET_SECONDS = 3.0  # "... in <= 3 s ..."
TARGET_RSS_MB = 500.0  # "... and <= 500 MB RSS"
TIMEOUT_S = 300.0

# Make any accidental HTTP(S) call fail fast (nothing listens on port 9): every tool must work offline.
OFFLINE_ENV = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "",
    "no_proxy": "",
    "HF_HUB_OFFLINE": "1",
}

# Baseline children: read the file, convert, write the Markdown (frame writes its output too).
MARKDOWNIFY_SRC = """\
import sys
from markdownify import markdownify
html = open(sys.argv[1], encoding="utf-8", errors="replace").read()
open(sys.argv[2], "w", encoding="utf-8").write(markdownify(html))
"""
HTML2TEXT_SRC = """\
import sys
import html2text
html = open(sys.argv[1], encoding="utf-8", errors="replace").read()
open(sys.argv[2], "w", encoding="utf-8").write(html2text.HTML2Text().handle(html))
"""
# edgartools' offline document parser (edgar.documents); the form enables its 10-K/10-Q section detection,
# which is the closest match to what frame does. len(sections) forces the (lazy) detection.
EDGARTOOLS_SRC = """\
import sys
from edgar.documents import ParserConfig, parse_html
html = open(sys.argv[1], encoding="utf-8", errors="replace").read()
doc = parse_html(html, ParserConfig(form=sys.argv[3]))
n_sections = len(doc.sections)
open(sys.argv[2], "w", encoding="utf-8").write(doc.to_markdown())
print(n_sections)
"""


@dataclass
class Filing:
    path: Path
    rel: str
    form: str
    bytes: int


@dataclass
class Measure:
    runs_s: list[float] = field(default_factory=list)
    runs_rss_mb: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def seconds(self) -> float | None:
        return min(self.runs_s) if self.runs_s and self.error is None else None

    @property
    def rss_mb(self) -> float | None:
        return max(self.runs_rss_mb) if self.runs_rss_mb and self.error is None else None


@dataclass
class Tool:
    name: str
    version: str
    argv: Callable[[Filing, Path], list[str]]  # (filing, output dir) -> child argv
    env: dict[str, str] = field(default_factory=dict)
    skipped: str | None = None
    runs: int = 2  # timed runs per filing


def corpus_dir() -> Path:
    env = os.environ.get("FRAME_CORPUS")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "shared" / "corpus"


def load_filings(limit: int | None) -> list[Filing]:
    edgar = corpus_dir() / "edgar"
    manifest = edgar / "MANIFEST.csv"
    if not manifest.is_file():
        sys.exit(f"benchmark: no corpus manifest at {manifest} (set FRAME_CORPUS)")
    with manifest.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if not r["form"].startswith("meta:")]
    filings = [
        Filing(edgar / r["path"], r["path"], r["form"], (edgar / r["path"]).stat().st_size) for r in rows
    ]
    return filings[:limit] if limit is not None else filings


def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def run_child(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float, int]:
    """Run argv; return (wall seconds, peak RSS MiB of that child, exit code). stdout+stderr go to log."""
    with log.open("wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=env)
        deadline = t0 + TIMEOUT_S
        while True:  # os.wait4 gives this child's own rusage; poll (WNOHANG) so a hung child can be killed
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.005)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode  # ru_maxrss is KiB on Linux


def tail(log: Path, n: int = 200) -> str:
    text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return (text[-1] if text else "no output")[-n:]


def build_tools(work: Path, runs: int, edgartools_runs: int) -> list[Tool]:
    py = sys.executable
    frame_bin = Path(py).with_name("frame")
    base_env = {**os.environ, **OFFLINE_ENV}
    tools = [
        Tool(
            "frame",
            version_of("frame-bench"),
            lambda f, out: [
                str(frame_bin),
                "ground",
                str(f.path),
                "--out",
                str(out / "grounding"),
                "--kind",
                "edgar",
            ],
            base_env,
        ),
        Tool(
            "markdownify",
            version_of("markdownify"),
            lambda f, out: [py, "-c", MARKDOWNIFY_SRC, str(f.path), str(out / "out.md")],
            base_env,
        ),
        Tool(
            "html2text",
            version_of("html2text"),
            lambda f, out: [py, "-c", HTML2TEXT_SRC, str(f.path), str(out / "out.md")],
            base_env,
        ),
    ]
    if not frame_bin.exists():
        tools[0].skipped = f"no {frame_bin}"
    for tool in tools:
        tool.runs = runs
    for tool in tools[1:]:
        if importlib.util.find_spec(tool.name) is None:
            tool.skipped = "not installed"
    # edgartools writes ~/.edgar and an anchor cache under $HOME: give it a throw-away home (reset per run,
    # see measure()) so no run profits from a cache left by another.
    edgar_home = work / "edgartools-home"
    edgar_env = {
        **base_env,
        "HOME": str(edgar_home),
        "EDGAR_LOCAL_DATA_DIR": str(edgar_home / ".edgar"),
        "EDGAR_IDENTITY": "frame-bench offline bench@example.invalid",
    }
    edgar = Tool(
        "edgartools",
        version_of("edgartools"),
        lambda f, out: [py, "-c", EDGARTOOLS_SRC, str(f.path), str(out / "out.md"), f.form],
        edgar_env,
    )
    if importlib.util.find_spec("edgar") is None or edgar.version == "?":
        edgar.skipped = "not installed (pip install edgartools to include it)"
    edgar.runs = edgartools_runs
    tools.append(edgar)
    return tools


def measure(tool: Tool, filing: Filing, work: Path, m: Measure | None) -> Measure:
    m = m or Measure()
    if m.error:
        return m
    out = Path(tempfile.mkdtemp(prefix=f"{tool.name}-", dir=work))
    home = tool.env.get("HOME")
    if tool.name == "edgartools" and home:
        shutil.rmtree(home, ignore_errors=True)
        Path(home).mkdir(parents=True)
    log = out / "child.log"
    wall, rss, rc = run_child(tool.argv(filing, out), tool.env, log)
    if rc != 0:
        m.error = f"exit {rc}: {tail(log)}"
    else:
        m.runs_s.append(wall)
        m.runs_rss_mb.append(rss)
    shutil.rmtree(out, ignore_errors=True)
    return m


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "[red]ERR[/]" if x is None else format(x, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filings", type=int, default=None, help="only the first N filings of the manifest")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per tool and filing (best is reported)")
    ap.add_argument(
        "--edgartools-runs",
        type=int,
        default=1,
        help="timed runs for edgartools, the slowest tool (1 keeps `make bench` under ~4 min)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON to PATH")
    args = ap.parse_args()
    if args.runs < 1 or args.edgartools_runs < 1:
        ap.error("--runs and --edgartools-runs must be >= 1")

    console = Console()
    if not console.is_terminal:  # piped (e.g. make bench | tee): don't squeeze the table into 80 columns
        console = Console(width=max(console.width, 180))
    filings = load_filings(args.filings)
    if not filings:
        sys.exit("benchmark: no filings selected")
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="frame-bench-"))
    try:
        tools = build_tools(work, args.runs, args.edgartools_runs)
        active = [t for t in tools if not t.skipped]
        results: dict[str, dict[str, Measure]] = {f.rel: {} for f in filings}
        warmups = len(active)
        total = warmups + len(filings) * sum(t.runs for t in active)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as progress:
            bar = progress.add_task("warm-up", total=total)
            # One warm-up run per tool (imports, .pyc, page cache) on the first filing; not counted. A tool
            # whose warm-up fails (e.g. needs the network) is skipped with the reason.
            for tool in active:
                progress.update(bar, description=f"warm-up {tool.name}")
                probe = measure(tool, filings[0], work, None)
                if probe.error:
                    tool.skipped = f"warm-up failed: {probe.error}"
                progress.advance(bar)
            active = [t for t in active if not t.skipped]
            progress.update(bar, total=warmups + len(filings) * sum(t.runs for t in active))
            for filing in filings:
                for i in range(max(t.runs for t in active)):  # interleave tools so drift hits all alike
                    for tool in (t for t in active if i < t.runs):
                        progress.update(bar, description=f"{filing.rel} {tool.name}")
                        done = results[filing.rel]
                        done[tool.name] = measure(tool, filing, work, done.get(tool.name))
                        progress.advance(bar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started

    names = [t.name for t in active]
    versions = {t.name: t.version for t in tools}
    for tool in tools:
        if tool.skipped:
            console.print(f"{tool.name}: skipped ({tool.skipped})")
    baselines = [n for n in names if n != "frame"]
    base_str = " / ".join(f"{n} {versions[n]}" for n in baselines) or "none"
    title = (
        f"frame ground (frame-bench {versions['frame']}) vs baseline: {base_str}\n"
        f"time = best (min) wall s of {args.runs} run(s)"
        + "".join(f" ({t.name}: {t.runs})" for t in active if t.runs != args.runs)
        + " per filing after 1 warm-up run per tool; MB = peak RSS in MiB (max over those runs, os.wait4)\n"
        f"{os.cpu_count()} CPU(s), Python {platform.python_version()}; size MB = 1e6 B; "
        f"frame/X = frame time / X time (<1: frame faster)"
    )
    console.print(title)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("file", no_wrap=True)
    table.add_column("size\nMB", justify="right")
    for n in names:
        table.add_column(f"{n}\ns", justify="right")
        table.add_column("\nMB", justify="right")
    for n in baselines:
        table.add_column(f"frame/\n{n}", justify="right")

    rows = []
    sums = {n: 0.0 for n in names}
    complete = {n: True for n in names}
    for f in filings:
        res = results[f.rel]
        cells = [f.rel, f"{f.bytes / 1e6:.2f}"]
        for n in names:
            m = res.get(n, Measure(error="not run"))
            cells += [fmt(m.seconds), fmt(m.rss_mb, ".0f")]
            if m.seconds is None:
                complete[n] = False
            else:
                sums[n] += m.seconds
        frame_s = res["frame"].seconds if "frame" in res else None
        for n in baselines:
            r = ratio(frame_s, res[n].seconds)
            cells.append(f"{r:.2f}x" if r is not None else "-")
        table.add_row(*cells)
        rows.append(
            {
                "file": f.rel,
                "form": f.form,
                "bytes": f.bytes,
                **{
                    n: asdict(res[n]) | {"seconds": res[n].seconds, "rss_mb": res[n].rss_mb}
                    for n in names
                    if n in res
                },
            }
        )
    table.add_section()
    tot = ["TOTAL", f"{sum(f.bytes for f in filings) / 1e6:.2f}"]
    for n in names:
        peak = max((results[f.rel][n].rss_mb or 0.0 for f in filings), default=0.0)
        tot += [f"{sums[n]:.2f}" + ("" if complete[n] else "*"), f"max {peak:.0f}"]
    for n in baselines:
        tot.append(f"{sums['frame'] / sums[n]:.2f}x" if "frame" in names and sums[n] else "-")
    table.add_row(*tot, style="bold")
    console.print(table)
    if not all(complete.values()):
        console.print("* some runs failed; their time is left out of the total:")
        for f in filings:
            for n, m in results[f.rel].items():
                if m.error:
                    console.print(f"  {f.rel} {n}: {m.error}")

    # Target check on the largest 10-K of the corpus.
    tenks = [f for f in filings if f.form == "10-K"]
    target = None
    if tenks and "frame" in names:
        big = max(tenks, key=lambda f: f.bytes)
        m = results[big.rel]["frame"]
        ok = m.seconds is not None and m.seconds <= TARGET_SECONDS and (m.rss_mb or 0) <= TARGET_RSS_MB
        verdict = "[bold green]PASS[/]" if ok else "[bold red]FAIL[/]"
        console.print(
            f"target: a {TARGET_BYTES / 1e6:.1f} MB 10-K in <= {TARGET_SECONDS:.0f} s and "
            f"<= {TARGET_RSS_MB:.0f} MB RSS on this {os.cpu_count()}-core machine\n"
            f"largest 10-K {big.rel} ({big.bytes / 1e6:.2f} MB): "
            f"frame {fmt(m.seconds)} s, {fmt(m.rss_mb, '.0f')} MB -> {verdict}"
        )
        target = {
            "file": big.rel,
            "bytes": big.bytes,
            "seconds": m.seconds,
            "rss_mb": m.rss_mb,
            "max_seconds": TARGET_SECONDS,
            "max_rss_mb": TARGET_RSS_MB,
            "pass": ok,
        }
    else:
        console.print("target: no 10-K measured with frame -- not checked")
    console.print(f"benchmark took {elapsed:.0f} s for {len(filings)} filing(s)")

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "policy": {
                "runs": {t.name: t.runs for t in active},
                "warmup_runs_per_tool": 1,
                "time": "min",
                "rss": "max over runs",
            },
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "versions": versions,
            "skipped": {t.name: t.skipped for t in tools if t.skipped},
            "filings": rows,
            "totals": {n: {"seconds": sums[n], "complete": complete[n]} for n in names},
            "target": target,
            "elapsed_s": elapsed,
            "corpus": str(corpus_dir()),
        }
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
