"""`frame view` without a browser: a scoring run built here by hand (a release, a hostile system's
reports, scores, evidence of several families, a leaderboard) rendered through the CLI; the pages' markup
checked with an HTML parser; each family's evidence renderer on items whose verdicts are known."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.view.evidence import headings_alignment, metric_evidence
from tasks.view.page import markdown_html

ROOT = Path(__file__).resolve().parents[1]
IID = "financial_quarterly/ACME-10-Q/2025-03-31->2025-06-30"
EVIL = "evil<b>"  # a system name with markup in it
HOSTILE = """# Report <script>document.title='pwned'</script>

<img src=x onerror="document.title='pwned'">

Revenue rose to $12 million, see [the filing](javascript:alert(1)) and ![chart](https://example.org/c.png).

<iframe src="https://example.org"></iframe>
"""
GOLD_Y = (
    "# ACME 10-Q\n\n## Revenue\n\nRevenue was $12 million.\n\n## Risk Factors\n\nCompetition is intense.\n"
)
SAMPLE_S = "# ACME 10-Q\n\n## Revenue\n\nRevenue was $10 million.\n"


def _parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


def write_run(data: Path) -> Path:
    """A data folder holding release t/1.0 (two instances, one scored), system EVIL's report (HOSTILE)
    and a scoring run of gold and EVIL; returns the run's folder."""
    inst = {"instance_id": IID, "category": "financial_quarterly", "domain": "ACME-10-Q"}
    _parquet(
        data / "releases/t/1.0/instances.parquet",
        [{**inst, "sample_markdown": SAMPLE_S, "target_markdown": GOLD_Y}]
        + [{**inst, "instance_id": "unscored/x/1->2", "sample_markdown": "S", "target_markdown": "Y"}],
    )
    gens = [{"instance_id": IID, "system": EVIL, "markdown": HOSTILE, "metadata_json": "{}", "error": None}]
    _parquet(data / "generations/t/1.0" / EVIL / "generations.parquet", gens)
    run = data / "scores/t/1.0"
    det = json.dumps({"threshold": 0.75, "sampled": 2})
    scores = [
        {**inst, "system": s, "metric": m, "value": v, "judge": "offline", "detail_json": det}
        for s, m, v in [("gold", "coverage", 1.0), ("gold", "faithfulness", 1.0), (EVIL, "coverage", 0.5)]
        + [(EVIL, "faithfulness", 0.3), (EVIL, "structure", 0.4)]
    ]
    _parquet(run / "scores.parquet", scores)
    ev = [
        (EVIL, "coverage", 0, "statistic", "Revenue was $12 million.", 0.9, "Revenue rose to $12 million"),
        (EVIL, "coverage", 1, "entity", "Competition is <script>intense</script>.", 0.1, ""),
        (EVIL, "faithfulness", 0, "claim", "Revenue rose to $12 million", 0.6, "Revenue was $12 million."),
    ]
    cols = ("system", "metric", "index", "kind", "text", "score", "evidence")
    rows = [
        {"instance_id": IID, **dict(zip(cols, e, strict=True)), "evidence_ref": "", "rationale": ""}
        for e in ev
    ]
    _parquet(run / "evidence.parquet", rows)
    lb = [
        {"system": s, "scope": "overall", "metric": "coverage", "n": 1, "mean": v}
        for s, v in (("gold", 1), (EVIL, 0.5))
    ]
    pd.DataFrame(lb).to_csv(run / "leaderboard.csv", index=False)
    digest = hashlib.sha256(json.dumps({IID: HOSTILE}, sort_keys=True).encode()).hexdigest()
    manifest = {"release": "t/1.0", "systems": ["gold", EVIL], "generations_sha256": {EVIL: digest}}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return run


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text.append(data)


def _view(*args: str):
    return CliRunner().invoke(app, ["view", *args])


@pytest.fixture
def site(tmp_path) -> Path:
    run = write_run(tmp_path / "data")
    res = _view(str(run), "--out", str(tmp_path / "site"))
    assert res.exit_code == 0, res.output
    assert "warning" not in res.output  # the reports hash to what the run scored
    return tmp_path / "site"


def test_hostile_report_is_shown_as_text_and_never_runs(site):
    pages = sorted(site.rglob("*.html"))
    assert {p.parent.name for p in pages} == {"site", "systems", "instances", "diffs"}
    for p in pages:
        html = p.read_text(encoding="utf-8")
        tags = _Tags()
        tags.feed(html)
        assert [t for t, _ in tags.tags if t == "script"] == ["script"], p  # only the page's own sorter
        assert "pwned" not in "".join(tags.script_text)
        assert not {t for t, _ in tags.tags} & {"img", "iframe", "object", "embed", "link", "base"}, p
        for tag, attrs in tags.tags:
            assert not [a for a in attrs if a.startswith("on")], (p, tag, attrs)
            href = attrs.get("href") or ""
            assert not re.match(r"[a-z][a-z0-9+.-]*:|/", href, re.I), (p, href)
    inst = next((site / "instances").glob("*.html")).read_text(encoding="utf-8")
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in inst  # shown, escaped
    assert "&lt;iframe src=" in inst
    assert "[the filing](javascript:alert(1))" in inst  # markdown-it refuses the link: left as text
    assert "&lt;https://example.org/c.png&gt;" in inst
    assert "Competition is &lt;script&gt;intense&lt;/script&gt;." in inst  # evidence text escaped too
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "evil&lt;b&gt;" in index and "evil<b>" not in index


def test_each_page_links_to_existing_pages(site):
    assert (
        len(list((site / "instances").iterdir())) == 1
    )  # the release's instance the run did not score: none
    for p in site.rglob("*.html"):
        for href in re.findall(r'href="([^"]+)"', p.read_text(encoding="utf-8")):
            assert (p.parent / href).resolve().is_file(), (p, href)


def test_evidence_of_each_family():
    cov = pd.DataFrame(
        {"index": [0, 1], "kind": ["statistic", "entity"], "text": ["u0", "u1"], "score": [0.9, 0.2]}
        | {"evidence": ["m0", ""], "evidence_ref": ["", ""], "rationale": ["", ""], "source": ["", ""]}
    )
    html = metric_evidence("coverage", cov)
    bad, ok = html.split("<details>")
    assert "1 missed" in html and "u1" in bad and "u0" in ok and "m0" in ok
    claims = cov.assign(score=[0.6, 1.0], stage=[2, 1])
    # faithfulness' own threshold (the score's detail) decides, not the viewer's default 0.5
    assert "1 unsupported" in metric_evidence("faithfulness", claims, {"threshold": 0.75})
    assert "0 unsupported" in metric_evidence("faithfulness", claims)
    rubric = cov.assign(kind=["G1:numbers", "G2:order"], score=[1.0, 0.5])
    html = metric_evidence("rubric", rubric)
    assert "1 failed" in html and "G2:order" in html.split("<details>")[0]
    tables = cov.assign(
        kind=["table", "spurious_table"], evidence_ref=["generated table 0", "generated table 3"]
    )
    assert "1/1 gold table(s) matched; 1 table(s) of the report without" in metric_evidence("teds", tables)
    other = metric_evidence("plugin_metric", cov.assign(rationale=["r<0>", "r1"]))
    assert "<th>rationale</th>" in other and "r&lt;0&gt;" in other


def test_headings_alignment_pairs_sections():
    html, summary = headings_alignment("## Revenue\n\n## Risk Factors\n", "## Revenues\n\n## Outlook\n")
    assert summary == "1/2 gold heading(s) found in the report"
    assert "1/2 gold heading(s) found in the report; 1 heading(s) of the report not in gold" in html
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", html)
    assert rows == [
        ("## Revenue", "## Revenues"),
        ("## Risk Factors", '<span class="bad">(none)</span>'),
        ('<span class="muted">(none)</span>', "## Outlook"),
    ]


def test_markdown_keeps_no_raw_html():
    out = markdown_html('<b onclick="x()">hi</b>\n\n[a](https://e.org "t")')
    assert "<b" not in out and "href" not in out and "&lt;b onclick" in out


def test_bad_input_is_one_line(tmp_path):
    res = _view(str(tmp_path), "--out", str(tmp_path / "site"))
    assert res.exit_code == 2 and "scores.parquet" in res.output and "frame score" in res.output
    run = write_run(tmp_path / "data")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    res = _view(str(run), "--out", str(tmp_path / "mine"))
    assert res.exit_code == 2 and "not written by `frame view`" in res.output
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    m = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**m, "release": "t/9.9"}))
    res = _view(str(run), "--out", str(tmp_path / "site"))
    assert res.exit_code == 2 and "manifest.json" in res.output and "--release" in res.output
    res = _view(str(run), "--out", str(tmp_path / "site"), "--release", str(tmp_path / "data/releases/t/1.0"))
    assert res.exit_code == 0, res.output


