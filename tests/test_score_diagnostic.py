"""Per-system diagnostic pages (tasks/score/diagnostic.py) over a small synthetic scores folder."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from bs4 import BeautifulSoup

from schemas.config import CATEGORY_LABELS
from tasks.errors import FrameInputError
from tasks.score.diagnostic import SATURATED, render_index, render_system_reports, safe_name
from tasks.score.leaderboard import OVERALL, bootstrap_ci, cell_seed, primary_scores
from tasks.score.plots import plot_metric_vs_buckets

SYSTEMS = ("gold", "alpha", "beta")
INSTANCES = [f"inst{i}" for i in range(6)]
CATEGORY = {iid: ("financial_annual" if i < 3 else "academic_simple") for i, iid in enumerate(INSTANCES)}
JIT = (0.00, 0.01, -0.01, 0.02, -0.02, 0.0)  # per-instance jitter, so the CIs are not degenerate
# metric -> system -> base value; structure separates, faithfulness and holistic are saturated
BASE = {
    "structure": {"gold": 0.97, "alpha": 0.8, "beta": 0.3},
    "coverage": {"gold": 1.0, "alpha": 0.6, "beta": 0.5},
    "faithfulness": {"gold": 0.95, "alpha": 0.90, "beta": 0.91},
    "text_edit_distance": {"gold": 0.0, "alpha": 0.2, "beta": 0.6},  # lower is better
    "rubric": {"gold": 95.0, "alpha": 70.0, "beta": 40.0},  # 0-100
    "holistic_completeness": {"gold": 9.0, "alpha": 8.0, "beta": 8.1},  # 1-10
}
G1_FAILS = 4  # alpha fails G1:g1_title_entity on 4 of 6 instances
G2_FAILS = 2


def _value(metric: str, system: str, i: int) -> float:
    lo, hi = {"rubric": (0, 100), "holistic_completeness": (1, 10)}.get(metric, (0, 1))
    v = BASE[metric][system] + JIT[i] * (hi - lo)
    if metric == "coverage" and system == "alpha" and i == 4:
        v = 0.05  # alpha's worst instance: far below beta (0.5 - 0.02)
    return min(max(v, lo), hi)


def _evidence_row(
    iid: str, system: str, metric: str, index: int, kind: str, text: str, score: float, **kw
) -> dict:
    return {
        "item_id": f"{iid}|{system}|{metric}|{index}",
        "instance_id": iid,
        "system": system,
        "metric": metric,
        "index": index,
        "kind": kind,
        "text": text,
        "source": kw.get("source", text),
        "score": score,
        "stage": 1,
        "evidence": kw.get("evidence", ""),
        "evidence_ref": kw.get("evidence_ref", ""),
        "rationale": kw.get("rationale", ""),
        "judge": "test",
    }


def _build(root: Path) -> Path:
    """A scores folder like `frame score` writes: 3 systems (gold included), 6 instances, 2 categories."""
    folder = root / "scores" / "toy" / "0.1.0"
    folder.mkdir(parents=True)
    rows = [
        {
            "instance_id": iid,
            "category": CATEGORY[iid],
            "system": s,
            "metric": m,
            "value": _value(m, s, i),
            "judge": "test-judge",
            "population": 10,
            "sampled": 10,
            "detail_json": "{}",
        }
        for i, iid in enumerate(INSTANCES)
        for s in SYSTEMS
        for m in BASE
    ]
    pd.DataFrame(rows).to_parquet(folder / "scores.parquet", index=False)

    ev = []
    for i, iid in enumerate(INSTANCES):
        for s in SYSTEMS:
            g1_fail = s == "alpha" and i < G1_FAILS or s == "beta" and i == 0
            g2_fail = s == "alpha" and i < G2_FAILS
            ev.append(
                _evidence_row(
                    iid,
                    s,
                    "rubric",
                    0,
                    "G1:g1_title_entity",
                    "The title names the entity",
                    0.0 if g1_fail else 1.0,
                    evidence=f"title lacks the company name ({iid})",
                )
            )
            ev.append(
                _evidence_row(iid, s, "rubric", 1, "G2:g2_numbers", "Key figures", 0.5 if g2_fail else 1.0)
            )
            ev.append(_evidence_row(iid, s, "rubric", 2, "G0:g0_format", "Is a report", 1.0))
            # coverage: alpha misses unit 0 everywhere; its text holds a pipe and is long
            unit = "Revenue | grew 12% " + "x" * 300
            ev.append(
                _evidence_row(
                    iid,
                    s,
                    "coverage",
                    0,
                    "statistic",
                    unit,
                    0.0 if s == "alpha" else 1.0,
                    evidence_ref="Results > Revenue" if s == "gold" else "",
                )
            )
            ev.append(_evidence_row(iid, s, "coverage", 1, "entity", f"Entity {iid}", 1.0))
            ev.append(
                _evidence_row(
                    iid,
                    s,
                    "faithfulness",
                    0,
                    "claim",
                    f"Claim {i} of {s}",
                    0.1 * i,
                    rationale=f"support {0.1 * i:.1f}",
                    evidence_ref="doc-1",
                )
            )
    pd.DataFrame(ev).to_parquet(folder / "evidence.parquet", index=False)

    pd.DataFrame(
        {
            "system": ["alpha", "beta"],
            "score": [0.4, -0.4],
            "ci_low": [0.1, -0.7],
            "ci_high": [0.7, -0.1],
            "rank": [1, 2],
            "rank_low": [1, 1],
            "rank_high": [1, 2],
            "wins": [3, 1],
            "losses": [1, 3],
            "ties": [1, 1],
            "games": [5, 5],
        }
    ).to_csv(folder / "bradley_terry.csv", index=False)
    votes = [("alpha", "beta", "A"), ("beta", "alpha", "B"), ("alpha", "beta", "A"), ("beta", "alpha", "A")]
    votes.append(("alpha", "beta", "tie"))
    pd.DataFrame(
        [
            {
                "instance_id": INSTANCES[k],
                "system_a": a,
                "system_b": b,
                "order": "ab",
                "raw_vote": v,
                "vote": v,
                "judge": "test",
                "rationale": "",
            }
            for k, (a, b, v) in enumerate(votes)
        ]
    ).to_parquet(folder / "pairwise.parquet", index=False)
    manifest = {
        "release": "/x/releases/toy/0.1.0",
        "systems": list(SYSTEMS),
        "judges": ["test-judge"],
        "settings": {"seed": 0, "bootstrap": 500},
        "generated_at": "2026-01-02T03:04:05Z",
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


PLOTTED = ("structure", "coverage")


def _add_plots(folder: Path) -> list[Path]:
    """Trend plots of two metrics as `frame score` draws them (small, few resamples), listed in the
    manifest as `frame score` lists them."""
    scores = pd.read_parquet(folder / "scores.parquet")
    features = pd.DataFrame(
        {
            "instance_id": INSTANCES,
            "gold_tokens": [1500 * (i + 1) for i in range(6)],
            "grounding_tokens": [9000 * (i + 1) for i in range(6)],
            "gold_tables": [i % 3 for i in range(6)],
        }
    )
    paths = plot_metric_vs_buckets(
        scores, features, folder / "plots", metrics=list(PLOTTED), dpi=30, n_resamples=100
    )
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["plots"] = [p.name for p in paths]
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return paths


@pytest.fixture()
def scores_dir(tmp_path: Path) -> Path:
    return _build(tmp_path)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The synthetic folder (with trend plots) rendered once with the defaults: (scores folder, paths
    written)."""
    folder = _build(tmp_path_factory.mktemp("diag"))
    _add_plots(folder)
    return folder, render_system_reports(folder)


