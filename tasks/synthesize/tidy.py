"""What every gold fill goes through before its content enters the report (`ReportTidy`), whichever backend
wrote it: the defects frame's own rubric fails a report for must not be in the gold (issue 34 point 4).

The placeholders of a report are tidied in outline order, each against what the earlier ones hold:

- **no repeat**: a prose sentence of 8 words or more (the threshold of the rubric's `no_repetition`, with
  the same key: its lower-case words and numbers) that an earlier element (or an earlier paragraph of
  this one) holds is dropped; a table or figure block met twice is dropped the second time;
- **no glued heading**: a paragraph opening with a phrase said twice ("iPhone iPhone net sales ...":
  a heading line run into its paragraph) keeps one;
- **no raw figure link**: an image line whose target is not a file (an http(s) URL or a name with an image
  extension), such as LaTeXML's anchor `![Figure 3: ...](S5.F3)`, is dropped when a caption paragraph of
  the same element gives its label or text, else replaced by its alt text (once);
- **third person** for filings (`third=True`): `tasks.synthesize.voice.third_person`.

An element left without prose is `EMPTY` (a sentence short enough never to count as a repeat).
"""

from __future__ import annotations

import re

from tasks.markdown.document import is_table_row
from tasks.markdown.pieces import clean
from tasks.markdown.text import split_sentences
from tasks.synthesize.voice import third_person

__all__ = [
    "EMPTY",
    "MIN_REPEAT_WORDS",
    "ReportTidy",
    "glued_heading",
    "image_link",
    "is_file_target",
    "repeat_key",
]

EMPTY = "No grounding evidence available."
MIN_REPEAT_WORDS = 8  # tasks/score/rubric/completeness.py check_no_repetition
_IMAGE_FILE = re.compile(r"\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|pdf)(?:[?#].*)?$", re.IGNORECASE)
_GLUED = re.compile(r"^((?:\*\*)?(\S+(?:[ \t]+\S+){0,5}?)(?:\*\*)?)[ \t]+(?=\2\b)")
_LABEL = re.compile(r"^(?:Figure|FIGURE|Fig\.|Table|TABLE)\s*[A-Z]?\d+[a-z]?")
_ITEM = re.compile(r"^(\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+)(.*)$")


def repeat_key(sentence: str) -> str:
    """What makes two sentences the same for the rubric's repetition item: lower-case words and numbers."""
    return " ".join(re.findall(r"[a-z0-9]+", clean(sentence).lower()))


def is_file_target(target: str) -> bool:
    """An image link that points at a file a reader can open: a URL, or a name with an image extension."""
    t = target.strip().strip("<>")
    return t.startswith(("http://", "https://")) or bool(_IMAGE_FILE.search(t))


def image_link(line: str) -> tuple[str, str] | None:
    """(alt, target) of a line that is one image link, else None. The target is what follows the last
    "](", so an alt text holding brackets ("\\[Fe/H\\]", which `image_of` does not read) still counts."""
    s = line.strip()
    if not (s.startswith("![") and s.endswith(")")) or "\n" in s:
        return None
    i = s.rfind("](")
    target = s[i + 2 : -1] if i > 1 else ""
    if not target or any(c.isspace() for c in target.split('"')[0].strip()):
        return None
    return s[2:i], target.split('"')[0].strip()


def glued_heading(paragraph: str) -> str | None:
    """The phrase a paragraph opens with twice ("iPhone iPhone net sales"), else None."""
    m = _GLUED.match(paragraph.lstrip())
    return m.group(2) if m and re.search(r"[A-Za-z]", m.group(2)) else None


def _blocks(content: str) -> list[str]:
    """Blank-line separated blocks; a fenced code block is one block whatever it holds."""
    out: list[str] = []
    cur: list[str] = []
    fence = False
    for line in content.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not line.strip() and not fence:
            if cur:
                out.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    if cur:
        out.append("\n".join(cur))
    return out


class ReportTidy:
    """The tidy pass over the elements of one report, in outline order (module docstring)."""

    def __init__(self, *, third: bool = False) -> None:
        self.third = third
        self.sentences: set[str] = set()
        self.blocks: set[str] = set()

    def _new(self, sentence: str) -> bool:
        key = repeat_key(sentence)
        if len(key.split()) < MIN_REPEAT_WORDS:
            return True
        if key in self.sentences:
            return False
        self.sentences.add(key)
        return True

    def _prose(self, text: str) -> str:
        """A paragraph (or list item) without its glued heading and the sentences placed already."""
        if glued_heading(text) is not None:
            text = text.lstrip()[_GLUED.match(text.lstrip()).end() :]  # type: ignore[union-attr]
        sentences = split_sentences(" ".join(text.split()))
        kept = [s for s in sentences if self._new(s)]
        return text if len(kept) == len(sentences) else " ".join(kept)  # as written when nothing dropped

    def _figure(self, block: str, captions: list[str]) -> str:
        img = image_link(block)
        if img is None or is_file_target(img[1]):
            return block
        alt = " ".join(img[0].split())
        label = _LABEL.match(alt)
        if any((label and c.startswith(label.group(0))) or c == alt for c in captions):
            return ""  # the caption paragraph says it: one copy
        return alt

    def __call__(self, content: str) -> str:
        blocks = _blocks(third_person(content) if self.third else content)
        captions = [" ".join(b.split()) for b in blocks if _LABEL.match(b.strip())]
        out: list[str] = []
        for b in blocks:
            s = b.strip()
            if s.startswith(("```", "~~~")):
                out.append(b)
                continue
            if image_link(s) is not None:
                b = self._figure(b, captions)
                if not b:
                    continue
                s = b.strip()
            if all(is_table_row(ln) for ln in s.splitlines()) or image_link(s) is not None:
                key = " ".join(s.split())
                if key not in self.blocks:
                    self.blocks.add(key)
                    out.append(b)
                continue
            lines = s.splitlines()
            if all(_ITEM.match(ln) for ln in lines):
                items = [(m.group(1), self._prose(m.group(2))) for m in map(_ITEM.match, lines) if m]
                kept = "\n".join(f"{mark}{text}" for mark, text in items if text.strip())
            else:
                kept = self._prose(b)
            if kept.strip():
                out.append(kept)
        return "\n\n".join(out).strip() or EMPTY