def test_rewrite_replaces_the_site(site, tmp_path):
    stale = site / "systems" / "stale.html"
    stale.write_text("old")
    res = _view(str(tmp_path / "data/scores/t/1.0"), "--out", str(site))
    assert res.exit_code == 0, res.output
    assert not stale.exists() and (site / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site")] == []  # no temp folder left


def test_changed_reports_are_said(tmp_path):
    run = write_run(tmp_path / "data")
    gens = tmp_path / "data/generations/t/1.0" / EVIL / "generations.parquet"
    pd.read_parquet(gens).assign(markdown="# edited after scoring\n").to_parquet(gens, index=False)
    res = _view(str(run), "--out", str(tmp_path / "site"))
    assert res.exit_code == 0 and "reports changed since this scoring run" in res.output


def test_serve_on_localhost(tmp_path):
    run = write_run(tmp_path / "data")
    args = [sys.executable, "-m", "flows.cli", "view", str(run), "--out", str(tmp_path / "site")]
    proc = subprocess.Popen(
        # the bound is a backstop far past the test (a loaded CI took 8 s to get here): Ctrl-C stops it
        [*args, "--serve", "--serve-for", "120"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        url = re.search(r"http://127\.0\.0\.1:\d+/index\.html", lines[1]).group(0)
        with urllib.request.urlopen(url, timeout=10) as r:
            assert r.read() == (tmp_path / "site" / "index.html").read_bytes()
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=30) == 0
        assert "stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_system_without_reports_has_its_page(tmp_path):
    """A system every generation of which failed: in the leaderboard with no score, its page says why."""
    run = write_run(tmp_path / "data")
    gens = [
        {"instance_id": IID, "system": "down", "markdown": "", "metadata_json": "{}", "error": "HTTP 503"}
    ]
    _parquet(tmp_path / "data/generations/t/1.0/down/generations.parquet", gens)
    lb = pd.read_csv(run / "leaderboard.csv")
    lb = pd.concat([lb, pd.DataFrame([{"system": "down", "scope": "overall", "metric": "coverage", "n": 0}])])
    lb.to_csv(run / "leaderboard.csv", index=False)
    res = _view(str(run), "--out", str(tmp_path / "site"))
    assert res.exit_code == 0, res.output
    index = (tmp_path / "site/index.html").read_text(encoding="utf-8")
    assert ">down</a>" in index and "HTTP 503" in index
    page = next(p for p in (tmp_path / "site/systems").iterdir() if p.name.startswith("down-"))
    assert "HTTP 503" in page.read_text(encoding="utf-8")
    inst = next((tmp_path / "site/instances").glob("*.html")).read_text(encoding="utf-8")
    assert "report: down" in inst and "no report: HTTP 503" in inst


def test_evidence_summary_counts_failures_at_the_metrics_cut(site):
    inst = next((site / "instances").glob("*.html")).read_text(encoding="utf-8")
    # coverage: 1 unit of 2 below 0.75 (the score's own threshold); faithfulness: the claim at 0.6 too
    assert '<b>coverage</b> = 0.500 <span class="muted">(1 missed of 2)</span>' in inst
    assert '<b>faithfulness</b> = 0.300 <span class="muted">(1 unsupported of 1)</span>' in inst
    assert (
        '<b>structure</b> = 0.400 <span class="muted">(0/3 gold heading(s) found in the report)</span>'
        in inst
    )
    assert inst.index('data-system="evil&lt;b&gt;"') < inst.index('data-system="gold"')  # systems before Y
