"""Snapshot discovery (`frame refresh`) on the real corpus, live EDGAR via `responses` (no network)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest
import requests
import responses
from tenacity import wait_none

from schemas.config import (
    ArxivDomain,
    ArxivWindow,
    BuildSettings,
    EdgarAccess,
    EdgarDomain,
    FrameConfig,
    SourceConfig,
)
from tasks import discover as disc
from tasks.config import load_config
from tasks.discover import (
    DiscoveryHTTPError,
    add_months,
    latest_release,
    next_version,
    released_snapshots,
)
from tasks.errors import ConfigError, FrameInputError
from tasks.sources import discover_domain
from tests.conftest import CORPUS, ROOT, arxiv_rows, edgar_rows

AAPL_SUBMISSIONS = CORPUS / "edgar" / "AAPL" / "meta" / "CIK0000320193.json"
SUBMISSIONS_URL = "https://data.sec.gov/submissions/CIK0000320193.json"
TODAY = dt.date(2026, 1, 15)
D = dt.date.fromisoformat

pytestmark = pytest.mark.skipif(not AAPL_SUBMISSIONS.is_file(), reason="shared corpus not available")


def cfg_for(domain, mode: str = "mirror", tmp: Path | None = None, **edgar) -> FrameConfig:
    source = (
        SourceConfig(mode="mirror", mirror=CORPUS)
        if mode == "mirror"
        else SourceConfig(mode="live", edgar=EdgarAccess(**edgar))
    )
    return FrameConfig(build=BuildSettings(data_dir=tmp or Path("unused")), source=source, domains=[domain])


def edgar_domain(form: str = "10-Q", periods: tuple[str, ...] = ("2023-07-01",), **kw) -> EdgarDomain:
    category = {"10-Q": "financial_quarterly", "10-K": "financial_annual"}[form]
    return EdgarDomain(
        kind="edgar",
        name=f"aapl-{form.lower()}",
        category=category,
        ticker="AAPL",
        form=form,
        periods=[D(p) for p in periods],
        **kw,
    )


def gw_domain(windows=(("W1", "2021-11-01", "2022-06-30"),), months: int | None = 8, per: int = 3):
    return ArxivDomain(
        kind="arxiv",
        name="gw",
        category="academic_simple",
        topic="gravitational-wave-astrophysics",
        query="cat:astro-ph.HE",
        papers_per_window=per,
        windows=[ArxivWindow(label=lab, start=D(s), end=D(e)) for lab, s, e in windows],
        window_months=months,
    )


# ---- expectations computed from the corpus, independently of the code under test -----------


def manifest_periods(ticker: str, form: str) -> list[dt.date]:
    return sorted({D(r["period_end"]) for r in edgar_rows() if r["ticker"] == ticker and r["form"] == form})


def submissions_periods(form: str, after: dt.date, payload: dict | None = None) -> list[dt.date]:
    recent = (payload or json.loads(AAPL_SUBMISSIONS.read_bytes()))["filings"]["recent"]
    dates = {D(d) for f, d in zip(recent["form"], recent["reportDate"], strict=True) if f == form and d}
    return sorted(d for d in dates if d > after)


def papers_in(topic: str, start: dt.date, end: dt.date) -> int:
    """Papers of the topic whose first-version day (or month, for YYYY-MM) overlaps [start, end]."""
    n = 0
    for r in arxiv_rows():
        if r["topic"] != topic:
            continue
        v = r["first_version_date"].strip()
        if len(v) == 10:
            lo = hi = D(v)
        else:
            lo = D(v + "-01")
            hi = add_months(lo, 1) - dt.timedelta(days=1)
        n += lo <= end and hi >= start
    return n


def expected_chain(topic: str, last_end: dt.date, months: int, per: int, today: dt.date, mirror: bool):
    """(start, end) of the windows discovery should append, by plain month arithmetic."""
    out = []
    while True:
        start = last_end + dt.timedelta(days=1)
        y, m = divmod(start.year * 12 + start.month - 1 + months, 12)
        end = dt.date(y, m + 1, 1) - dt.timedelta(days=1)  # windows here start on the 1st
        if end >= today or (mirror and papers_in(topic, start, end) < per):
            return out
        out.append((start, end))
        last_end = end


def spans(domain: ArxivDomain) -> list[tuple[str, dt.date, dt.date]]:
    return [(w.label, w.start, w.end) for w in domain.windows]


# ---- EDGAR, mirror ------------------------------------------------------------------------------


def test_edgar_mirror_discovers_newer_manifest_periods():
    dom = edgar_domain(periods=("2024-12-28",), discover=True)
    out = discover_domain(cfg_for(dom), dom, [], TODAY)
    expected = [p for p in manifest_periods("AAPL", "10-Q") if p > D("2024-12-28")]
    assert expected  # the corpus has later AAPL 10-Qs (FY2025 Q2 and Q3, consecutive)
    assert isinstance(out, EdgarDomain)
    assert out.periods == [D("2024-12-28"), *expected]
    assert EdgarDomain.model_validate(out.model_dump()) == out
    # Everything else is unchanged.
    assert out.model_dump(exclude={"periods"}) == dom.model_dump(exclude={"periods"})


def test_edgar_mirror_discovery_never_skips_a_period():
    # The corpus's next AAPL 10-Q after FY2023 Q3 (2023-07-01) is FY2025 Q1: the three between are missing.
    dom = edgar_domain(discover=True)
    with pytest.raises(FrameInputError, match=r"MANIFEST\.csv: domain aapl-10-q: the 10-Q after 2023-07-01 "):
        discover_domain(cfg_for(dom), dom, [], TODAY)


def test_edgar_known_union_and_only_strictly_newer():
    periods = manifest_periods("AAPL", "10-Q")
    dom = edgar_domain(periods=(periods[0].isoformat(),), discover=True)
    # Released: the config's period plus one that left the config, and one the mirror lacks.
    known = [periods[-1].isoformat(), "2024-03-30"]
    out = discover_domain(cfg_for(dom), dom, known, TODAY)
    assert out.periods == sorted({periods[0], periods[-1], D("2024-03-30")})  # nothing newer than the last
    dom10k = edgar_domain("10-K", periods=("2024-09-28",), discover=True)
    out = discover_domain(cfg_for(dom10k), dom10k, ["2024-09-28"], TODAY)
    assert out.periods == [p for p in manifest_periods("AAPL", "10-K") if p >= D("2024-09-28")]


def test_edgar_without_discover_is_union_only_and_reads_nothing(tmp_path):
    dom = edgar_domain(periods=("2025-03-29",))
    cfg = FrameConfig(
        source=SourceConfig(mode="mirror", mirror=tmp_path / "no-such-mirror"),
        domains=[dom],
    )
    out = discover_domain(cfg, dom, ["2023-07-01", "2025-03-29"], TODAY)
    assert out.periods == [D("2023-07-01"), D("2025-03-29")]
    assert discover_domain(cfg, dom, [], TODAY) == dom


def test_edgar_known_not_a_date():
    dom = edgar_domain(discover=True)
    with pytest.raises(ConfigError, match=r"domains\.aapl-10-q: .*'W1'"):
        discover_domain(cfg_for(dom), dom, ["W1"], TODAY)


# ---- EDGAR, live ------------------------------------------------------------------------------


@pytest.fixture
def live(monkeypatch):
    monkeypatch.delenv("FRAME_EDGAR_NAME", raising=False)
    monkeypatch.delenv("FRAME_EDGAR_EMAIL", raising=False)
    monkeypatch.setattr(disc, "HTTP_WAIT", wait_none())
    with responses.RequestsMock() as rsps:
        yield rsps


def live_cfg(dom):
    return cfg_for(dom, "live", user_agent_name="Frame Tests", user_agent_email="frame@example.org")


@pytest.mark.parametrize(
    ("form", "periods"), [("10-Q", ("2024-12-28", "2025-03-29")), ("10-K", ("2021-09-25", "2022-09-24"))]
)
def test_edgar_live_discovers_submissions_report_dates(live, form, periods):
    live.get(SUBMISSIONS_URL, body=AAPL_SUBMISSIONS.read_bytes(), content_type="application/json")
    dom = edgar_domain(form, periods=periods, cik="320193", discover=True)
    out = discover_domain(live_cfg(dom), dom, [], TODAY)
    expected = submissions_periods(form, D(periods[-1]))
    assert expected  # the real JSON has later filings of both forms
    assert out.periods == [D(p) for p in periods] + expected
    (call,) = live.calls
    assert call.request.headers["User-Agent"] == "Frame Tests frame@example.org"


def test_edgar_live_excludes_amendments_and_uses_session(live):
    payload = json.loads(AAPL_SUBMISSIONS.read_bytes())
    recent = payload["filings"]["recent"]
    for key in recent:  # a later 10-Q/A (an amendment is not a new period) in front of the real rows
        recent[key] = [("10-Q/A" if key == "form" else "2099-12-31" if key == "reportDate" else "")] + list(
            recent[key]
        )
    live.get(SUBMISSIONS_URL, json=payload)
    dom = edgar_domain(periods=("2025-03-29",), cik="0000320193", discover=True)
    with requests.Session() as session:
        out = discover_domain(live_cfg(dom), dom, [], TODAY, session=session)
    assert out.periods == [D("2025-03-29"), *submissions_periods("10-Q", D("2025-03-29"), payload)]
    assert D("2099-12-31") not in out.periods


def test_edgar_live_needs_cik_and_user_agent(live):
    dom = edgar_domain(discover=True)
    with pytest.raises(ConfigError, match=r"domains\[0\]\.cik: .*needed for discovery in live mode"):
        discover_domain(live_cfg(dom), dom, [], TODAY)
    dom = edgar_domain(discover=True, cik="320193")
    with pytest.raises(ConfigError, match=r"source\.edgar: .*user agent"):
        discover_domain(cfg_for(dom, "live"), dom, [], TODAY)
    # Without discover, live mode needs neither (and makes no request).
    plain = edgar_domain(periods=("2025-03-29",))
    assert discover_domain(cfg_for(plain, "live"), plain, ["2024-12-28"], TODAY).periods == [
        D("2024-12-28"),
        D("2025-03-29"),
    ]
    assert not live.calls


def test_edgar_live_retries_transient_errors(live):
    live.get(SUBMISSIONS_URL, status=503)
    live.get(SUBMISSIONS_URL, body=requests.ConnectionError("reset"))
    live.get(SUBMISSIONS_URL, status=429)
    live.get(SUBMISSIONS_URL, body=AAPL_SUBMISSIONS.read_bytes(), content_type="application/json")
    dom = edgar_domain(periods=("2025-03-29",), cik="320193", discover=True)
    out = discover_domain(live_cfg(dom), dom, [], TODAY)
    assert out.periods[-1] == submissions_periods("10-Q", D("2025-03-29"))[-1]
    assert len(live.calls) == 4


def test_edgar_live_gives_up_with_one_line(live):
    live.get(SUBMISSIONS_URL, status=503)
    dom = edgar_domain(periods=("2025-03-29",), cik="320193", discover=True)
    with pytest.raises(DiscoveryHTTPError) as info:
        discover_domain(live_cfg(dom), dom, [], TODAY)
    assert str(info.value) == f"{SUBMISSIONS_URL}: HTTP 503 after {disc.HTTP_ATTEMPTS} attempts"
    assert len(live.calls) == disc.HTTP_ATTEMPTS


def test_edgar_live_client_error_is_not_retried(live):
    live.get(SUBMISSIONS_URL, status=404)
    dom = edgar_domain(periods=("2025-03-29",), cik="320193", discover=True)
    with pytest.raises(
        FrameInputError, match=r"^https://data\.sec\.gov/submissions/CIK0000320193\.json: HTTP 404"
    ):
        discover_domain(live_cfg(dom), dom, [], TODAY)
    assert len(live.calls) == 1


def test_edgar_live_unexpected_json(live):
    live.get(SUBMISSIONS_URL, json={"filings": {}})
    dom = edgar_domain(periods=("2025-03-29",), cik="320193", discover=True)
    with pytest.raises(FrameInputError, match="unexpected submissions JSON"):
        discover_domain(live_cfg(dom), dom, [], TODAY)


# ---- arXiv ------------------------------------------------------------------------------------


def test_arxiv_mirror_gw_stops_at_first_short_window():
    dom = gw_domain()
    out = discover_domain(cfg_for(dom), dom, [], TODAY)
    chain = expected_chain("gravitational-wave-astrophysics", D("2022-06-30"), 8, 3, TODAY, mirror=True)
    assert chain  # W2 (2022-07..2023-02) holds 3 papers
    assert spans(out) == [("W1", D("2021-11-01"), D("2022-06-30"))] + [
        (f"W{i}", s, e) for i, (s, e) in enumerate(chain, start=2)
    ]
    assert out.windows[1].start == D("2022-07-01") and out.windows[1].end == D("2023-02-28")
    assert ArxivDomain.model_validate(out.model_dump()) == out


def test_arxiv_mirror_several_windows_and_month_labels():
    # One paper per 12-month window, config labelled by month: new labels are start months.
    dom = ArxivDomain(
        kind="arxiv",
        name="exo",
        category="academic_complex",
        topic="exoplanets-and-host-stars",
        query="q",
        papers_per_window=1,
        windows=[ArxivWindow(label="2020-10", start=D("2020-10-01"), end=D("2020-12-31"))],
        window_months=12,
    )
    out = discover_domain(cfg_for(dom), dom, [], TODAY)
    chain = expected_chain("exoplanets-and-host-stars", D("2020-12-31"), 12, 1, TODAY, mirror=True)
    assert len(chain) >= 2
    assert spans(out)[1:] == [(f"{s:%Y-%m}", s, e) for s, e in chain]


def test_arxiv_live_appends_every_ended_window():
    dom = gw_domain()
    cfg = cfg_for(dom, "live")
    out = discover_domain(cfg, dom, [], D("2023-03-01"))  # W2 ended 2023-02-28 < today
    assert [w.label for w in out.windows] == ["W1", "W2"]
    out = discover_domain(cfg, dom, [], D("2023-02-28"))  # W2 ends today: not yet
    assert [w.label for w in out.windows] == ["W1"]
    out = discover_domain(cfg, dom, [], TODAY)
    chain = expected_chain("gravitational-wave-astrophysics", D("2022-06-30"), 8, 3, TODAY, mirror=False)
    assert spans(out)[1:] == [(f"W{i}", s, e) for i, (s, e) in enumerate(chain, start=2)]
    assert out.windows[-1].end < TODAY <= add_months(out.windows[-1].end + dt.timedelta(days=1), 8)


def test_arxiv_w_labels_continue_from_highest_number():
    dom = gw_domain(windows=(("W3", "2021-11-01", "2022-06-30"), ("W7", "2022-07-01", "2023-02-28")))
    out = discover_domain(cfg_for(dom, "live"), dom, [], D("2023-11-01"))
    assert spans(out)[-1] == ("W8", D("2023-03-01"), D("2023-10-31"))


def test_arxiv_month_label_collision_uses_start_day():
    dom = gw_domain(windows=(("2022-07", "2022-06-01", "2022-06-30"),), months=1)
    out = discover_domain(cfg_for(dom, "live"), dom, [], D("2022-09-01"))
    assert [w.label for w in out.windows] == ["2022-07", "2022-07-01", "2022-08"]


def test_arxiv_known_generated_windows_are_reconstructed():
    dom = gw_domain()
    # Released W1..W3 earlier (W2, W3 were discovered then): W3 holds fewer than 3 mirror papers but stays,
    # and discovery continues after it (W4 is short too, so nothing more in mirror mode).
    out = discover_domain(cfg_for(dom), dom, ["W1", "W2", "W3"], TODAY)
    assert spans(out) == [
        ("W1", D("2021-11-01"), D("2022-06-30")),
        ("W2", D("2022-07-01"), D("2023-02-28")),
        ("W3", D("2023-03-01"), D("2023-10-31")),
    ] + [
        (f"W{i}", s, e)
        for i, (s, e) in enumerate(
            expected_chain("gravitational-wave-astrophysics", D("2023-10-31"), 8, 3, TODAY, mirror=True), 4
        )
    ]
    # A gap (W2 dropped from the release) is not refilled: only windows after the last known one are new.
    out = discover_domain(cfg_for(dom, "live"), dom, ["W3"], D("2024-07-01"))
    assert [w.label for w in out.windows] == ["W1", "W3", "W4"]
    assert spans(out)[-1] == ("W4", D("2023-11-01"), D("2024-06-30"))


def test_arxiv_known_month_labels_are_reconstructed():
    dom = gw_domain(windows=(("first", "2021-11-01", "2022-06-30"),), months=4)
    out = discover_domain(cfg_for(dom, "live"), dom, ["2022-11"], D("2023-01-01"))
    assert spans(out) == [
        ("first", D("2021-11-01"), D("2022-06-30")),
        ("2022-11", D("2022-11-01"), D("2023-02-28")),  # known (ends after today, but released)
    ]


@pytest.mark.parametrize(
    ("months", "label", "why"),
    [
        (8, "spring", "not a window generated after W1 every 8 months"),
        (8, "2022-08", "not a window generated after W1"),  # the W chain never makes month labels
        (None, "W2", "no window_months"),
    ],
)
def test_arxiv_unknown_released_label_is_a_config_error(months, label, why):
    dom = gw_domain(months=months)
    with pytest.raises(ConfigError, match=rf"^domains\.gw: released window '{label}' .*{why}"):
        discover_domain(cfg_for(dom), dom, ["W1", label], TODAY)


def test_arxiv_without_window_months_is_unchanged():
    dom = gw_domain(months=None)
    assert discover_domain(cfg_for(dom), dom, ["W1"], TODAY) == dom


def test_demo_config_domains_do_not_change(corpus):
    cfg = load_config(ROOT / "configs" / "demo.toml")
    for dom in cfg.domains:
        assert discover_domain(cfg, dom, dom.snapshots, TODAY) == dom


# ---- releases ---------------------------------------------------------------------------------


def write_release(folder: Path, rows: list[tuple[str, str]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}", encoding="utf-8")
    frame = pd.DataFrame(rows, columns=["domain", "snapshot"])
    frame["report_id"] = frame["domain"] + "/" + frame["snapshot"]
    frame.to_parquet(folder / "reports.parquet", index=False)
    return folder


def test_latest_release_and_snapshots(tmp_path):
    releases = tmp_path / "releases"
    assert latest_release(releases, "frame-demo") is None
    base = releases / "frame-demo"
    for v in ("0.1.0", "0.2.0", "0.10.0"):
        write_release(base / v, [("gw", "W1")])
    (base / "0.11.0").mkdir()  # no manifest.json: an unfinished write
    write_release(base / ".tmp-0.12.0-123-abc", [("gw", "W1")])
    write_release(base / "latest", [("gw", "W1")])
    (base / "9.0.0").write_text("a file, not a folder")
    assert latest_release(releases, "frame-demo") == base / "0.10.0"
    write_release(base / "1.0.0-rc.2", [("gw", "W1")])
    assert latest_release(releases, "frame-demo") == base / "1.0.0-rc.2"
    write_release(base / "1.0.0", [("gw", "W1")])
    assert latest_release(releases, "frame-demo") == base / "1.0.0"
    assert latest_release(releases, "other") is None

    rel = write_release(
        tmp_path / "r" / "0.3.0",
        [("gw", "W10"), ("aapl-10q", "2025-03-29"), ("gw", "W2"), ("gw", "W2"), ("aapl-10q", "2023-07-01")],
    )
    assert released_snapshots(rel) == {"aapl-10q": ["2023-07-01", "2025-03-29"], "gw": ["W2", "W10"]}
    with pytest.raises(FrameInputError, match="reports.parquet"):
        released_snapshots(tmp_path)
    pd.DataFrame({"domain": ["gw"]}).to_parquet(tmp_path / "reports.parquet")
    with pytest.raises(FrameInputError, match="domain/snapshot"):
        released_snapshots(tmp_path)


def test_next_version():
    assert next_version("0.1.0") == "0.2.0"
    assert next_version("0.1.3", "minor") == "0.2.0"
    assert next_version("0.1.3", "patch") == "0.1.4"
    assert next_version("0.9.3", "major") == "1.0.0"
    assert next_version("1.2.0-rc.1", "patch") == "1.2.1"
    with pytest.raises(FrameInputError, match="not semver"):
        next_version("v1.0")
    with pytest.raises(FrameInputError, match="major, minor, patch"):
        next_version("1.0.0", "huge")


def test_add_months_clamps():
    assert add_months(D("2024-01-31"), 1) == D("2024-02-29")
    assert add_months(D("2023-11-15"), 2) == D("2024-01-15")
    assert add_months(D("2022-07-01"), 8) - dt.timedelta(days=1) == D("2023-02-28")
