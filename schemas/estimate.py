"""What a build or a scoring run would cost before anything is sent (`--dry-run`).

An `Estimate` is rows of (role or system, model, requests, input/output tokens, USD, basis). `basis` says
how a row was obtained: "counted" (o200k_base counts of prompts rendered from what is on disk), or
"estimated from <reference> (...)" (figures of a reference release standing in for what does not exist
yet). `render_markdown()` prints it; `table()` gives header + rows for a rich table.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from schemas.config import ModelPrice

__all__ = ["COUNTED", "Estimate", "EstimateRow", "EstimateTotals", "usd"]

COUNTED = "counted"


def usd(
    model: str, input_tokens: float, output_tokens: float, prices: Mapping[str, ModelPrice]
) -> float | None:
    """Cost at `prices[model]` (USD per million tokens); None when the model has no price."""
    price = prices.get(model)
    if price is None:
        return None
    return round((input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6, 6)


class EstimateRow(BaseModel):
    """One role (build: structure_free, questions, ...; scoring: a judge role) or one generating system."""

    role: str = Field(description="LLM role (prompt name) or system name")
    kind: str = Field(default="role", description="'role' for an LLM role, 'system' for a generating system")
    model: str
    requests: int = Field(ge=0)
    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    usd: float | None = Field(default=None, description="None when [prices] has no entry for the model")
    basis: str = COUNTED
    note: str = ""


class EstimateTotals(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    usd: float | None  # None when some row with tokens has no price


class Estimate(BaseModel):
    title: str
    rows: list[EstimateRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def totals(self) -> EstimateTotals:
        priced = [r.usd for r in self.rows if r.requests or r.input_tokens or r.output_tokens]
        return EstimateTotals(
            requests=sum(r.requests for r in self.rows),
            input_tokens=sum(r.input_tokens for r in self.rows),
            output_tokens=sum(r.output_tokens for r in self.rows),
            usd=None if any(u is None for u in priced) else round(sum(u or 0.0 for u in priced), 6),
        )

    def by_role(self) -> dict[str, EstimateTotals]:
        """Rows of the same role (counted and estimated parts) added up."""
        out: dict[str, EstimateTotals] = {}
        for role in dict.fromkeys(r.role for r in self.rows):
            part = Estimate(title="", rows=[r for r in self.rows if r.role == role])
            out[role] = part.totals
        return out

    def table(self) -> list[list[str]]:
        """Header row, one row per estimate row, then the total (strings, for a rich or Markdown table)."""
        head = ["role / system", "model", "requests", "input tokens", "output tokens", "USD", "basis"]
        body = [
            [
                r.role,
                r.model,
                f"{r.requests:,}",
                f"{r.input_tokens:,}",
                f"{r.output_tokens:,}",
                _money(r.usd),
                r.basis + (f"; {r.note}" if r.note else ""),
            ]
            for r in self.rows
        ]
        t = self.totals
        total = [
            "total",
            "",
            f"{t.requests:,}",
            f"{t.input_tokens:,}",
            f"{t.output_tokens:,}",
            _money(t.usd),
            "",
        ]
        return [head, *body, total]

    def render_markdown(self) -> str:
        head, *rows = self.table()
        lines = [f"## {self.title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        if self.notes:
            lines += ["", *[f"- {n}" for n in self.notes]]
        return "\n".join(lines) + "\n"


def _money(v: float | None) -> str:
    return "n/a (no price)" if v is None else f"${v:,.2f}"
