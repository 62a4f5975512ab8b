"""Instances pair consecutive editions (paper 000 §3, issue 34 point 1): each pair is marked with the
source periods between its two snapshots (`periods_skipped`, 0 = consecutive), the leaderboard's headline
scopes leave the marked ones out, and live discovery never skips an edition.

Oracles are independent of the code: the corpus MANIFEST's dei fiscal year / fiscal period of each filing,
EDGAR's own filing listing (the real AAPL submissions JSON: consecutive = adjacent in it) and window dates.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import responses
from tenacity import wait_none

from schemas.config import BuildSettings, EdgarAccess, EdgarDomain, FrameConfig, SourceConfig
from schemas.release import ReleaseManifest
from tasks import discover as disc
from tasks.config import load_config
from tasks.errors import FrameInputError
from tasks.instances import make_instances
from tasks.release.card import render_card
from tasks.release.read import read_release_table
from tasks.release.verify import verify_release
from tasks.score.leaderboard import OVERALL, SKIPPED, leaderboard, paired_tests
from tasks.sources import discover_domain, periods_skipped
from tests.conftest import CORPUS, ROOT, edgar_rows
from tests.test_release import make_tables, write

D = dt.date.fromisoformat
SUBMISSIONS = CORPUS / "edgar" / "AAPL" / "meta" / "CIK0000320193.json"
SUBMISSIONS_URL = "https://data.sec.gov/submissions/CIK0000320193.json"

pytestmark = pytest.mark.skipif(not SUBMISSIONS.is_file(), reason="shared corpus not available")


# ---- oracles -------------------------------------------------------------------------------------


def fiscal_index(row: dict) -> int:
    """A filing's place in its filer's sequence of editions of its form, from the dei facts the MANIFEST
    records: fiscal years for 10-Ks; for 10-Qs three per fiscal year (the fourth quarter is the 10-K)."""
    year = int(row["fiscal_year"])
    if row["form"] == "10-K":
        return year
    return 3 * year + {"Q1": 0, "Q2": 1, "Q3": 2}[row["fiscal_period"]]


def corpus_series() -> dict[tuple[str, str], list[dict]]:
    """(ticker, form) -> the corpus's filings, by period end."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in sorted(edgar_rows(), key=lambda r: r["period_end"]):
        out.setdefault((r["ticker"], r["form"]), []).append(r)
    return out


def edgar(ticker: str, form: str, periods, **kw) -> EdgarDomain:
    category = {"10-Q": "financial_quarterly", "10-K": "financial_annual"}[form]
    return EdgarDomain(
        kind="edgar",
        name=f"{ticker}-{form}",
        category=category,
        ticker=ticker,
        form=form,
        periods=sorted(D(str(p)) for p in periods),
        **kw,
    )


def listing(form: str) -> list[dt.date]:
    """EDGAR's own list of AAPL's filings of `form` (the real submissions JSON, filings.recent)."""
    recent = json.loads(SUBMISSIONS.read_bytes())["filings"]["recent"]
    return sorted({D(d) for f, d in zip(recent["form"], recent["reportDate"], strict=True) if f == form})


# ---- the demo config -----------------------------------------------------------------------------


def test_demo_marks_only_the_pairs_across_a_corpus_gap():
    cfg = load_config(ROOT / "configs" / "demo.toml")
    by_period = {(r["ticker"], r["form"], r["period_end"]): r for r in edgar_rows()}
    marked = {}
    for d in cfg.domains:
        snaps = d.snapshots
        reports = {s: {"markdown": f"report {s}"} for s in snaps}
        rows = make_instances(
            d.category,
            d.name,
            snaps,
            reports,
            {s: [] for s in snaps},
            lambda t, n, d=d: periods_skipped(d, t, n),
        )
        assert len(rows) == len(snaps) - 1  # every pair is kept
        for row in rows:
            if d.kind == "edgar":
                a = by_period[(d.ticker, d.form, row["t_sample"])]
                b = by_period[(d.ticker, d.form, row["t_target"])]
                assert row["periods_skipped"] == fiscal_index(b) - fiscal_index(a) - 1, row["instance_id"]
            if row["periods_skipped"]:
                marked[row["instance_id"]] = row["periods_skipped"]
    edgar_marked = {k: v for k, v in marked.items() if k.startswith("financial")}
    # AAPL FY2023 Q3 -> FY2025 Q1 skips FY2024 Q1-Q3; NVDA FY2024 Q2 -> FY2026 Q1 skips FY2024 Q3 and
    # FY2025 Q1-Q3; every other filing pair of the demo is consecutive
    assert edgar_marked == {
        "financial_quarterly/AAPL-10-Q/2023-07-01->2024-12-28": 3,
        "financial_quarterly/NVDA-10-Q/2023-07-30->2025-04-27": 4,
    }
    # windows: consecutive exactly when the next starts the day after the previous ends
    for d in cfg.domains:
        if d.kind == "arxiv":
            for a, b in itertools.pairwise(d.windows):
                contiguous = b.start == a.end + dt.timedelta(days=1)
                iid = f"{d.category}/{d.name}/{a.label}->{b.label}"
                assert (iid not in marked) == contiguous, iid


