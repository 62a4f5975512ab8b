"""The diagnostic pages as files: each system's page and the index (leaderboard order, trend plots), in
Markdown and self-contained HTML (``render_system_reports``, ``render_index``).
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
from pathlib import Path

import markdown as markdown_lib

from tasks.atomic import atomic_write_bytes, atomic_write_text
from tasks.errors import FrameInputError
from tasks.score import registry
from tasks.score.diagnostic.analysis import GOLD, _Cell, _Stats, _stats
from tasks.score.diagnostic.failures import _failures_section
from tasks.score.diagnostic.formatting import (
    _category,
    _ci,
    _ci_note,
    _dates,
    _fmt_cell,
    _page_names,
    _release_label,
    _table,
    _txt,
)
from tasks.score.diagnostic.load import _Folder, _load
from tasks.score.diagnostic.sections import (
    _category_section,
    _families_section,
    _header,
    _pairwise_section,
    _separation_section,
    _worst_section,
)
from tasks.score.leaderboard import (
    OVERALL,
    PRIMARY_LABEL,
    metric_order,
    primary_scores,
)

PLOT_SUFFIX = "_vs_buckets.png"


_LOCAL_MD_LINK = re.compile(r'href="([^":/?#]+)\.md(#[^"]*)?"')
_IMG_SRC = re.compile(r'(<img\b[^>]*\bsrc=")([^"]+)(")')
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1280px;
padding:0 1rem;color:#1d1d1f;line-height:1.45;font-size:15px}
h1{font-size:1.6rem;border-bottom:2px solid #ddd;padding-bottom:.3rem}h2{margin-top:2rem;font-size:1.25rem}
h3{font-size:1.05rem}table{border-collapse:collapse;margin:.6rem 0 1rem;display:block;overflow-x:auto}
th,td{border:1px solid #d8d8d8;padding:3px 8px;vertical-align:top;font-size:.88rem}
th{background:#f2f2f4}tbody tr:nth-child(even){background:#fafafa}code{background:#f2f2f4;padding:0 3px}
a{color:#0a58ca}em{color:#555}img{max-width:100%;height:auto;border:1px solid #eee}
""".strip()


def _system_markdown(folder: _Folder, st: _Stats, system: str, top_n: int) -> str:
    lines = (
        _header(folder, st, system)
        + _families_section(st, system)
        + _separation_section(st, system)
        + _category_section(st, system)
        + _failures_section(folder, st, system, top_n)
        + _pairwise_section(folder, st, system)
        + _worst_section(folder, st, system)
    )
    return "\n".join(lines).rstrip() + "\n"


def _leaderboard_order(folder: _Folder, st: _Stats) -> tuple[list[str], dict[str, str], str]:
    """The systems as the leaderboard orders them (gold first, then by primary score, best first), each
    one's primary score as "mean [low, high]", and the name of that score."""
    try:
        ps = primary_scores(folder.scores, seed=st.seed, n_resamples=st.n_resamples)
    except ValueError:  # values outside a metric's range: the leaderboard refuses them too
        return list(st.systems), {}, ""
    info = ps.attrs["primary"]
    if info["composite"]:
        ov = ps[ps["scope"] == OVERALL]
        cells = {str(r.system): _Cell(r.mean, r.ci_low, r.ci_high, int(r.n)) for r in ov.itertuples()}
        lower, fmt = False, info["metrics"][0]  # FRAME's metrics all lie in [0, 1]: format as any
    else:
        metric = info["metrics"][0] if info["metrics"] else ""
        cells = {s: c for (s, m), c in st.cells.items() if m == metric}
        lower, fmt = metric in registry.lower_is_better(), metric

    def key(s: str) -> tuple[bool, bool, float, str]:
        v = cells[s].mean if s in cells else math.nan
        return (s != GOLD, math.isnan(v), 0.0 if math.isnan(v) else (v if lower else -v), s)

    text = {s: _ci(fmt, c) for s, c in cells.items() if not math.isnan(c.mean)}
    return sorted(st.systems, key=key), text, str(info["label"])


