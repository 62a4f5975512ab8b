"""A Markdown report cut into token-bounded parts for an LLM request: blocks become *atoms* (an oversized
block is cut at table rows, sentences or words, nothing dropped) and `pack` groups consecutive atoms by
section into chunks that fit a token limit. The size of a text is its tokens unless a `measure` says
otherwise (an extraction request's expected reply, tasks.score.reply_size).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tasks.markdown.pieces import clean, heading_title, md_blocks
from tasks.markdown.text import split_sentences
from tasks.tokens import count_tokens

__all__ = ["Atom", "atoms", "halve", "pack", "section_of", "size", "split_oversized"]


@dataclass
class Atom:
    text: str  # raw Markdown
    path: tuple[str, ...]  # heading path (of the section it opens, for headings)
    top: int  # index of the top-level section it belongs to
    flat: int  # index of the (innermost) section it belongs to
    tokens: int
    cost: int = -1  # its size for packing (`measure`); its tokens when not given

    def __post_init__(self) -> None:
        if self.cost < 0:
            self.cost = self.tokens


Measure = Callable[[str], int]


def _grouped(
    items: Sequence[str], limit: int, join: Callable[[list[str]], str], measure: Measure
) -> list[str]:
    """`items` joined into consecutive parts of at most `limit` (one item over it stays alone)."""
    parts: list[str] = []
    cur: list[str] = []
    for item in items:
        if cur and measure(join([*cur, item])) > limit:
            parts.append(join(cur))
            cur = []
        cur.append(item)
    if cur:
        parts.append(join(cur))
    return parts


def split_oversized(text: str, limit: int, kind: str, measure: Measure = count_tokens) -> list[str]:
    """Cut one block into pieces of at most `limit` (tokens, or `measure`) without dropping anything: a
    table at rows (header repeated), other text at sentences, a single sentence at words."""
    if measure(text) <= limit:
        return [text]
    lines = text.split("\n")
    if kind == "table" and len(lines) > 3:
        head = lines[:2]
        parts = _grouped(lines[2:], limit, lambda rows: "\n".join(head + rows), measure)
        if len(parts) > 1:
            return [q for p in parts for q in split_oversized(p, limit, "text", measure)]
        return parts
    units = split_sentences(" ".join(text.split()))
    if len(units) <= 1:
        units = text.split()
    return _grouped(units, limit, " ".join, measure)


def atoms(markdown: str, limit: int, measure: Measure = count_tokens) -> list[Atom]:
    """Blocks of `markdown` as atoms of at most `limit` (tokens, or `measure`), with their top-level and
    innermost section indices (the title and any content before the first heading form section 0)."""
    blocks = md_blocks(markdown)
    top_level = min((b.level for b in blocks if b.kind == "heading"), default=2)
    out: list[Atom] = []
    top = flat = 0
    for b in blocks:
        if b.kind == "heading":
            if out:
                flat += 1
                if b.level <= top_level:
                    top += 1
            out.append(Atom(b.raw, (*b.path, heading_title(b)), top, flat, count_tokens(b.raw)))
            continue
        if b.kind == "title":
            out.append(Atom(b.raw, (), top, flat, count_tokens(b.raw)))
            continue
        for part in split_oversized(b.raw, limit, b.kind, measure):
            tokens = count_tokens(part)
            cost = tokens if measure is count_tokens else measure(part)
            out.append(Atom(part, b.path, top, flat, tokens, cost))
    return out


def size(chunk: Sequence[Atom]) -> int:
    """Size of atoms joined by blank lines (an upper bound): their tokens, or their `measure`."""
    return sum(a.cost + 1 for a in chunk)


def pack(items: list[Atom], limit: int, keys: Sequence[Callable[[Atom], int]]) -> list[list[Atom]]:
    """Consecutive groups of atoms (grouped by ``keys[0]``) packed into chunks of at most `limit` (`size`); a
    group larger than the limit is packed the same way by the next key (subsections), and finally atom by
    atom; a single atom over the limit (counting its separator) is a chunk of its own. Order is kept and
    nothing is dropped."""
    groups: list[list[Atom]] = []
    if keys:
        for a in items:
            if groups and keys[0](groups[-1][-1]) == keys[0](a):
                groups[-1].append(a)
            else:
                groups.append([a])
    else:
        groups = [[a] for a in items]
    chunks: list[list[Atom]] = []
    cur: list[Atom] = []
    for g in groups:
        if size(g) > limit and len(g) > 1:
            if cur:
                chunks.append(cur)
                cur = []
            chunks.extend(pack(g, limit, keys[1:]))
            continue
        if cur and size(cur) + size(g) > limit:
            chunks.append(cur)
            cur = []
        cur.extend(g)
    if cur:
        chunks.append(cur)
    return chunks


def halve(chunk: Sequence[Atom], measure: Measure = count_tokens) -> list[list[Atom]]:
    """`chunk` cut in two at the atom where half its size is reached, for a request whose reply did not fit;
    a one-atom chunk is cut inside (a table at rows, text at sentences) into as many pieces as that gives.
    [] when it cannot be cut (one sentence)."""
    if len(chunk) > 1:
        half, acc, k = size(chunk) / 2, 0, 1
        for i, a in enumerate(chunk):
            acc += a.cost + 1
            if acc >= half:
                k = i + 1
                break
        k = min(max(k, 1), len(chunk) - 1)
        return [list(chunk[:k]), list(chunk[k:])]
    a = chunk[0]
    lines = a.text.split("\n")
    table = len(lines) > 3 and lines[0].lstrip().startswith("|") and set(lines[1].strip()) <= set("|-: ")
    parts = split_oversized(a.text, max(1, measure(a.text) // 2), "table" if table else "text", measure)
    if len(parts) < 2:
        return []
    return [[Atom(p, a.path, a.top, a.flat, count_tokens(p), measure(p))] for p in parts]


def _norm(text: str) -> str:
    return " ".join(clean(text).lower().split())


def section_of(chunk: Sequence[Atom], source: str) -> str:
    """Heading path of the atom of `chunk` holding `source` (compared without markup, case or cell bars),
    else of its first atom under a heading."""
    probe = _norm(source)[:120]
    if probe:
        for a in chunk:
            if probe in _norm(a.text.replace("|", " ")):
                return " > ".join(a.path)
    return next((" > ".join(a.path) for a in chunk if a.path), "")