# ---- every filer of the corpus -------------------------------------------------------------------


def test_every_corpus_filing_pair_counts_the_editions_between():
    series = corpus_series()
    assert {k for k in series} >= {(t, f) for t in ("AAPL", "NVDA", "GOOGL") for f in ("10-Q", "10-K")}
    for (ticker, form), rows in series.items():
        dom = edgar(ticker, form, [r["period_end"] for r in rows])
        for a, b in itertools.combinations(rows, 2):
            want = fiscal_index(b) - fiscal_index(a) - 1
            got = periods_skipped(dom, a["period_end"], b["period_end"])
            assert got == want, (ticker, form, a["period_end"], b["period_end"])
        # the consecutive editions alone (the corpus's sets of three), whatever the domain lists beside
        last = [r for r in rows if fiscal_index(rows[-1]) - fiscal_index(r) <= 2]
        alone = edgar(ticker, form, [r["period_end"] for r in last])
        for a, b in itertools.pairwise(last):
            assert periods_skipped(alone, a["period_end"], b["period_end"]) == 0, (
                ticker,
                form,
                a["period_end"],
            )


@pytest.mark.parametrize("form", ["10-Q", "10-K"])
def test_edgar_listing_adjacent_editions_are_consecutive_and_gaps_counted(form):
    dates = listing(form)
    assert len(dates) >= 10  # ten years of AAPL filings, 52/53-week fiscal years included
    with_year_end = edgar("AAPL", form, dates, fiscal_year_end="09-26")  # the JSON's fiscalYearEnd 0926
    inferred = edgar("AAPL", form, dates)  # the year end from the 10-Qs themselves
    for dom in (with_year_end, inferred):
        for i, j in itertools.combinations(range(len(dates)), 2):
            if j - i <= 5:
                got = periods_skipped(dom, dates[i].isoformat(), dates[j].isoformat())
                assert got == j - i - 1, (form, dates[i], dates[j])


# ---- live discovery picks the next editions ----------------------------------------------------


@pytest.fixture
def live(monkeypatch):
    monkeypatch.setattr(disc, "HTTP_WAIT", wait_none())
    with responses.RequestsMock() as rsps:
        yield rsps


def live_cfg(dom: EdgarDomain) -> FrameConfig:
    source = SourceConfig(
        mode="live", edgar=EdgarAccess(user_agent_name="T", user_agent_email="t@example.org")
    )
    return FrameConfig(build=BuildSettings(data_dir="unused"), source=source, domains=[dom])


def without(payload: dict, form: str, report_date: str) -> dict:
    """The submissions JSON with one filing taken out of filings.recent."""
    recent = payload["filings"]["recent"]
    keep = [
        i
        for i, (f, d) in enumerate(zip(recent["form"], recent["reportDate"], strict=True))
        if not (f == form and d == report_date)
    ]
    payload["filings"]["recent"] = {k: [v[i] for i in keep] for k, v in recent.items()}
    return payload