def _plot_files(folder: _Folder) -> list[Path]:
    """The trend plots of the scores folder in metric order (the manifest's list when it has one)."""
    plots = folder.path / "plots"
    listed = [str(n) for n in folder.manifest.get("plots") or []]
    names = [n for n in listed if (plots / n).is_file() and "/" not in n and "\\" not in n]
    if not names and plots.is_dir():
        by_metric = {p.name[: -len(PLOT_SUFFIX)]: p.name for p in plots.glob(f"*{PLOT_SUFFIX}")}
        names = [by_metric[m] for m in metric_order(by_metric)]
    return [plots / n for n in names]


def _plot_links(folder: _Folder, out: Path) -> dict[str, Path]:
    """{link as written in the pages: PNG file} of the trend plots. Pages inside the scores folder link
    to its plots/ folder; pages elsewhere get a copy of the PNGs in their own plots/ folder, so a link
    never climbs out of the output folder (nor names a folder of the machine)."""
    out_abs, scores_abs = out.resolve(), folder.path.resolve()
    links = {}
    for png in _plot_files(folder):
        if out_abs.is_relative_to(scores_abs):
            links[Path(os.path.relpath(png.resolve(), out_abs)).as_posix()] = png
        else:
            copy = atomic_write_bytes(out / "plots" / png.name, png.read_bytes())
            links[f"plots/{png.name}"] = copy
    return links


def _plots_section(links: dict[str, Path]) -> list[str]:
    out = ["## Trend plots", ""]
    if not links:
        return out + ["_No trend plots in the scores folder (plots/)._", ""]
    out += [
        "Per metric, the mean of each system against buckets of gold report length, grounding length "
        "and table count, with bands of the 95% bootstrap CI. The HTML page embeds the images; each "
        "links to its PNG file.",
        "",
    ]
    for link, png in links.items():
        metric = png.name[: -len(PLOT_SUFFIX)] if png.name.endswith(PLOT_SUFFIX) else png.stem
        out += [f"### {_txt(metric, None)}", "", f"[![{_txt(metric, None)} trend plot]({link})]({link})", ""]
    return out


def _index_markdown(folder: _Folder, st: _Stats, names: dict[str, str], links: dict[str, Path]) -> str:
    df = folder.scores
    cats = ", ".join(_category(c) for c in st.categories)
    lines = [
        "# FRAME diagnostic reports",
        "",
        f"- Release: {_release_label(folder)}",
        f"- Instances: {df['instance_id'].nunique()} ({len(st.categories)} categories"
        + (f": {cats}" if cats else "")
        + f"), metrics: {len(st.metrics)}",
        *_dates(folder),
        f"- {_ci_note(st)}",
        "",
        "## Systems",
        "",
    ]
    order, primary, label = _leaderboard_order(folder, st)
    if label:
        what = f"{label} (mean of the FRAME metrics scored)" if label == PRIMARY_LABEL else f"`{label}`"
        lines += [f"In leaderboard order: `{GOLD}` (the ceiling) first, then by {what}, best first.", ""]
    bt = folder.bt.set_index("system") if folder.bt is not None else None
    rows = []
    for s in order:
        first = sum(1 for m in st.metrics if st.ranks.get((s, m)) == 1)
        best_on = "reference" if s == GOLD and s not in st.competitors else f"{first}/{len(st.metrics)}"
        row = [
            f"[{_txt(s, None)}]({names[s]}.md)",
            primary.get(s, "–"),
            str(df.loc[df["system"] == s, "instance_id"].nunique()),
            best_on,
        ]
        if bt is not None:
            row.append(_fmt_cell(bt.loc[s, "rank"]) if s in bt.index and "rank" in bt.columns else "–")
        rows.append(row)
    headers = ["System", f"{label or 'Primary score'} [95% CI]", "Instances", "Ranked first on"]
    headers += ["Bradley–Terry rank"] if bt is not None else []
    lines += _table(headers, rows, "lrrrr")
    lines += _separation_section(st, None)
    lines += _plots_section(links)
    return "\n".join(lines).rstrip() + "\n"


