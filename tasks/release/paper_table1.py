"""Paper 000 (FRAME) Table 1, the report-length figures: per category, the mean tokens (`o200k_base`),
sections and tables of the sample report S and the gold report Y over its 30 instances. The one place
frame holds them; the release card sets a release's own Y beside them (tasks/release/card.py)."""

from __future__ import annotations

SOURCE = "paper 000 Table 1"

# category: (S tokens, S sections, S tables, Y tokens, Y sections, Y tables), as printed in Table 1
PAPER_000_TABLE1: dict[str, tuple[float, float, float, float, float, float]] = {
    "financial_quarterly": (9_100, 12.5, 12.2, 8_800, 12.5, 12.2),
    "financial_annual": (22_100, 18.9, 33.7, 22_400, 19.1, 32.6),
    "academic_simple": (21_600, 19.1, 8.2, 22_600, 18.8, 8.6),
    "academic_complex": (19_300, 21.8, 7.1, 20_800, 22.0, 7.4),
}


def gold_against_paper(stats_rows: list[dict]) -> list[dict]:
    """Per category of `stats_rows` that the paper has: frame's mean Y tokens/sections/tables, the paper's,
    and frame / paper (the ratio)."""
    out = []
    for r in stats_rows:
        paper = PAPER_000_TABLE1.get(str(r.get("category")))
        if paper is None:
            continue
        row: dict = {"category": r["category"]}
        for key, ref in zip(("y_tokens_mean", "y_sections_mean", "y_tables_mean"), paper[3:], strict=True):
            ours = float(r.get(key) or 0.0)
            row[key] = (ours, ref, ours / ref if ref else None)
        out.append(row)
    return out
