"""The Markdown document model: line readers (headings, fences, table rows, images) and `parse`, which
cuts a text into blocks with 1-based line numbers, heading paths, table cells and list items.

Every heading pattern of the code base is defined here. Where the old readers disagreed, the
parameters keep each one's reading (see `heading_of`, `Fences`, `parse`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal, NamedTuple

__all__ = [
    "HEADING",
    "Block",
    "Document",
    "Fences",
    "Heading",
    "Item",
    "Table",
    "code_mask",
    "fence_of",
    "hash_line",
    "heading_of",
    "headings",
    "image_of",
    "inline_text",
    "is_figure",
    "is_heading",
    "is_separator",
    "is_table_row",
    "markdown_plain",
    "parse",
    "split_lines",
    "split_row",
    "title",
    "title_block",
]

# ---------------------------------------------------------------- heading lines

Indent = Literal["none", "spaces", "blank"]  # before the #'s: nothing / up to 3 spaces / up to 3 of any blank
Space = Literal["any", "tabs", "one"]  # after the #'s: any blank run / spaces and tabs / one space
Text = Literal["any", "char", "word"]  # what must follow: anything / a character / a non-blank character

# The readers disagreed on the details of an ATX heading line; each keeps its reading (indent / space /
# text / closing #'s stripped):
#   spaces / any  / any  / yes   the default (CommonMark-like): tasks/score tree, coverage, rubric, holistic
#   none   / any  / any  / yes   retrieval passages (tasks/synthesize/retrieve)
#   blank  / any  / any  / yes   offline fill sanitising; blank / any / char: the LLM document digest
#   none   / one  / any  / -     skeleton lines (outline, validate, instances); with closing kept: paper tests
#   none   / tabs / word / -     a heading of a generated report (generate)
_INDENT = {"none": "", "spaces": " {0,3}", "blank": r"\s{0,3}"}
_SPACE = {"any": r"\s+", "tabs": r"[ \t]+", "one": " "}
_TEXT = {"any": ("(.*?)", "(.*)"), "char": ("(.+?)", "(.+)"), "word": (r"(?=\S)(.*?)", r"(?=\S)(.*)")}


class Heading(NamedTuple):
    level: int
    title: str


@cache
def _heading_re(indent: Indent, space: Space, text: Text, closing: bool) -> re.Pattern[str]:
    lazy, greedy = _TEXT[text]
    tail = rf"{lazy}\s*#*\s*$" if closing else f"{greedy}$"
    return re.compile(f"^{_INDENT[indent]}(#{{1,6}}){_SPACE[space]}{tail}")


HEADING = _heading_re("spaces", "any", "any", True)  # ^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$


def heading_of(
    line: str, indent: Indent = "spaces", space: Space = "any", text: Text = "any", closing: bool = True
) -> Heading | None:
    """(level, title) of an ATX heading line, else None. `closing=False` keeps the rest of the line as it
    is written (closing #'s and trailing blanks included)."""
    m = _heading_re(indent, space, text, closing).match(line)
    return Heading(len(m.group(1)), m.group(2)) if m else None


def is_heading(line: str, indent: Indent = "spaces", space: Space = "any", text: Text = "any") -> bool:
    return _heading_re(indent, space, text, True).match(line) is not None


def hash_line(line: str) -> bool:
    """The widest reading: the line's first character after spaces and tabs is '#' (even '#tag'); for
    refusing any line that might render as a heading."""
    return line.lstrip(" \t").startswith("#")


# ---------------------------------------------------------------- code fences

Fences = Literal["commonmark", "lenient", "prefix", "any-fence", "backticks"]
# How a fenced code block opens / closes (the readers disagreed; each keeps its reading):
#   commonmark  ``` or ~~~ (3+) after up to 3 spaces / the same character, at least as long, nothing after
#   lenient     as commonmark, but the closing run may carry text (tasks/score/faithfulness)
#   prefix      as commonmark / any line whose stripped text starts with the opening run (coverage, tree)
#   any-fence   as commonmark but after up to 3 blanks of any kind / any fence line of the same character
#               (generate/baselines)
#   backticks   a line whose stripped text starts with ``` / the next such line (retrieve, latexml_source)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FENCE_BLANK = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def fence_of(line: str, fences: Fences = "commonmark") -> str | None:
    """The opening run of a fence line (e.g. "```" or "~~~~"), else None."""
    if fences == "backticks":
        return "```" if line.strip().startswith("```") else None
    m = (_FENCE_BLANK if fences == "any-fence" else _FENCE).match(line)
    return m.group(1) if m else None


def _closes(line: str, mark: str, fences: Fences) -> bool:
    if fences in ("prefix", "backticks"):
        return line.strip().startswith(mark)
    run = fence_of(line, fences)
    if run is None or run[0] != mark[0]:
        return False
    if fences == "any-fence":
        return True
    return len(run) >= len(mark) and (fences == "lenient" or not line.strip()[len(run) :].strip())


def code_mask(lines: Sequence[str], fences: Fences = "commonmark") -> list[bool]:
    """Per line: whether it is a fence line or inside a fenced code block (an unclosed fence runs on)."""
    out: list[bool] = []
    mark: str | None = None
    for line in lines:
        if mark is None:
            mark = fence_of(line, fences)
            out.append(mark is not None)
        else:
            out.append(True)
            if _closes(line, mark, fences):
                mark = None
    return out


# ---------------------------------------------------------------- tables, images, inline text

_SEP = {n: re.compile(rf"^\s*\|?\s*:?-{{{n},}}:?\s*(\|\s*:?-{{{n},}}:?\s*)*\|?\s*$") for n in (1, 3)}
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def is_table_row(line: str) -> bool:
    """A line that starts (after blanks) with a pipe."""
    return line.lstrip().startswith("|")


def is_separator(line: str, dashes: Literal[1, 3] = 3) -> bool:
    """A table's delimiter row (|---|:--:|); the scorers accept one dash per cell, the others three."""
    return _SEP[dashes].match(line) is not None


def split_row(line: str) -> list[str]:
    """The cells of a pipe-table row as written (stripped; an escaped \\| stays escaped)."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return [c.strip() for c in _CELL_SPLIT.split(s)]


Images = Literal["strict", "whole", "start"]
# strict: `![alt](src "title")` alone on its line (tree); whole: `![alt](anything)` alone on its line
# (coverage); start: any line starting with `![` (rubric, retrieval passages)
_IMAGE = re.compile(r"^\s*!\[([^\]]*)\]\(([^)\s]*)(?:\s+\"([^\"]*)\")?\)\s*$")
_IMAGE_WHOLE = re.compile(r"^\s*!\[([^\]]*)\]\([^)]*\)\s*$")


def image_of(line: str) -> tuple[str, str, str] | None:
    """(alt, src, title) of a line that is one image `![alt](src "title")`, else None."""
    m = _IMAGE.match(line)
    return (m.group(1), m.group(2), m.group(3) or "") if m else None


def is_figure(line: str, images: Images = "start") -> bool:
    if images == "start":
        return line.strip().startswith("![")
    return (_IMAGE if images == "strict" else _IMAGE_WHOLE).match(line) is not None


_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"[*_`]+|<[^>]+>")


def inline_text(text: str) -> str:
    """Text without inline markup: links/images -> their text, * _ ` runs and tags dropped, blanks folded."""
    return " ".join(_MARKUP.sub("", _LINK.sub(r"\1", text)).split())


_PLAIN_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_PLAIN_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$", re.M)
_PLAIN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.M)
_PLAIN_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+", re.M)


def markdown_plain(markdown: str) -> str:
    """Markdown with its syntax taken out (table pipes and separator rows, heading #, list markers,
    image syntax -> alt text), so what is left is the document's words."""
    text = _PLAIN_IMAGE.sub(r" \1 ", markdown)
    text = _PLAIN_SEP.sub(" ", text)
    text = _PLAIN_HEADING.sub("", text)
    text = _PLAIN_LIST.sub("", text)
    text = _CELL_SPLIT.sub(" ", text)
    return text.replace("\\|", "|")


# ---------------------------------------------------------------- the document model

Kind = Literal["heading", "paragraph", "list", "table", "figure", "code", "math", "rule"]
Reading = Literal["commonmark", "passages"]


class Item(NamedTuple):
    line: int  # 1-based line of the item's marker
    text: str  # marker removed; indented continuation lines appended after one space


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]  # cells of the first row (split_row)
    rows: tuple[tuple[str, ...], ...]  # the rows after the delimiter row; row i is on line start + 2 + i


@dataclass(frozen=True)
class Block:
    kind: Kind
    start: int  # 1-based line of the first line
    lines: tuple[str, ...]
    level: int = 0  # headings
    title: str = ""  # headings: heading_of(...).title, as written (no inline clean-up)
    path: tuple[str, ...] = ()  # titles of the headings above, outermost first
    parents: tuple[int, ...] = ()  # their indexes in Document.blocks
    closed: bool = True  # code and math: the closing fence / $$ was found
    table: Table | None = None
    items: tuple[Item, ...] = ()  # lists

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Document:
    lines: tuple[str, ...]
    blocks: tuple[Block, ...]

    @property
    def headings(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "heading"]

    @property
    def tables(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "table"]

    @property
    def title(self) -> str:
        """The report's title (`title_block`), markup removed ("" without one)."""
        head = title_block(self.blocks)
        return inline_text(head.title) if head is not None else ""


def title_block(blocks: Sequence[Block]) -> Block | None:
    """The block that titles a report, the one reading every family shares: the report's first block when
    it is an H1; horizontal rules before it do not count (blank lines are no blocks). An H1 after any other
    heading or content is not the title but a heading like the others; so is every H1 after the title.
    `blocks` are those of `parse`'s commonmark reading (whatever its fences and images: they do not change
    whether the first block is a heading)."""
    first = next((b for b in blocks if b.kind != "rule"), None)
    return first if first is not None and first.kind == "heading" and first.level == 1 else None


def split_lines(markdown: str) -> list[str]:
    """Lines as the commonmark reading sees them (\\r\\n and \\r are line ends; a final newline gives a
    last empty line). The passages reading uses str.splitlines()."""
    return markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")


class _Raw(NamedTuple):
    kind: Kind
    start: int  # 0-based, end exclusive
    end: int
    closed: bool = True
    heading: Heading | None = None


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_HRULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")


def _table_start(lines: Sequence[str], k: int) -> bool:
    return "|" in lines[k] and k + 1 < len(lines) and "-" in lines[k + 1] and is_separator(lines[k + 1], 1)


def _commonmark(lines: Sequence[str], fences: Fences, images: Images) -> Iterator[_Raw]:
    """The scorers' reading: headings after up to 3 spaces, pipe tables need a delimiter row (one dash
    per cell), lists take indented continuation lines and run on over blank lines while an item follows."""
    k, n = 0, len(lines)
    while k < n:
        line = lines[k]
        if not line.strip():
            k += 1
            continue
        mark = fence_of(line, fences)
        if mark is not None:
            j = k + 1
            while j < n and not _closes(lines[j], mark, fences):
                j += 1
            yield _Raw("code", k, min(j + 1, n), j < n)
            k = j + 1
            continue
        head = heading_of(line)
        if head is not None:
            yield _Raw("heading", k, k + 1, heading=head)
            k += 1
            continue
        if _HRULE.match(line):
            yield _Raw("rule", k, k + 1)
            k += 1
            continue
        if _table_start(lines, k):
            j = k + 2
            while j < n and lines[j].strip() and "|" in lines[j] and not heading_of(lines[j]):
                j += 1
            yield _Raw("table", k, j)
            k = j
            continue
        if is_figure(line, images):
            yield _Raw("figure", k, k + 1)
            k += 1
            continue
        if _LIST_ITEM.match(line):
            j = k
            while j < n:
                cur = lines[j]
                if _LIST_ITEM.match(cur) or (cur.strip() and cur[:1] in (" ", "\t") and j > k):
                    j += 1
                    continue
                if not cur.strip():
                    nxt = j + 1
                    while nxt < n and not lines[nxt].strip():
                        nxt += 1
                    if nxt < n and _LIST_ITEM.match(lines[nxt]):
                        j = nxt
                        continue
                break
            yield _Raw("list", k, j)
            k = j
            continue
        j = k + 1
        while j < n:
            cur = lines[j]
            if (
                not cur.strip()
                or heading_of(cur)
                or fence_of(cur, fences)
                or is_figure(cur, images)
                or _LIST_ITEM.match(cur)
                or _table_start(lines, j)
            ):
                break
            j += 1
        yield _Raw("paragraph", k, j)
        k = j


_PASSAGE_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+(?=\S)")


def _passages(lines: Sequence[str]) -> Iterator[_Raw]:
    """The retrieval passages' reading: blank lines cut; headings at column 0; ``` fences and multi-line
    $$ equations whole; a run of lines starting with | is a table when its second line is a delimiter
    row (three dashes), else a paragraph; a paragraph starting with a list marker is a list."""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        s = line.strip()
        if not s:
            i += 1
            continue
        fence = fence_of(line, "backticks")
        if fence or (s.startswith("$$") and "$$" not in s[2:]):
            j = i + 1
            while j < n and not (_closes(lines[j], fence, "backticks") if fence else "$$" in lines[j]):
                j += 1
            yield _Raw("code" if fence else "math", i, min(j + 1, n), j < n)
            i = j + 1
            continue
        head = heading_of(line, indent="none")
        if head is not None:
            yield _Raw("heading", i, i + 1, heading=head)
            i += 1
            continue
        if is_table_row(line):
            j = i
            while j < n and is_table_row(lines[j]):
                j += 1
            yield _Raw("table" if j - i >= 2 and is_separator(lines[i + 1]) else "paragraph", i, j)
            i = j
            continue
        if is_figure(line):
            yield _Raw("figure", i, i + 1)
            i += 1
            continue
        j = i
        while j < n and lines[j].strip() and not heading_of(lines[j], indent="none"):
            if is_table_row(lines[j]) or (j > i and (is_figure(lines[j]) or fence_of(lines[j], "backticks"))):
                break
            j += 1
        kind: Kind = "math" if s.startswith("$$") else "list" if _PASSAGE_ITEM.match(line) else "paragraph"
        yield _Raw(kind, i, j)
        i = j


def _items(lines: Sequence[str], start: int, marker: re.Pattern[str], loose: bool) -> tuple[Item, ...]:
    """List items; a line without a marker continues the item above (only when indented unless `loose`)."""
    items: list[Item] = []
    for k, line in enumerate(lines):
        m = marker.match(line)
        if m:
            items.append(Item(start + k, line[m.end() :]))
        elif line.strip() and items and (loose or line[:1] in (" ", "\t")):
            items[-1] = Item(items[-1].line, items[-1].text + " " + line.strip())
    return tuple(items)


def parse(
    markdown: str, reading: Reading = "commonmark", fences: Fences = "commonmark", images: Images = "strict"
) -> Document:
    """Blocks of a Markdown text in order, each with its heading path.

    reading "commonmark" (default; `fences` and `images` choose the fence and image readings) is the
    scorers' reading over `split_lines`; "passages" is the reading the retrieval passages are cut by
    (over str.splitlines(): see `_passages`). Blank lines are not blocks."""
    if reading == "passages":
        lines: list[str] = markdown.splitlines()
        raws, marker = _passages(lines), _PASSAGE_ITEM
    else:
        lines = split_lines(markdown)
        raws, marker = _commonmark(lines, fences, images), _LIST_ITEM
    blocks: list[Block] = []
    stack: list[tuple[int, int]] = []  # (level, block index) of the open headings
    for raw in raws:
        chunk = tuple(lines[raw.start : raw.end])
        start = raw.start + 1
        level, head = (raw.heading.level, raw.heading.title) if raw.heading else (0, "")
        if raw.heading:
            stack = [e for e in stack if e[0] < level]
        parents = tuple(i for _, i in stack)
        table = None
        if raw.kind == "table":
            table = Table(tuple(split_row(chunk[0])), tuple(tuple(split_row(r)) for r in chunk[2:]))
        items = _items(chunk, start, marker, reading == "passages") if raw.kind == "list" else ()
        path = tuple(blocks[i].title for i in parents)
        if raw.heading:
            stack.append((level, len(blocks)))
        blocks.append(Block(raw.kind, start, chunk, level, head, path, parents, raw.closed, table, items))
    return Document(tuple(lines), tuple(blocks))


def headings(markdown: str) -> list[Heading]:
    """(level, title) of every heading of the default reading (fence-aware), in order."""
    return [Heading(b.level, b.title) for b in parse(markdown).headings]


def title(markdown: str) -> str:
    """The title of a Markdown report (`title_block`), markup removed ("" without one)."""
    return parse(markdown).title
