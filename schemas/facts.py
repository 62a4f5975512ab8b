"""The iXBRL facts table (facts.parquet): one row per ix:nonFraction / ix:nonNumeric element."""

from __future__ import annotations

import pyarrow as pa

FACTS_SCHEMA = pa.schema(
    [
        pa.field("fact_id", pa.string()),  # the element's id attribute ("" when absent)
        pa.field("concept", pa.string(), nullable=False),  # e.g. us-gaap:Revenues
        pa.field("fact_type", pa.string(), nullable=False),  # nonFraction | nonNumeric
        pa.field("context_id", pa.string()),
        pa.field("period_start", pa.string()),  # ISO dates; instant facts leave start/end empty
        pa.field("period_end", pa.string()),
        pa.field("period_instant", pa.string()),
        pa.field("dimensions", pa.string()),  # JSON object {axis: member}, "{}" when none
        pa.field("unit", pa.string()),  # e.g. iso4217:USD, iso4217:USD/xbrli:shares
        pa.field("decimals", pa.string()),
        pa.field("scale", pa.int32()),
        pa.field("sign", pa.string()),  # "-" when the displayed value is negated
        pa.field("format", pa.string()),
        pa.field("displayed_text", pa.string(), nullable=False),  # what the reader sees
        pa.field("value", pa.float64()),  # numeric value after format, scale and sign
        pa.field("hidden", pa.bool_(), nullable=False),  # inside ix:hidden (not displayed)
    ]
)
