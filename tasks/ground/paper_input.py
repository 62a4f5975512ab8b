"""A paper page's input checks and parsing for tasks.ground.paper: bytes -> text (empty, binary,
undecodable and truncated input refused with FrameInputError), text -> lxml tree, tree -> the element
that holds the LaTeXML document."""

from __future__ import annotations

import re
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from tasks.errors import FrameInputError
from tasks.ground.paper_meta import has_class


def _decode(data: bytes | str, source_name: str) -> str:
    if isinstance(data, bytes):
        if not data.strip():
            raise FrameInputError(source_name, "empty file")
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            try:
                text = data.decode("utf-16")
            except UnicodeDecodeError as exc:
                raise FrameInputError(source_name, "binary data, not UTF-16 text") from exc
        else:
            if b"\x00" in data:
                raise FrameInputError(source_name, "binary data (NUL bytes), not HTML")
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError as exc:
                raise FrameInputError(
                    source_name, f"binary or non-UTF-8 data (undecodable byte at offset {exc.start})"
                ) from exc
    elif isinstance(data, str):
        text = data.lstrip("\ufeff")
    else:
        raise FrameInputError(source_name, f"expected HTML bytes or str, got {type(data).__name__}")
    if not text.strip():
        raise FrameInputError(source_name, "empty file")
    if "\x00" in text:
        raise FrameInputError(source_name, "binary data (NUL characters), not HTML")
    return text


_END_RE = re.compile(r"</(?:html|body)\s*>(?:\s|<!--.*?-->)*\Z", re.I | re.S)


def _check_complete(text: str, source_name: str) -> None:
    if not _END_RE.search(text[-4096:]):
        raise FrameInputError(source_name, "truncated HTML (no closing </body> or </html> at the end)")


def _parse(text: str, source_name: str) -> Any:
    if not any(m in text for m in ("ltx_document", "ltx_page_main", "ltx_title_document")):
        raise FrameInputError(
            source_name, "not a LaTeXML paper (no ltx_document/ltx_page_main/ltx_title_document)"
        )
    parser = lxml_html.HTMLParser(encoding="utf-8", remove_comments=False, huge_tree=True)
    try:
        root = lxml_html.document_fromstring(text.encode("utf-8"), parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise FrameInputError(source_name, f"unparseable HTML ({exc})".replace("\n", " ")) from exc
    return root


def _pick_document(root: Any, source_name: str) -> Any:
    docs = root.xpath(f"//*[{has_class('ltx_document')}]")
    # the innermost one: fixture wrappers put ltx_document on <body> around the real <article>
    inner = [d for d in docs if not d.xpath(f".//*[{has_class('ltx_document')}]")]
    if inner:
        return inner[0]
    for name in ("ltx_page_content", "ltx_page_main"):
        found = root.xpath(f"//*[{has_class(name)}]")
        if found:
            return found[0]
    titles = root.xpath(f"//*[{has_class('ltx_title_document')}]")
    if titles:
        return titles[0].getparent()
    raise FrameInputError(
        source_name, "not a LaTeXML paper (no ltx_document/ltx_page_main/ltx_title_document)"
    )