def _data_uri(png: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def _html_page(title: str, markdown_text: str, images: dict[str, Path] | None = None) -> str:
    """The page as self-contained HTML: links between pages point to the .html files, and each image
    whose src is a key of ``images`` is embedded as a data: URI (its link still points to the file)."""
    body = markdown_lib.markdown(markdown_text, extensions=["tables", "toc"], output_format="html")
    body = _LOCAL_MD_LINK.sub(r'href="\1.html\2"', body)  # the HTML pages link to each other
    embedded = {html.escape(k, quote=True): v for k, v in (images or {}).items()}

    def embed(m: re.Match) -> str:
        png = embedded.get(m.group(2))
        return m.group(0) if png is None else m.group(1) + _data_uri(png) + m.group(3)

    body = _IMG_SRC.sub(embed, body)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}\n</style>\n</head>\n<body>\n"
        f"{body}\n</body>\n</html>\n"
    )


def _write_pair(
    out_dir: Path, stem: str, title: str, text: str, images: dict[str, Path] | None = None
) -> list[Path]:
    md_path = atomic_write_text(out_dir / f"{stem}.md", text)
    html_path = atomic_write_text(out_dir / f"{stem}.html", _html_page(title, text, images))
    return [md_path, html_path]


def _write_index(folder: _Folder, st: _Stats, out: Path, names: dict[str, str]) -> list[Path]:
    links = _plot_links(folder, out)
    text = _index_markdown(folder, st, names, links)
    return _write_pair(out, "index", "FRAME diagnostic reports", text, links)


def _check_top_n(top_n: int) -> None:
    if int(top_n) < 1:
        raise FrameInputError("top_n", f"must be >= 1, got {top_n}")


def render_index(
    scores_dir: Path,
    out_dir: Path | None = None,
    *,
    seed: int | None = None,
    n_resamples: int | None = None,
) -> list[Path]:
    """Write ``index.md`` and ``index.html`` (systems with links to their pages, and the axes that
    separate systems) into ``out_dir`` (default ``scores_dir/report``); returns the two paths."""
    folder = _load(Path(scores_dir))
    st = _stats(folder, seed, n_resamples)
    out = Path(out_dir) if out_dir is not None else folder.path / "report"
    return _write_index(folder, st, out, _page_names(st.systems))


def render_system_reports(
    scores_dir: Path,
    out_dir: Path | None = None,
    top_n: int = 10,
    *,
    seed: int | None = None,
    n_resamples: int | None = None,
) -> list[Path]:
    """Write ``<system>.md`` / ``<system>.html`` per system of ``scores_dir/scores.parquet`` and
    ``index.md`` / ``index.html`` into ``out_dir`` (default ``scores_dir/report``); returns the paths
    written (system pages in system order, then the index).

    ``top_n`` bounds each table of failed items; ``seed`` and ``n_resamples`` default to the manifest's
    settings (seed, bootstrap), else 0 and 2000. Raises FrameInputError when scores.parquet is missing,
    unreadable or lacks columns (or another present file is malformed)."""
    _check_top_n(top_n)
    folder = _load(Path(scores_dir))
    st = _stats(folder, seed, n_resamples)
    out = Path(out_dir) if out_dir is not None else folder.path / "report"
    names = _page_names(st.systems)
    written: list[Path] = []
    for system in st.systems:
        text = _system_markdown(folder, st, system, int(top_n))
        written += _write_pair(out, names[system], f"{system}: diagnostic report", text)
    written += _write_index(folder, st, out, names)
    return written
