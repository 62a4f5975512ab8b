"""Live arXiv source: the `arxiv` API client (4.x) for the window's papers, then their LaTeXML HTML.

The API endpoint can be redirected (tests, proxies) with the `api_url` argument or the
FRAME_ARXIV_API_URL environment variable (a URL with `{}` where the query string goes, like
`arxiv.Client.query_url_format`); the HTML endpoint is `cfg.source.arxiv_html_url`.
"""

from __future__ import annotations

import os
import re
import time

import arxiv
import requests

from schemas.config import ArxivDomain, ArxivWindow, FrameConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch.mirror import find_window
from tasks.fetch.store import store_raw

API_URL_ENV = "FRAME_ARXIV_API_URL"
USER_AGENT = "frame-bench/0.1 (report-generation benchmark builder)"
LATEXML_MARKERS = (b"ltx_document", b"ltx_page_main")
_VERSION = re.compile(r"^(?P<id>.+?)(?P<version>v\d+)?$")


def window_query(query: str, window: ArxivWindow) -> str:
    """The domain query restricted to papers first submitted within the window (whole days, UTC)."""
    return f"({query}) AND submittedDate:[{window.start:%Y%m%d}0000 TO {window.end:%Y%m%d}2359]"


def split_version(short_id: str) -> tuple[str, str | None]:
    """'2111.08717v2' -> ('2111.08717', 'v2'); 'astro-ph/9710163' -> ('astro-ph/9710163', None)."""
    m = _VERSION.match(short_id)
    assert m is not None  # the pattern matches any non-empty string
    return m.group("id"), m.group("version")


def make_client(
    page_size: int, *, api_url: str | None = None, delay_seconds: float = 3.0, num_retries: int = 3
) -> arxiv.Client:
    client = arxiv.Client(page_size=page_size, delay_seconds=delay_seconds, num_retries=num_retries)
    api_url = api_url or os.environ.get(API_URL_ENV)
    if api_url:
        client.query_url_format = api_url if "{}" in api_url else api_url + "?{}"
    return client


def fetch_html(url: str, *, timeout: float = 60.0, session: requests.Session | None = None) -> bytes:
    """Download one paper's HTML rendering; refuse error pages and pages that are not LaTeXML output."""
    getter = session or requests
    try:
        resp = getter.get(url, timeout=timeout, headers={"User-Agent": USER_AGENT})
    except requests.RequestException as exc:
        raise FrameInputError(url, f"HTML download failed: {exc.__class__.__name__}: {exc}") from None
    if resp.status_code != 200:
        hint = " (arXiv has no HTML rendering at this URL)" if resp.status_code == 404 else ""
        raise FrameInputError(url, f"HTML download returned HTTP {resp.status_code}{hint}")
    data = resp.content
    if not any(marker in data for marker in LATEXML_MARKERS):
        raise FrameInputError(
            url, "not a LaTeXML HTML rendering (no ltx_document/ltx_page_main): refusing to store it"
        )
    return data


def live_arxiv(
    cfg: FrameConfig,
    domain: ArxivDomain,
    snapshot: str,
    *,
    client: arxiv.Client | None = None,
    api_url: str | None = None,
    delay_seconds: float = 3.0,
    num_retries: int = 3,
    timeout: float = 60.0,
    session: requests.Session | None = None,
) -> list[RawFile]:
    """Query arXiv for the window's papers (oldest first), download and store their HTML."""
    window = find_window(domain, snapshot)
    query = window_query(domain.query, window)
    if client is None:
        client = make_client(
            min(domain.papers_per_window, 100),
            api_url=api_url,
            delay_seconds=delay_seconds,
            num_retries=num_retries,
        )
    search = arxiv.Search(
        query=query,
        max_results=domain.papers_per_window,
        sort_by=arxiv.SortCriterion.SubmittedDate,
        sort_order=arxiv.SortOrder.Ascending,
    )
    try:
        results = list(client.results(search))
    except arxiv.ArxivError as exc:
        raise FrameInputError(exc.url, f"arXiv API query failed: {exc.message}") from None
    except requests.RequestException as exc:
        raise FrameInputError(client.query_url_format, f"arXiv API query failed: {exc}") from None

    # The API applies the window already; keep the check so a misbehaving endpoint cannot leak papers in.
    papers = sorted(
        (r for r in results if window.start <= r.published.date() <= window.end),
        key=lambda r: (r.published, r.get_short_id()),
    )[: domain.papers_per_window]
    if not papers:
        raise FrameInputError(
            f"domains.{domain.name}",
            f"arXiv returned no paper first submitted in window {window.label} "
            f"({window.start}..{window.end}) for query {query!r}",
        )

    out = []
    for i, result in enumerate(papers):
        if i and delay_seconds:
            time.sleep(delay_seconds)  # arXiv asks clients to pace their requests
        short_id = result.get_short_id()
        arxiv_id, version = split_version(short_id)
        url = cfg.source.arxiv_html_url.format(id=short_id)
        data = fetch_html(url, timeout=timeout, session=session)
        out.append(
            store_raw(
                cfg.build.data_dir,
                data,
                ".html",
                source="arxiv",
                origin="live",
                location=url,
                domain=domain.name,
                snapshot=snapshot,
                arxiv_id=arxiv_id,
                arxiv_version=version,
                title=result.title or None,
                first_version_date=result.published.date().isoformat(),
                license=getattr(result, "license", None),
            )
        )
    return out
