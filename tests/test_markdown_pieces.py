"""tasks.markdown.pieces (a report as sentences and table rows) and tasks.markdown.chunks (token-bounded
parts for LLM requests)."""

from __future__ import annotations

from tasks.markdown.chunks import Atom, atoms, pack, section_of, size, split_oversized
from tasks.markdown.pieces import cells, clean, markdown_pieces, md_blocks, numbers, strong_numbers
from tasks.tokens import count_tokens

REPORT = """# Acme Corp Q3

Intro sentence about the quarter. Second sentence here.

## Results

---

- Revenue was $1.2 billion. Costs rose.
  continued item text
- Another item with words

| | Three Months Ended | |
|---|---|---|
| | June 28, 2025 | June 29, 2024 |
| Net sales: | | |
| Products | 1,200 | 1,100 |

```
# not a heading
```

### Outlook

![A chart of **sales**](chart.png)
"""


def test_blocks_keep_the_title_out_of_heading_paths_and_drop_rules():
    blocks = md_blocks(REPORT)
    kinds = [b.kind for b in blocks]
    assert kinds == ["title", "text", "heading", "list", "table", "code", "heading", "figure"]
    assert blocks[1].path == ()
    assert blocks[3].path == ("Results",)
    assert blocks[-1].path == ("Results", "Outlook")
    assert blocks[5].raw == "```\n# not a heading\n```"


def test_pieces_cut_sentences_items_rows_and_captions():
    pieces = markdown_pieces(REPORT)
    texts = [p.text for p in pieces]
    assert texts[:2] == ["Intro sentence about the quarter.", "Second sentence here."]
    assert "Revenue was $1.2 billion." in texts
    # a full stop then a lower-case start cuts too (tasks.markdown.text.split_sentences): a fragment
    # broken off its lead-in is a piece of its own
    assert texts[texts.index("Costs rose.") + 1] == "continued item text"
    row = next(p for p in pieces if p.kind == "row")
    # two header rows joined per column; the label-only row "Net sales:" is the row's context
    assert row.text == (
        "Net sales: Products | Three Months Ended June 28, 2025: 1,200; "
        "Three Months Ended June 29, 2024: 1,100"
    )
    assert [n.text for n in row.numbers] == ["1,200", "1,100"]
    assert pieces[-1].kind == "caption" and pieces[-1].text == "A chart of sales"
    assert pieces[-1].section == "Results > Outlook"


def test_cells_clean_and_numbers():
    assert cells("| [a](x) | **b** |") == ["a", "b"]
    assert clean("  <b>x</b>   `y` ") == "x y"
    assert [n.text for n in numbers("income(1) rose 12% at Level 2")] == ["12%"]
    text = "In 2024 (see Table 3) sales were 4,500 on June 28,2025"
    assert [n.text for n in strong_numbers(text)] == ["4,500"]


def test_chunks_keep_everything_within_the_limit():
    text = "\n".join(f"| row {i} | {i * 1000} |" for i in range(60))
    table = "| a | b |\n|---|---|\n" + text
    parts = split_oversized(table, 80, "table")
    assert len(parts) > 1 and all(p.startswith("| a | b |\n|---|---|") for p in parts)
    got = atoms(REPORT, 30)
    assert all(a.tokens <= 30 for a in got if a.text.count(" ") > 1)
    chunks = pack(got, 60, (lambda a: a.top, lambda a: a.flat))
    assert [a for c in chunks for a in c] == got


def test_pack_puts_an_atom_over_the_limit_in_a_chunk_of_its_own():
    big = Atom("x " * 50, (), 0, 0, count_tokens("x " * 50))
    small = Atom("y", (), 0, 0, 1)
    chunks = pack([small, big, small], big.tokens, ())
    assert chunks == [[small], [big], [small]]
    assert size([small]) == 2


def test_section_of_finds_the_atom_holding_a_sentence():
    chunk = atoms(REPORT, 200)
    assert section_of(chunk, "Another item with WORDS") == "Results"
    assert section_of(chunk, "not in the report") == next(" > ".join(a.path) for a in chunk if a.path)