def _page(rendered: tuple[Path, list[Path]], name: str) -> str:
    return (rendered[0] / "report" / f"{name}.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    """The text under a '## ' or '### ' heading, up to the next heading of the same or higher level."""
    level = heading.split(" ")[0]
    start = text.index(heading + "\n")
    stop = re.compile(rf"^#{{1,{len(level)}}} ", re.M)
    m = stop.search(text, start + len(heading) + 1)
    return text[start : m.start() if m else len(text)]


def _rows(section: str) -> list[list[str]]:
    """Data rows of the first Markdown table in ``section`` (cells split on unescaped pipes)."""
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines[2:]]


def _by_metric(rows: list[list[str]], col: int = 1) -> dict[str, list[str]]:
    return {r[col].split("`")[1]: r for r in rows}


def test_pages_written_for_every_system_and_index(rendered: tuple[Path, list[Path]]) -> None:
    scores_dir, written = rendered
    out = scores_dir / "report"
    expected = {out / f"{s}.{ext}" for s in SYSTEMS for ext in ("md", "html")}
    expected |= {out / "index.md", out / "index.html"}
    assert set(written) == expected and all(p.is_file() for p in expected)
    html = (out / "alpha.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<table>" in html and "<style>" in html
    assert "<title>alpha: diagnostic report</title>" in html
    assert 'href="index.html"' in html
    index_md = (out / "index.md").read_text(encoding="utf-8")
    assert "[alpha](alpha.md)" in index_md
    assert 'href="alpha.html"' in (out / "index.html").read_text(encoding="utf-8")
    head = (out / "alpha.md").read_text(encoding="utf-8").split("## ")[0]
    assert (
        "toy/0.1.0" in head and "test-judge" in head and "6 of 6" in head and "2026-01-02T03:04:05Z" in head
    )


def test_side_by_side_table_ranks_spreads_and_ci(rendered: tuple[Path, list[Path]]) -> None:
    alpha = _page(rendered, "alpha")
    fam = _section(alpha, "## All families side by side")
    rows = _rows(fam)
    by = _by_metric(rows)
    # family order: frame, fidelity, rubric, holistic
    assert [r[0] for r in rows if r[0]] == ["**frame**", "**fidelity**", "**rubric**", "**holistic**"]
    assert by["structure"][3] == "1/2" and by["text_edit_distance"][3] == "1/2"  # lower is better: 0.2 < 0.6
    assert by["faithfulness"][3] == "2/2"
    assert by["structure"][4] == "`beta` 0.300"  # best other excludes gold
    assert by["structure"][5] == "0.970"  # gold reference column
    assert by["structure"][6] == "0.500"  # (0.8 - 0.3) / 1 over alpha and beta only
    assert by["rubric"][6] == "0.300"  # (70 - 40) / 100
    assert SATURATED in by["faithfulness"][7] and SATURATED in by["holistic_completeness"][7]
    assert SATURATED not in by["structure"][7]
    # the CI is the leaderboard's: same per-cell seed
    vals = [_value("coverage", "alpha", i) for i in range(6)]
    mean, low, high = bootstrap_ci(vals, n_resamples=500, seed=cell_seed(0, "alpha", OVERALL, "coverage"))
    assert by["coverage"][2] == f"{mean:.3f} [{low:.3f}, {high:.3f}]"

    beta = _by_metric(_rows(_section(_page(rendered, "beta"), "## All families side by side")))
    assert beta["text_edit_distance"][3] == "2/2" and beta["faithfulness"][3] == "1/2"
    gold = _by_metric(_rows(_section(_page(rendered, "gold"), "## All families side by side")))
    assert gold["structure"][3] == "ref" and gold["structure"][4] == "`alpha` 0.800"


def test_separation_table_orders_by_spread_and_marks_saturation(rendered: tuple[Path, list[Path]]) -> None:
    alpha = _page(rendered, "alpha")
    rows = _rows(_section(alpha, "## Which axes separate systems"))
    order = [r[1].split("`")[1] for r in rows]
    assert order.index("structure") < order.index("rubric") < order.index("faithfulness")
    assert order[0] == "structure"
    by = _by_metric(rows)
    assert SATURATED in by["faithfulness"][-1] and SATURATED not in by["structure"][-1]
    assert (
        "saturation baseline" in by["holistic_completeness"][-1]
        and SATURATED in by["holistic_completeness"][-1]
    )
    assert "Holistic 1–10 scores are the saturation baseline" in _section(
        alpha, "## Which axes separate systems"
    )
    # the index carries the same table
    index_rows = _rows(_section(_page(rendered, "index"), "## Which axes separate systems"))
    assert [r[1].split("`")[1] for r in index_rows] == order


def test_failed_items_rubric_coverage_faithfulness(scores_dir: Path) -> None:
    render_system_reports(scores_dir, top_n=3)
    alpha = (scores_dir / "report" / "alpha.md").read_text(encoding="utf-8")
    rubric = _rows(_section(alpha, "### Rubric items"))
    assert rubric[0][:4] == ["`G1:g1_title_entity`", str(G1_FAILS), "6", "1/6"]  # beta failed it once
    assert rubric[1][:3] == ["`G2:g2_numbers`", str(G2_FAILS), "6"]
    assert "title lacks the company name" in rubric[0][5]
    assert len(rubric) == 2  # G0 never failed
    cov = _rows(_section(alpha, "### Gold units most often missed"))
    assert len(cov) == 1  # one unit text, missed in all six instances
    assert cov[0][1] == "6" and cov[0][3] == "0/6" and cov[0][6] == "Results > Revenue"
    assert cov[0][5].startswith("Revenue \\| grew 12%") and cov[0][5].endswith("…") and len(cov[0][5]) <= 202
    claims = _rows(_section(alpha, "### Lowest-supported claims"))
    assert len(claims) == 3  # top_n
    assert [c[1] for c in claims] == ["0.00", "0.10", "0.20"] and claims[0][3] == "support 0.0"


def test_pairwise_and_worst_instances(rendered: tuple[Path, list[Path]]) -> None:
    alpha = _page(rendered, "alpha")
    bt = _section(alpha, "## Pairwise preference (Bradley–Terry)")
    assert "Score 0.400 [0.100, 0.700]; rank 1 (rank CI 1–1)" in bt
    assert _rows(bt)[0][0] == "**alpha**"
    record = _rows(_section(alpha, "### Pairwise record"))
    assert record == [["`beta`", "3", "1", "1", "5", "0.70"]]
    worst = _rows(_section(alpha, "## Worst instances"))
    assert worst[0][0] == "inst4" and worst[0][1] == CATEGORY_LABELS[CATEGORY["inst4"]]
    assert worst[0][4] == "0.050 vs 0.480 (`beta`)"  # coverage column
    assert len(worst) <= 5


def test_safe_names_and_custom_out_dir(scores_dir: Path, tmp_path: Path) -> None:
    df = pd.read_parquet(scores_dir / "scores.parquet")
    df.loc[df["system"] == "beta", "system"] = "openai/gpt 4o|x"
    df.to_parquet(scores_dir / "scores.parquet", index=False)
    out = tmp_path / "pages"
    written = render_system_reports(scores_dir, out)
    assert safe_name("openai/gpt 4o|x") == "openai_gpt_4o_x"
    assert (out / "openai_gpt_4o_x.md").is_file() and (out / "openai_gpt_4o_x.html").is_file()
    assert all(p.parent == out for p in written)
    assert render_index(scores_dir, out) == [out / "index.md", out / "index.html"]


def test_missing_or_bad_scores_raise_clear_errors(tmp_path: Path, scores_dir: Path) -> None:
    with pytest.raises(FrameInputError, match=r"scores\.parquet: not found") as exc:
        render_system_reports(tmp_path / "nowhere")
    assert exc.value.where.endswith("scores.parquet")
    pd.read_parquet(scores_dir / "scores.parquet").drop(columns=["value"]).to_parquet(
        scores_dir / "scores.parquet", index=False
    )
    with pytest.raises(FrameInputError, match=r"scores\.parquet: lacks column\(s\) value"):
        render_system_reports(scores_dir)


# ------------------------------------------------------------------ index: order, dates, labels, plots


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "lxml")


def test_index_html_embeds_the_plots_and_links_the_files(rendered: tuple[Path, list[Path]]) -> None:
    folder, _ = rendered
    report = folder / "report"
    soup = _soup(report / "index.html")
    heading = soup.find("h2", id="trend-plots")
    assert heading is not None and heading.get_text() == "Trend plots"
    imgs = soup.find_all("img")
    assert len(imgs) == len(PLOTTED)
    for img, metric in zip(imgs, PLOTTED, strict=True):
        png = folder / "plots" / f"{metric}_vs_buckets.png"
        src = img["src"]
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == png.read_bytes()  # the file, embedded whole
        link = img.find_parent("a")["href"]
        assert link == f"../plots/{png.name}" and (report / link).resolve() == png.resolve()
        assert img.find_previous("h3").get_text() == metric
    # the Markdown page links the same files; a system page points to the index's plots
    assert f"](../plots/{PLOTTED[0]}_vs_buckets.png)" in (report / "index.md").read_text(encoding="utf-8")
    alpha = _soup(report / "alpha.html")
    assert alpha.find("a", href="index.html#trend-plots") is not None and not alpha.find_all("img")
    assert not (report / "plots").exists()  # pages inside the scores folder link its plots/, no copy


def test_pages_name_no_absolute_path(rendered: tuple[Path, list[Path]]) -> None:
    """The manifest holds an absolute release folder (older `frame score`): no page shows it, every
    link is relative, and the release reads name/version."""
    folder, written = rendered
    root = str(folder.parents[2])
    for page in written:
        text = page.read_text(encoding="utf-8")
        assert "/x/releases" not in text and root not in text and str(folder.resolve()) not in text, page
        if page.suffix == ".html":
            soup = BeautifulSoup(text, "lxml")
            refs = [a["href"] for a in soup.find_all("a", href=True)] + [
                i["src"] for i in soup.find_all("img")
            ]
            assert refs and all(
                not r.startswith("/") and (r.startswith("data:image/png;base64,") or "://" not in r)
                for r in refs
            ), page
            release = next(li for li in soup.find_all("li") if li.get_text().startswith("Release:"))
            assert release.get_text() == "Release: toy/0.1.0"


def test_pages_outside_the_scores_folder_get_their_own_plots(tmp_path: Path) -> None:
    folder = _build(tmp_path / "data")
    pngs = _add_plots(folder)
    out = tmp_path / "pages"
    render_index(folder, out)
    soup = _soup(out / "index.html")
    links = [img.find_parent("a")["href"] for img in soup.find_all("img")]
    assert links == [f"plots/{p.name}" for p in pngs]  # never a path that climbs out of `out`
    for link, png in zip(links, pngs, strict=True):
        assert (out / link).read_bytes() == png.read_bytes()
    for img, png in zip(soup.find_all("img"), pngs, strict=True):
        assert base64.b64decode(img["src"].split(",", 1)[1]) == png.read_bytes()
    # no plots folder: the section says so, nothing embedded
    bare = _build(tmp_path / "bare")
    render_index(bare)
    assert "_No trend plots in the scores folder (plots/)._" in (bare / "report" / "index.md").read_text(
        encoding="utf-8"
    )
    assert not _soup(bare / "report" / "index.html").find_all("img")


def test_dates_are_real_timestamps(scores_dir: Path) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    render_system_reports(scores_dir)
    after = dt.datetime.now(dt.UTC)
    for name in ("index", "alpha"):
        text = (scores_dir / "report" / f"{name}.md").read_text(encoding="utf-8")
        assert "- Scores computed: 2026-01-02T03:04:05Z\n" in text
        stamp = re.search(r"^- Report generated: (\S+)$", text, re.M).group(1)
        assert before <= dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")) <= after
        assert "not recorded" not in text
    # the manifest records no time: the time scores.parquet was written, said as such
    manifest = json.loads((scores_dir / "manifest.json").read_text(encoding="utf-8"))
    del manifest["generated_at"]
    (scores_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    render_index(scores_dir)
    mtime = dt.datetime.fromtimestamp((scores_dir / "scores.parquet").stat().st_mtime, dt.UTC)
    text = (scores_dir / "report" / "index.md").read_text(encoding="utf-8")
    expected = mtime.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    assert f"- Scores computed: {expected} (when scores.parquet was written" in text


def test_category_labels_are_the_release_cards(rendered: tuple[Path, list[Path]]) -> None:
    alpha = _page(rendered, "alpha")
    header = [ln for ln in _section(alpha, "## Per category").splitlines() if ln.startswith("|")][0]
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells == ["Metric", "Overall", "Financial, annual (10-K)", "Academic, simple"]
    assert cells[2:] == [CATEGORY_LABELS["financial_annual"], CATEGORY_LABELS["academic_simple"]]
    index = _page(rendered, "index")
    assert "(2 categories: Financial, annual (10-K), Academic, simple)" in index
    assert "financial_annual" not in alpha + index


def test_index_lists_systems_in_leaderboard_order(scores_dir: Path) -> None:
    """gold first, then by FRAME score (best first), whatever the manifest's or the names' order."""
    df = pd.read_parquet(scores_dir / "scores.parquet")
    df["system"] = df["system"].replace({"alpha": "zeta"})
    df.to_parquet(scores_dir / "scores.parquet", index=False)
    manifest = json.loads((scores_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["systems"] = ["beta", "zeta", "gold"]
    (scores_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    render_index(scores_dir)
    rows = _rows(_section(_page((scores_dir, []), "index"), "## Systems"))
    assert [r[0] for r in rows] == ["[gold](gold.md)", "[zeta](zeta.md)", "[beta](beta.md)"]
    ps = primary_scores(df, seed=0, n_resamples=500).set_index(["system", "scope"])
    z = ps.loc[("zeta", OVERALL)]
    assert rows[1][1] == f"{z['mean']:.3f} [{z['ci_low']:.3f}, {z['ci_high']:.3f}]"
