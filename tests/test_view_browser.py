"""`frame view` in a real browser: the site of the demo's scoring run (every metric family, `demo_scored`)
loaded from file:// in Debian's headless chromium, its DOM checked against the run's own tables (read with
pandas), and no request leaving file:// (chromium's net log).

tests/setup_browser.sh installs chromium where it is absent (`make test` runs it first); without one the
tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next(
    (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (tests/setup_browser.sh installs it where apt-get is usable)",
)
BROWSER_TIMEOUT_S = 60


class _Dom(HTMLParser):
    """The parts of a dumped DOM the tests read: links, table rows (cells' text and data-v), the text under
    each element carrying a data-system / data-metric / class="col" marker."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.rows: list[list[tuple[str, str | None]]] = []
        self.sorted: list[str] = []
        self.text: list[str] = []
        self._href: str | None = None
        self._cell: list[str] | None = None
        self._cell_v: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a":
            self._href, self._link_text = a.get("href"), []
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell, self._cell_v = [], a.get("data-v")
        elif tag == "table" and a.get("data-sorted"):
            self.sorted.append(str(a["data-sorted"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._link_text).strip()))
            self._href = None
        elif tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(("".join(self._cell).strip(), self._cell_v))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._href is not None:
            self._link_text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _chromium(tmp: Path, url: str, *extra: str) -> str:
    """chromium headless on `url`; its stdout (the DOM with --dump-dom). Bounded: its process group is
    killed after BROWSER_TIMEOUT_S."""
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    args += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]
    args += [f"--user-data-dir={tmp / 'profile'}", *extra, url]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BROWSER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {BROWSER_TIMEOUT_S} s on {url}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return out.decode("utf-8", "replace")


def _dom(tmp: Path, url: str) -> _Dom:
    d = _Dom()
    d.feed(_chromium(tmp, url, "--dump-dom"))
    return d