def test_live_discovery_appends_the_next_editions_only(live):
    quarters = listing("10-Q")
    start = quarters[-6]
    live.get(SUBMISSIONS_URL, body=SUBMISSIONS.read_bytes(), content_type="application/json")
    dom = edgar("AAPL", "10-Q", [start], cik="320193", discover=True)
    out = discover_domain(live_cfg(dom), dom, [], dt.date(2026, 1, 15))
    assert out.periods == quarters[-6:]  # the five after `start`, each the next one
    assert out.fiscal_year_end == "09-26"  # taken from the filer's listing
    # a listing that lacks the next 10-Q: discovery refuses to skip it
    gap = without(json.loads(SUBMISSIONS.read_bytes()), "10-Q", quarters[-5].isoformat())
    live.replace(responses.GET, SUBMISSIONS_URL, json=gap)
    with pytest.raises(
        FrameInputError, match=rf"^{SUBMISSIONS_URL}: domain AAPL-10-Q: the 10-Q after {start} "
    ):
        discover_domain(live_cfg(dom), dom, [], dt.date(2026, 1, 15))


# ---- the leaderboard and the card --------------------------------------------------------------


def scores(marked: str | None) -> pd.DataFrame:
    rows = []
    for i, (system, value) in enumerate(itertools.product(("a", "b"), (0.2, 0.4, 0.9))):
        iid = f"financial_quarterly/X-10-Q/t{i % 3}"
        rows.append(
            {
                "instance_id": iid,
                "category": "financial_quarterly",
                "system": system,
                "metric": "structure",
                "value": value + (0.05 if system == "b" else 0.0),
                "judge": "offline",
                "periods_skipped": 2 if iid == marked else 0,
            }
        )
    return pd.DataFrame(rows)


def test_leaderboard_leaves_the_marked_instance_out_of_the_headline_scopes():
    board = leaderboard(scores("financial_quarterly/X-10-Q/t2"), n_resamples=50)
    cell = board.set_index(["system", "scope", "metric"])
    for scope in (OVERALL, "financial_quarterly"):
        assert cell.loc[("a", scope, "structure"), "n"] == 2
        assert cell.loc[("a", scope, "structure"), "mean"] == pytest.approx((0.2 + 0.4) / 2)
    assert cell.loc[("a", SKIPPED, "structure"), "n"] == 1
    assert cell.loc[("a", SKIPPED, "structure"), "mean"] == pytest.approx(0.9)
    assert set(paired_tests(scores("financial_quarterly/X-10-Q/t2"), n_resamples=50)["n"]) == {2}
    # nothing marked: every instance counts, and there is no skipped-periods scope
    plain = leaderboard(scores(None), n_resamples=50)
    assert SKIPPED not in set(plain["scope"])
    assert set(plain.loc[plain["scope"] == OVERALL, "n"]) == {3}


def test_release_types_the_column_and_the_card_lists_the_marked_instances(tmp_path):
    tables = make_tables()  # CO0-10-Q: 2023-07-01, 2024-03-30, 2025-03-29
    first, second = tables["instances"]
    first["periods_skipped"], second["periods_skipped"] = 2, 3
    folder = write(tmp_path, tables)
    table = pq.read_table(folder / "instances.parquet")
    assert table.schema.field("periods_skipped").type == pa.int32()
    rows = table.to_pylist()
    assert {r["instance_id"]: r["periods_skipped"] for r in rows} == {
        first["instance_id"]: 2,
        second["instance_id"]: 3,
    }
    assert verify_release(folder).problems == []
    manifest = ReleaseManifest.model_validate_json((folder / "manifest.json").read_text())
    text = render_card(manifest, [], {}, instances=rows)
    assert "`periods_skipped`" in text and "left out of the leaderboard's headline scopes" in text
    assert f"| `{first['instance_id']}` | 2 |" in text and f"| `{second['instance_id']}` | 3 |" in text
    first["periods_skipped"] = second["periods_skipped"] = 0
    text = render_card(manifest, [], {}, instances=tables["instances"])
    assert "Every instance of this release pairs consecutive editions." in text


def test_a_release_of_schema_2_still_verifies_and_reads_unmarked():
    demo = ROOT / "data" / "releases" / "demo" / "0.1.0"
    if (
        not (demo / "manifest.json").is_file()
        or json.loads((demo / "manifest.json").read_text())["schema_version"] != 2
    ):
        pytest.skip("no demo release of schema version 2 here")
    assert verify_release(demo).problems == []
    instances = read_release_table(demo, "instances")
    assert instances.schema.field("periods_skipped").type == pa.int32()
    assert set(instances.column("periods_skipped").to_pylist()) == {None}  # not recorded back then
