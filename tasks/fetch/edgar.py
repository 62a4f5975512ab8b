"""Live SEC EDGAR source via sec-edgar-downloader 5.1.

The Downloader writes `sec-edgar-filings/<ticker|CIK>/<form>/<accession>/{full-submission.txt,
primary-document.html}` and only prints per-filing errors, so this module looks at what landed on
disk, checks the filing's period (dei:DocumentPeriodEndDate in the iXBRL, else the submissions JSON
`reportDate`) and stores the matching primary document.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import io
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import requests
from sec_edgar_downloader import Downloader

from schemas.config import EdgarDomain, FrameConfig
from schemas.sources import RawFile
from tasks.errors import FrameInputError
from tasks.fetch.store import store_raw

# A 10-Q/10-K is due 40-90 days after the period end (plus a 5-15 day NT extension).
FILING_LAG_DAYS = 100
ARCHIVES_URL = "https://www.sec.gov/Archives/edgar/data/{cik}/{acc_nodash}/{document}"
SUBMISSIONS_URL = "https://data.sec.gov/submissions/CIK{cik}.json"
USER_AGENT_PROBLEM = (
    "live EDGAR needs a user agent name and email (config source.edgar.user_agent_name/user_agent_email "
    "or FRAME_EDGAR_NAME/FRAME_EDGAR_EMAIL)"
)

_A = rb"""["']"""
_PERIOD_TAG = re.compile(
    rb"<(?:[\w-]+:)?nonNumeric\b[^>]*?\bname=" + _A + rb"dei:DocumentPeriodEndDate" + _A + rb"[^>]*>([^<]*)",
    re.I,
)
_CONTEXT_REF = re.compile(rb"\bcontextRef=" + _A + rb"([^\"']+)" + _A, re.I)
_PERIOD_END = re.compile(rb"<(?:[\w-]+:)?(?:endDate|instant)>\s*(\d{4}-\d{2}-\d{2})\s*<", re.I)
_FIRST_FILENAME = re.compile(rb"<DOCUMENT>.*?<FILENAME>([^\r\n<]+)", re.S)
_SGML_CIK = re.compile(rb"CENTRAL INDEX KEY:\s*(\d+)")
_SGML_COMPANY = re.compile(rb"COMPANY CONFORMED NAME:\s*([^\r\n]+)")


def ixbrl_period_end(data: bytes) -> str | None:
    """Period end (ISO date) of an iXBRL document: the end date of dei:DocumentPeriodEndDate's context.

    Falls back to the displayed date text ("March 29, 2025"); None if the document has no such fact.
    """
    tag = _PERIOD_TAG.search(data)
    if tag is None:
        return None
    ref = _CONTEXT_REF.search(tag.group(0))
    if ref is not None:
        ctx = re.search(
            rb"<(?:[\w-]+:)?context\b[^>]*\bid="
            + _A
            + re.escape(ref.group(1))
            + _A
            + rb"[^>]*>(.*?)</(?:[\w-]+:)?context>",
            data,
            re.S | re.I,
        )
        if ctx is not None:
            end = _PERIOD_END.search(ctx.group(1))
            if end is not None:
                return end.group(1).decode("ascii")
    text = " ".join(html.unescape(tag.group(1).decode("utf-8", "replace")).split())
    for fmt in ("%B %d, %Y", "%b %d, %Y", "%Y-%m-%d", "%m/%d/%Y"):
        try:
            return dt.datetime.strptime(text, fmt).date().isoformat()
        except ValueError:
            continue
    return None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _submissions_entry(cik: str, accession: str, user_agent: str) -> dict[str, str] | None:
    """reportDate / primaryDocument of one accession from EDGAR's submissions JSON (recent filings)."""
    url = SUBMISSIONS_URL.format(cik=cik.zfill(10))
    try:
        resp = requests.get(url, headers={"User-Agent": user_agent}, timeout=60)
        resp.raise_for_status()
        recent = resp.json()["filings"]["recent"]
        idx = recent["accessionNumber"].index(accession)
        return {key: recent[key][idx] for key in ("reportDate", "primaryDocument") if key in recent}
    except (requests.RequestException, ValueError, KeyError, IndexError):
        return None


@contextlib.contextmanager
def _edgar_errors(where: str, action: str):
    try:
        yield
    except FrameInputError:
        raise
    except (requests.RequestException, ValueError, TypeError, KeyError) as exc:
        raise FrameInputError(where, f"{action} failed: {_one_line(str(exc))}") from None


@dataclass
class _Filing:
    """What landed on disk for one accession."""

    accession: str
    data: bytes | None = None  # the primary document; None if it was not downloaded
    period: str | None = None
    document: str | None = None  # primary document file name on EDGAR
    cik: str | None = None
    company: str | None = None

    @property
    def status(self) -> str:
        if self.data is None:
            return "primary document not downloaded"
        return self.period or "unknown period"

    def url(self) -> str:
        if not self.cik:
            return f"EDGAR accession {self.accession}"
        acc_nodash = self.accession.replace("-", "")
        return ARCHIVES_URL.format(cik=int(self.cik), acc_nodash=acc_nodash, document=self.document or "")


def live_edgar(
    cfg: FrameConfig, domain: EdgarDomain, snapshot: str, *, filing_lag_days: int = FILING_LAG_DAYS
) -> RawFile:
    """Download the (ticker or CIK, form) filing for period `snapshot` and store its primary document.

    Looks at filings filed within `filing_lag_days` after the period end: first only the latest one
    (one submissions page, one filing), then all of them if that one covers another period.
    """
    name, email = cfg.source.edgar.resolved()
    if not name or not email:
        raise FrameInputError("source.edgar", USER_AGENT_PROBLEM)
    try:
        period = dt.date.fromisoformat(snapshot)
    except ValueError:
        raise FrameInputError(f"domains.{domain.name}", f"snapshot {snapshot!r} is not an ISO date") from None
    user_agent = f"{name} {email}"
    after, before = period + dt.timedelta(days=1), period + dt.timedelta(days=filing_lag_days)
    where = f"EDGAR {domain.ticker} {domain.form} period {snapshot}"
    filings: dict[str, _Filing] = {}
    printed = ""
    with tempfile.TemporaryDirectory(prefix="frame-edgar-") as tmp:
        folder = Path(tmp)
        with _edgar_errors("source.edgar", "EDGAR ticker map request"):
            dl = Downloader(name, email, folder)
        cik = domain.cik or dl.ticker_to_cik_mapping.get(domain.ticker)
        for limit in (1, None):
            out = io.StringIO()
            with _edgar_errors(where, "EDGAR filing download"), contextlib.redirect_stdout(out):
                dl.get(
                    domain.form,
                    domain.cik or domain.ticker,
                    limit=limit,
                    after=after,
                    before=before,
                    download_details=True,
                    accession_numbers_to_skip=set(filings) or None,
                )
            printed += out.getvalue()
            for acc_dir in sorted(folder.glob(f"sec-edgar-filings/*/{domain.form}/*")):
                if acc_dir.name not in filings:
                    filings[acc_dir.name] = _inspect(acc_dir, cik, user_agent)
            match = next((f for f in filings.values() if f.data is not None and f.period == snapshot), None)
            if match is not None:
                return store_raw(
                    cfg.build.data_dir,
                    match.data,
                    ".htm",
                    source="edgar",
                    origin="live",
                    location=match.url(),
                    domain=domain.name,
                    snapshot=snapshot,
                    accession=match.accession,
                    ticker=domain.ticker,
                    cik=match.cik,
                    form=domain.form,
                    period_end=match.period,
                    title=match.company,
                )
            if not filings:
                break  # nothing (downloadable) filed in the window: a wider pass cannot find more
    errors = f"; downloader said: {_one_line(printed)}" if printed.strip() else ""
    if not filings:
        raise FrameInputError(where, f"no {domain.form} filed between {after} and {before}{errors}")
    tried = "; ".join(f"{f.accession}: {f.status}" for f in filings.values())
    raise FrameInputError(where, f"no downloaded filing covers period {snapshot} ({tried}){errors}")


def _inspect(acc_dir: Path, cik: str | None, user_agent: str) -> _Filing:
    """Primary document, period end and EDGAR names of one downloaded accession folder."""
    filing = _Filing(accession=acc_dir.name, cik=cik.zfill(10) if cik else None)
    primaries = sorted(acc_dir.glob("primary-document.*"))
    if not primaries:
        return filing
    filing.data = primaries[0].read_bytes()
    full = acc_dir / "full-submission.txt"
    if full.is_file():
        sgml = full.read_bytes()
        first = _FIRST_FILENAME.search(sgml)
        if first is not None:
            filing.document = first.group(1).strip().decode("ascii", "replace")
        head = sgml[:20000]
        if (m := _SGML_CIK.search(head)) is not None:
            filing.cik = filing.cik or m.group(1).decode("ascii").zfill(10)
        if (m := _SGML_COMPANY.search(head)) is not None:
            filing.company = m.group(1).strip().decode("utf-8", "replace")
    filing.period = ixbrl_period_end(filing.data)
    if (filing.period is None or filing.document is None) and filing.cik:
        entry = _submissions_entry(filing.cik, filing.accession, user_agent) or {}
        filing.period = filing.period or entry.get("reportDate") or None
        if filing.document is None and entry.get("primaryDocument"):
            filing.document = entry["primaryDocument"].rsplit("/")[-1]
    return filing
