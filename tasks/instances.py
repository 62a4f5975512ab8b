"""Benchmark instances (S, G, Y) by a sliding window over a domain's ordered snapshots, and the
per-category statistics of paper 000 Table 1."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from tasks.markdown.document import heading_of
from tasks.markdown.tables import markdown_tables

STEP_SEP = "->"


def instance_id(category: str, domain: str, t: str, t_next: str) -> str:
    return f"{category}/{domain}/{t}{STEP_SEP}{t_next}"


def report_shape(markdown: str) -> dict[str, int]:
    """Sections (## / ### headings) and tables of a report."""
    heads = (heading_of(ln, "none", "one") for ln in markdown.splitlines())
    sections = sum(1 for h in heads if h and h.level in (2, 3))
    return {"sections": sections, "tables": len(markdown_tables(markdown))}


def make_instances(
    category: str,
    domain: str,
    snapshots: list[str],
    reports: dict[str, dict],
    grounding: dict[str, list[str]],
    periods_skipped: Callable[[str, str], int] = lambda t, t_next: 0,
) -> list[dict]:
    """N ordered snapshots -> N-1 instances (R_t, D_t+1, R_t+1), each marked with the number of source
    periods between t and t+1 (`periods_skipped(t, t_next)`; 0: consecutive). A pair across a gap is
    kept, marked: the leaderboard's headline scopes leave it out."""
    rows = []
    for t, t_next in zip(snapshots, snapshots[1:], strict=False):
        rows.append(
            {
                "instance_id": instance_id(category, domain, t, t_next),
                "category": category,
                "domain": domain,
                "t_sample": t,
                "t_target": t_next,
                "periods_skipped": int(periods_skipped(t, t_next)),
                "sample_report_id": f"{domain}/{t}",
                "target_report_id": f"{domain}/{t_next}",
                "grounding_set_id": f"{domain}/{t_next}",
                "grounding_doc_ids": list(grounding[t_next]),
                "sample_markdown": reports[t]["markdown"],
                "target_markdown": reports[t_next]["markdown"],
            }
        )
    return rows


def category_stats(
    instances: list[dict], reports: dict[str, dict], gsets: dict[str, list[dict]]
) -> list[dict]:
    """Per category: mean (and max tokens) of G files/tokens/tables/images and S/Y tokens/sections/tables.

    `reports` is keyed by report id, `gsets` by grounding set id (rows of grounding_documents).
    """
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for inst in instances:
        by_cat[inst["category"]].append(inst)
    out = []
    for cat in sorted(by_cat):
        rows = by_cat[cat]
        g = [gsets[r["grounding_set_id"]] for r in rows]
        s = [reports[r["sample_report_id"]] for r in rows]
        y = [reports[r["target_report_id"]] for r in rows]

        def mean(xs: list[float]) -> float:
            return round(sum(xs) / len(xs), 2) if xs else 0.0

        out.append(
            {
                "category": cat,
                "instances": len(rows),
                "g_files_mean": mean([len(d) for d in g]),
                "g_tokens_mean": mean([sum(x["tokens"] for x in d) for d in g]),
                "g_tokens_max": float(max(sum(x["tokens"] for x in d) for d in g)),
                "g_tables_mean": mean([sum(x["tables"] for x in d) for d in g]),
                "g_images_mean": mean([sum(x["images"] for x in d) for d in g]),
                "s_tokens_mean": mean([r["tokens"] for r in s]),
                "s_tokens_max": float(max(r["tokens"] for r in s)),
                "s_sections_mean": mean([r["sections"] for r in s]),
                "s_tables_mean": mean([r["tables"] for r in s]),
                "y_tokens_mean": mean([r["tokens"] for r in y]),
                "y_tokens_max": float(max(r["tokens"] for r in y)),
                "y_sections_mean": mean([r["sections"] for r in y]),
                "y_tables_mean": mean([r["tables"] for r in y]),
            }
        )
    return out
