"""A paper page's metadata (arXiv id, version, category, license, LaTeXML flavour) and the bullet list
under its title in the grounding document. Read from the page and the mirror's manifest by
tasks.ground.paper."""

from __future__ import annotations

import re
from typing import Any

from tasks.ground.tables import collapse_ws

__all__ = ["has_class", "info_lines", "paper_metadata"]


def has_class(cls_name: str) -> str:
    """An XPath predicate: the element's class attribute holds `cls_name` as a whole word."""
    return f'contains(concat(" ", normalize-space(@class), " "), " {cls_name} ")'


_WATERMARK = re.compile(
    r"arXiv:\s*([a-z\-]+(?:\.[A-Z]{2})?/\d{7}|\d{4}\.\d{4,5})(v\d+)?\s*(?:\[([^\]]+)\])?\s*(.*)"
)
_ID_IN_URL = re.compile(
    r"(?:arxiv\.org|ar5iv[\w.]*)/(?:abs|html|pdf)/([a-z\-]+(?:\.[A-Z]{2})?/\d{7}|\d{4}\.\d{4,5})(v\d+)?"
)
_ID_IN_NAME = re.compile(r"([a-z\-]+(?:\.[A-Z]{2})?)_(\d{7})|(\d{4}\.\d{4,5})(v\d+)?")
_GENERATOR = re.compile(r"Generated\s+on\s+(.+?)\s+by\s+LaTeXML\s+\(version\s+([\w.\-]+)\)")


def _page_metadata(root: Any, text: str, source_name: str) -> dict:
    md: dict[str, Any] = {}
    wm = root.xpath('//*[@id="watermark-tr"]')
    if wm:
        m = _WATERMARK.search(collapse_ws(wm[0].text_content()))
        if m:
            md["arxiv_id"] = m.group(1)
            if m.group(2):
                md["version"] = m.group(2)
            if m.group(3):
                md["primary_category"] = m.group(3)
            if m.group(4):
                md["version_date"] = m.group(4).strip()
    lic = root.xpath('//*[@id="license-tr"]')
    if lic:
        t = collapse_ws(lic[0].text_content())
        md["license"] = re.sub(r"^License:\s*", "", t) or None
        if lic[0].get("href"):
            md["license_url"] = lic[0].get("href")
    if "license" not in md:
        cc = root.xpath('//a[contains(@href, "creativecommons.org/")]')
        cc = [a for a in cc if not a.xpath(f"ancestor::*[{has_class('ltx_document')}]")]
        if cc:
            md["license"] = collapse_ws(cc[0].text_content()) or cc[0].get("href")
            md["license_url"] = cc[0].get("href")
    urls = [b.get("href") or "" for b in root.xpath("//base[@href]")]
    urls += [x.get("href") or "" for x in root.xpath('//link[@rel="canonical"]')]
    urls += [x.get("content") or "" for x in root.xpath('//meta[@property="og:url"]')]
    urls += [a.get("href") or "" for a in root.xpath(f"//a[{has_class('arxiv-ui-theme')}]")]
    for u in urls:
        m = _ID_IN_URL.search(u) or re.search(r"/html/(\d{4}\.\d{4,5})(v\d+)?", u)
        if m:
            md.setdefault("arxiv_id", m.group(1))
            if m.group(2):
                md.setdefault("version", m.group(2))
            break
    if "arxiv_id" not in md:
        base = source_name.replace("\\", "/").rsplit("/", 1)[-1]
        m = _ID_IN_NAME.search(base)
        if m:
            md["arxiv_id"] = f"{m.group(1)}/{m.group(2)}" if m.group(1) else m.group(3)
            md["arxiv_id_source"] = "file name"
    g = _GENERATOR.search(text[:20000]) or _GENERATOR.search(text[-20000:])
    if g:
        md["latexml_version"] = g.group(2)
        md["generated_on"] = " ".join(g.group(1).split())
    low = text[:20000].lower()
    if wm or lic or "arxiv-html-papers" in low or any("/html/" in u and "ar5iv" not in u for u in urls):
        md["flavor"] = "arxiv-html"
    elif "ar5iv.labs.arxiv.org" in low or 'content="ar5iv"' in low:
        md["flavor"] = "ar5iv"
    else:
        md["flavor"] = "latexml"
    return md


def paper_metadata(root: Any, text: str, source_name: str, meta: dict, title: str) -> dict[str, Any]:
    """The paper's metadata: `meta` (the mirror's manifest) wins for ids and dates, the page for the
    title and (when present) the license; the page's other values fill what meta lacks."""
    page_md = _page_metadata(root, text, source_name)
    if meta.get("arxiv_id"):
        id_source = "meta"
    elif page_md.get("arxiv_id"):
        id_source = page_md.pop("arxiv_id_source", "page")
    else:
        id_source = None
    metadata: dict[str, Any] = {
        "arxiv_id": meta.get("arxiv_id") or page_md.get("arxiv_id"),
        "arxiv_id_source": id_source,
        "title": title,
        "first_version_date": meta.get("first_version_date"),
        "license": page_md.get("license") or meta.get("license"),
    }
    if meta.get("arxiv_id") and page_md.get("arxiv_id") and page_md["arxiv_id"] != meta["arxiv_id"]:
        metadata["page_arxiv_id"] = page_md["arxiv_id"]
    for k, v in page_md.items():
        if k not in metadata and k != "arxiv_id_source" and v:
            metadata[k] = v
    for k, v in meta.items():
        if k not in metadata or metadata[k] in (None, ""):
            metadata[k] = v
    if meta.get("title") and collapse_ws(str(meta["title"])) != title:
        metadata["manifest_title"] = meta["title"]
    return metadata


def info_lines(
    metadata: dict[str, Any], affiliations: list[str], dates: str, classification: str
) -> list[str]:
    """The bullets under a paper's title: subtitle, arXiv id, authors, dates, category, license, source."""
    subtitle, authors, keywords = metadata.get("subtitle"), metadata.get("authors"), metadata.get("keywords")
    source_ref = metadata["source_name"]
    info: list[str] = []
    if subtitle:
        info.append(f"- Subtitle: {subtitle}")
    if metadata.get("arxiv_id"):
        v = metadata.get("version")
        info.append(f"- arXiv: {metadata['arxiv_id']}" + (f" ({v})" if v else ""))
    if authors:
        info.append("- Authors: " + "; ".join(authors))
    if affiliations:
        info.append("- Affiliations: " + "; ".join(affiliations))
    if metadata.get("first_version_date"):
        info.append(f"- First version: {metadata['first_version_date']}")
    if metadata.get("version_date"):
        info.append(f"- This version: {metadata['version_date']}")
    if metadata.get("primary_category"):
        info.append(f"- Category: {metadata['primary_category']}")
    if dates:
        info.append(f"- Dates: {dates}")
    if keywords:
        info.append(f"- Keywords: {keywords}")
    if classification:
        info.append(f"- Classification: {classification}")
    if metadata.get("license"):
        info.append(f"- License: {metadata['license']}")
    info.append(f"- Source: {source_ref} ({metadata.get('flavor', 'latexml')})")
    return info