def _page_requests(tmp: Path, url: str) -> list[str]:
    """URLs other than file:// that the page at `url` requested, from chromium's net log: requests with
    an initiator (a file:// page's is "null"); chromium's own background requests have none."""
    net = tmp / "net.json"
    net.unlink(missing_ok=True)
    _chromium(tmp, url, f"--log-net-log={net}", "--dump-dom")
    text = net.read_text(encoding="utf-8", errors="replace").rstrip()
    try:
        log = json.loads(text)
    except ValueError:  # a log cut at exit lacks its closing brackets
        log = json.loads(text.rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start
        and e.get("params", {}).get("initiator") not in (None, "not an origin")
        and not e["params"].get("url", "file:").startswith("file:")
    ]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def site(demo_scored, tmp_path_factory) -> dict:
    """`frame view` of the demo's scoring run (this checkout's code), with the run's tables as oracles."""
    tmp = tmp_path_factory.mktemp("view")
    out = tmp / "site"
    res = subprocess.run(
        [sys.executable, "-m", "flows.cli", "view", str(demo_scored["out"]), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    run = demo_scored["out"]
    return {
        "index": _dom(tmp, (out / "index.html").as_uri()),
        "out": out,
        "tmp": tmp,
        "run": run,
        "leaderboard": pd.read_csv(run / "leaderboard.csv"),
        "scores": pd.read_parquet(run / "scores.parquet"),
        "evidence": pd.read_parquet(run / "evidence.parquet"),
        "instances": pd.read_parquet(demo_scored["release"] / "instances.parquet"),
        "generations": demo_scored["release"].parents[2] / "generations" / "demo" / "0.1.0",
    }


def _link_to(dom: _Dom, text: str, folder: str) -> str:
    hrefs = [h for h, t in dom.links if t == text and h.startswith(f"{folder}/")]
    assert hrefs, f"no link {text!r} into {folder}/"
    return hrefs[0]


def test_index_lists_every_system_of_the_leaderboard(site):
    dom = site["index"]
    systems = set(site["leaderboard"]["system"])
    assert systems == {"gold", "copy-sample", "extractive"}
    for s in systems:
        assert (site["out"] / _link_to(dom, s, "systems")).is_file()
    instances = set(site["scores"]["instance_id"])
    assert len(instances) == 22
    linked = {t for h, t in dom.links if h.startswith("instances/")}
    assert linked == instances


@pytest.mark.parametrize(("metric", "direction"), [("coverage", "asc"), ("text_edit_distance", "desc")])
def test_system_page_sorts_by_a_metric(site, metric, direction):
    page = site["out"] / _link_to(site["index"], "extractive", "systems")
    dom = _dom(site["tmp"], f"{page.as_uri()}?sort={metric}&dir={direction}")
    assert dom.sorted == [f"{metric} {direction}"]
    head = next(r for r in dom.rows if r and r[0][0] == "instance")
    rows = dom.rows[dom.rows.index(head) + 1 :]
    shown = [r[0][0] for r in rows]
    # oracle: the run's own values of that metric, not the numbers the page prints
    truth = (
        site["scores"].query("system == 'extractive' and metric == @metric").set_index("instance_id")["value"]
    )
    assert sorted(shown) == sorted(truth.index)
    values = [truth[i] for i in shown]
    assert values == sorted(values, reverse=direction == "desc")
    assert shown != sorted(shown)  # not the page's own order (by instance): the script sorted it


def test_instance_page_shows_s_y_reports_and_evidence(site):
    inst = site["instances"].set_index("instance_id")
    iid = "financial_annual/GOOGL-10-K/2023-12-31->2024-12-31"
    dom = _dom(site["tmp"], (site["out"] / _link_to(site["index"], iid, "instances")).as_uri())
    text = _words(" ".join(dom.text))
    report = pd.read_parquet(site["generations"] / "extractive" / "generations.parquet").set_index(
        "instance_id"
    )
    for md in (inst.at[iid, "sample_markdown"], inst.at[iid, "target_markdown"], report.at[iid, "markdown"]):
        # every paragraph of plain prose of the Markdown is on the page (as text, not as markup)
        prose = [p for p in md.split("\n\n") if p[:1].isalpha() and not re.search(r"[*_`\[\]|<>#\\]", p)]
        assert prose
        missing = [p for p in prose if _words(p) not in text]
        assert not missing, missing[:2]
    ev = site["evidence"].query("instance_id == @iid and system == 'extractive'")
    for metric in ("coverage", "faithfulness", "teds", "rubric", "eps"):
        items = ev[ev["metric"] == metric]
        assert len(items), metric
        for t in items["text"]:
            assert _words(t) in text, (metric, t)
    for passage in ev.loc[(ev["metric"] == "faithfulness") & (ev["evidence"] != ""), "evidence"]:
        assert _words(passage) in text  # the passages checked for each claim
    diffs = [h for h, t in dom.links if h.startswith("../diffs/")]
    assert len(diffs) == 3  # gold, copy-sample, extractive: every pair
    for h in diffs:
        assert (site["out"] / "instances" / h).resolve().is_file()


def test_no_request_leaves_file_urls(site):
    """Every link of every page is a relative path to a file of the site, nothing is loaded from anywhere
    (no src, no url(), no @import), and in chromium the heaviest page requests nothing but file:// URLs."""
    out = site["out"]
    files = sorted(out.rglob("*.html"))
    assert len(files) == 1 + 3 + 22 + 22 * 3
    for f in files:
        html = f.read_text(encoding="utf-8")
        assert "Content-Security-Policy" in html
        assert not re.search(r"\bsrc\s*=|url\(|@import", html, re.I), f
        for href in re.findall(r'href="([^"]*)"', html):
            assert not re.match(r"[a-z][a-z0-9+.-]*:|//|/", href, re.I), (f, href)
            assert (f.parent / href.split("?")[0].split("#")[0]).resolve().is_file(), (f, href)
    biggest = max(files, key=lambda p: p.stat().st_size)
    assert _page_requests(site["tmp"], biggest.as_uri()) == []
    # the check sees a page's request: a page that loads an image from 127.0.0.1 (port 9, refused at once)
    control = site["tmp"] / "control.html"
    control.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>', encoding="utf-8")
    assert _page_requests(site["tmp"], control.as_uri()) == ["http://127.0.0.1:9/x.png"]


def test_hostile_report_does_not_run_in_the_browser(tmp_path):
    """A report carrying <script>, an onerror handler and an iframe (tests/test_view.py's run): in the
    browser its page keeps its own title, holds no such element, and shows the markup as text."""
    from tasks.view.load import load_run
    from tasks.view.site import write_site
    from tests.test_view import EVIL, write_run

    out = tmp_path / "site"
    write_site(load_run(write_run(tmp_path / "data")), out)
    page = next((out / "instances").glob("*.html"))
    dom_text = _chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert re.search(r"<title>instance: [^<]*</title>", dom_text)
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom_text).group(1)
    assert not re.search(r"<(img|iframe)\b", dom_text)
    d = _Dom()
    d.feed(dom_text)
    text = " ".join(d.text)
    assert "<script>document.title='pwned'</script>" in text and f"report: {EVIL}" in text
