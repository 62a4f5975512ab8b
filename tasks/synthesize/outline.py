"""Structure -> Markdown outline with one placeholder per content element (SPEC §2 step 6).

A placeholder is an HTML comment block that carries the element's id, type, objective and the
guiding questions (its own and its section's):

    <!-- FILL id="s2.1.t1" type="text"
    objective: ...
    questions:
    - ...
    -->

Everything outside placeholders (title, headings, blank lines) is the report's skeleton: filling
replaces placeholder blocks only, so the skeleton stays byte-identical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.structure import LEAVES, ReportStructure, StructureNode
from tasks.markdown.document import is_heading

PLACEHOLDER = re.compile(r'<!-- FILL id="(?P<id>[^"]+)" type="(?P<type>[a-z]+)"\n(?P<body>.*?)\n-->', re.S)


@dataclass(frozen=True)
class Placeholder:
    id: str
    type: str
    start: int
    end: int


def _one_line(text: str) -> str:
    # A placeholder body must not close the comment early or break the block format.
    return " ".join(text.replace("-->", "- ->").split())


def _block(node: StructureNode, inherited: list[str]) -> str:
    lines = [f'<!-- FILL id="{node.id}" type="{node.type}"', f"objective: {_one_line(node.objective)}"]
    questions = list(dict.fromkeys([*node.questions, *inherited]))
    if questions:
        lines.append("questions:")
        lines += [f"- {_one_line(q)}" for q in questions]
    lines.append("-->")
    return "\n".join(lines)


def render_outline(structure: ReportStructure) -> str:
    out = [f"# {_one_line(structure.title)}", ""]

    def visit(node: StructureNode, depth: int, inherited: list[str]) -> None:
        if node.type in LEAVES:
            out.extend([_block(node, inherited), ""])
            return
        out.extend([f"{'#' * (depth + 2)} {_one_line(node.title)}", ""])
        for child in node.children:
            visit(child, depth + 1, node.questions if node.type == "section" else inherited)

    for section in structure.nodes:
        visit(section, 0, [])
    return "\n".join(out).rstrip("\n") + "\n"


def find_placeholders(markdown: str) -> list[Placeholder]:
    return [Placeholder(m["id"], m["type"], m.start(), m.end()) for m in PLACEHOLDER.finditer(markdown)]


def skeleton_segments(outline: str) -> list[str]:
    """The constant text around the placeholders, in order (len = placeholders + 1)."""
    segments, pos = [], 0
    for p in find_placeholders(outline):
        segments.append(outline[pos : p.start])
        pos = p.end
    segments.append(outline[pos:])
    return segments


def fill_placeholders(outline: str, contents: dict[str, str]) -> str:
    """Replace every placeholder by its content; the text between placeholders is copied as is."""
    parts, pos = [], 0
    for p in find_placeholders(outline):
        parts.append(outline[pos : p.start])
        if p.id not in contents:
            raise KeyError(f"no content for placeholder {p.id}")
        parts.append(contents[p.id].strip("\n"))
        pos = p.end
    parts.append(outline[pos:])
    return "".join(parts)


def headings(markdown: str) -> list[str]:
    """The heading lines of a Markdown text (outside placeholder blocks), in order."""
    text = PLACEHOLDER.sub("", markdown)
    return [ln.rstrip() for ln in text.splitlines() if is_skeleton_heading(ln)]


def is_skeleton_heading(line: str) -> bool:
    """A heading line of the skeleton: '#'s at column 0 followed by one space (as render_outline writes)."""
    return is_heading(line, indent="none", space="one")
