"""Snapshot discovery for `frame refresh`: which snapshots are newer than the latest release.

- EDGAR domains with `discover = true`: newer period-end dates of the domain's form, from the mirror's
  `edgar/MANIFEST.csv` (mirror mode) or the company's submissions JSON on data.sec.gov (live mode,
  `filings.recent`, exact form match: amendments such as 10-Q/A are not new periods), each the next
  edition of the one before (never skipping a period: a listing with a gap is an error), the live
  mode also taking the company's `fiscalYearEnd` when the domain gives none.
- arXiv domains with `window_months`: consecutive windows after the last one, each starting the day
  after the previous end and lasting `window_months` calendar months, appended while they have ended
  before `today`; in mirror mode also only while the mirror holds a full window of papers.

Snapshots already released (`known`) are kept even when they left the config. An arXiv window is a
label plus dates, so a released label must either be a config window or one that discovery itself
generates from the config's last window with the same `window_months` (labels `W<n>` or `YYYY-MM`,
see `window_chain`); anything else raises ConfigError, since its dates cannot be reconstructed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import requests
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from schemas.config import ArxivDomain, ArxivWindow, EdgarDomain, FrameConfig
from schemas.release import SEMVER, semver_key
from tasks.errors import ConfigError, FrameInputError
from tasks.fetch.edgar import SUBMISSIONS_URL, USER_AGENT_PROBLEM
from tasks.fetch.mirror import company_filings, edgar_manifest, read_arxiv_manifest, select_papers

# Live EDGAR retries (module level so tests can shorten the wait).
HTTP_ATTEMPTS = 4
HTTP_WAIT = wait_exponential(multiplier=0.5, max=4)
HTTP_TIMEOUT_S = 60.0
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_W_LABEL = re.compile(r"W([1-9]\d*)")
_MONTH_LABEL = re.compile(r"\d{4}-\d{2}(-\d{2})?")


class DiscoveryHTTPError(FrameInputError):
    """A discovery request failed: the message names the URL and the HTTP status (or the error)."""


class _Transient(Exception):
    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


# ---- EDGAR ------------------------------------------------------------------------------------


def discover_edgar(
    cfg: FrameConfig,
    domain: EdgarDomain,
    known: list[str],
    *,
    session: requests.Session | None,
    periods_skipped: Callable[[EdgarDomain, str, str], int],
) -> EdgarDomain:
    """The domain with the released (`known`) periods and, when it asks for discovery, the next editions
    the source lists; `periods_skipped` is the kind's count of the periods between two of its snapshots."""
    periods = set(domain.periods)
    for snap in known:
        try:
            periods.add(dt.date.fromisoformat(snap))
        except ValueError:
            raise ConfigError(
                f"domains.{domain.name}", f"released snapshot {snap!r} is not an ISO period-end date"
            ) from None
    update: dict = {}
    if domain.discover:
        if cfg.source.mode == "mirror":
            found, where, year_end = mirror_edgar_periods(cfg, domain), str(edgar_manifest(cfg)), None
        else:
            found, where, year_end = live_edgar_listing(cfg, domain, session=session)
        if domain.fiscal_year_end is None and year_end:
            update["fiscal_year_end"] = year_end  # the filer's own: pairs its 10-Qs across the year end
        grown = domain.model_copy(update=update)
        periods.update(next_editions(grown, sorted(periods), found, where, periods_skipped))
    return EdgarDomain.model_validate({**domain.model_dump(), **update, "periods": sorted(periods)})


def next_editions(
    domain: EdgarDomain,
    have: list[dt.date],
    found: list[dt.date],
    where: str,
    periods_skipped: Callable[[EdgarDomain, str, str], int],
) -> list[dt.date]:
    """The editions of `found` after the last of `have`, each the next edition of the one before it:
    discovery never skips a period. FrameInputError naming the listing `where` when the source lists a
    later edition but not the next one (a gap: the pair would skip periods)."""
    newer = sorted(p for p in set(found) if p > have[-1])
    # every period known and listed: what the fiscal year end is inferred from when it is not given
    listed = domain.model_copy(update={"periods": sorted({*have, *found})})
    chain, last = [], have[-1]
    for p in newer:
        skipped = periods_skipped(listed, last.isoformat(), p.isoformat())
        if skipped:
            raise FrameInputError(
                where,
                f"domain {domain.name}: the {domain.form} after {last} is not listed, the next one is {p} "
                f"({skipped} period(s) later): discovery appends consecutive editions only",
            )
        chain.append(p)
        last = p
    return chain


def mirror_edgar_periods(cfg: FrameConfig, domain: EdgarDomain) -> list[dt.date]:
    """Distinct ascending period_end dates of the mirror's filings of this company and form."""
    out: set[dt.date] = set()
    for row in company_filings(cfg, domain):
        try:
            out.add(dt.date.fromisoformat(row.fields["period_end"].strip()))
        except ValueError:
            raise FrameInputError(
                row.where, f"period_end {row.fields['period_end']!r} is not an ISO date"
            ) from None
    return sorted(out)


def _domain_field(cfg: FrameConfig, domain: EdgarDomain | ArxivDomain, field: str) -> str:
    for i, d in enumerate(cfg.domains):
        if d.name == domain.name:
            return f"domains[{i}].{field}"
    return f"domains.{domain.name}.{field}"


def live_edgar_listing(
    cfg: FrameConfig, domain: EdgarDomain, *, session: requests.Session | None = None
) -> tuple[list[dt.date], str, str | None]:
    """(distinct ascending reportDate values of the company's filings with form == domain.form exactly,
    the submissions URL, the company's fiscal year end as MM-DD or None) from the submissions JSON's
    `filings.recent` (EDGAR's most recent >= 1000 filings / 1 year) and `fiscalYearEnd`."""
    if domain.cik is None:
        raise ConfigError(
            _domain_field(cfg, domain, "cik"),
            f"domain {domain.name}: the company's CIK is needed for discovery in live mode",
        )
    name, email = cfg.source.edgar.resolved()
    if not name or not email:
        raise ConfigError("source.edgar", USER_AGENT_PROBLEM)
    url = SUBMISSIONS_URL.format(cik=domain.cik)
    payload = get_json(url, headers={"User-Agent": f"{name} {email}"}, session=session)
    try:
        recent = payload["filings"]["recent"]
        forms, dates = recent["form"], recent["reportDate"]
        if len(forms) != len(dates):
            raise ValueError("form and reportDate arrays differ in length")
        out = {dt.date.fromisoformat(d) for f, d in zip(forms, dates, strict=True) if f == domain.form and d}
    except (KeyError, TypeError, ValueError) as exc:
        raise FrameInputError(url, f"unexpected submissions JSON ({exc.__class__.__name__}: {exc})") from None
    return sorted(out), url, _month_day_text(payload.get("fiscalYearEnd"))


def live_edgar_periods(
    cfg: FrameConfig, domain: EdgarDomain, *, session: requests.Session | None = None
) -> list[dt.date]:
    """The reportDate values of `live_edgar_listing`."""
    return live_edgar_listing(cfg, domain, session=session)[0]


def _month_day_text(value: object) -> str | None:
    """EDGAR's fiscalYearEnd ("0926") as MM-DD; None when absent or not a month-day."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}", value):
        return None
    try:
        return dt.date(2000, int(value[:2]), int(value[2:])).strftime("%m-%d")  # 2000: 02-29 is valid
    except ValueError:
        return None


def get_json(url: str, *, headers: dict[str, str], session: requests.Session | None = None) -> dict:
    """GET a JSON document, retrying connection errors, timeouts, 429 and 5xx (HTTP_ATTEMPTS tries).

    Raises DiscoveryHTTPError (one line: URL, status or error) when it fails for good.
    """
    getter = session or requests

    def once() -> dict:
        try:
            resp = getter.get(url, headers=headers, timeout=HTTP_TIMEOUT_S)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise _Transient(f"request failed ({exc.__class__.__name__})") from None
        except requests.RequestException as exc:
            raise DiscoveryHTTPError(url, f"request failed ({exc.__class__.__name__}: {exc})") from None
        if resp.status_code in _TRANSIENT_STATUS:
            raise _Transient(f"HTTP {resp.status_code}")
        if resp.status_code != 200:
            raise DiscoveryHTTPError(url, f"HTTP {resp.status_code} {resp.reason or ''}".rstrip())
        try:
            data = resp.json()
        except ValueError:
            raise DiscoveryHTTPError(url, "HTTP 200 but the body is not JSON") from None
        if not isinstance(data, dict):
            raise DiscoveryHTTPError(url, "HTTP 200 but the JSON is not an object")
        return data

    retrying = Retrying(
        stop=stop_after_attempt(HTTP_ATTEMPTS),
        wait=HTTP_WAIT,
        retry=retry_if_exception(lambda e: isinstance(e, _Transient)),
        reraise=True,
    )
    try:
        return retrying(once)
    except _Transient as exc:
        raise DiscoveryHTTPError(url, f"{exc.problem} after {HTTP_ATTEMPTS} attempts") from None


# ---- arXiv ------------------------------------------------------------------------------------


def add_months(day: dt.date, months: int) -> dt.date:
    """`day` moved by whole calendar months, clamped to the target month's last day."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    nxt = dt.date(year + (month == 12), month % 12 + 1, 1)
    return day.replace(year=year, month=month, day=min(day.day, (nxt - dt.timedelta(days=1)).day))


def next_window(prev: ArxivWindow, months: int, label: str) -> ArxivWindow:
    """The window starting the day after `prev` ends and lasting `months` months (end inclusive)."""
    start = prev.end + dt.timedelta(days=1)
    return ArxivWindow(label=label, start=start, end=add_months(start, months) - dt.timedelta(days=1))


def window_chain(windows: list[ArxivWindow], months: int) -> Iterator[ArxivWindow]:
    """Endless consecutive windows after the last of `windows`.

    Labels: `W<n+1>`, `W<n+2>`, .. when every label of `windows` is `W<n>` (n = the highest number);
    otherwise the start month `YYYY-MM`, or the start day `YYYY-MM-DD` if that month label is taken.
    """
    numbers = [_W_LABEL.fullmatch(w.label) for w in windows]
    n = max(int(m.group(1)) for m in numbers) if all(numbers) else None
    taken = {w.label for w in windows}
    prev = windows[-1]
    while True:
        start = prev.end + dt.timedelta(days=1)
        if n is not None:
            n += 1
            label = f"W{n}"
        else:
            label = f"{start:%Y-%m}"
            if label in taken:
                label = start.isoformat()
        taken.add(label)
        prev = next_window(prev, months, label)
        yield prev


def _reconstruct(domain: ArxivDomain, labels: set[str]) -> list[ArxivWindow]:
    """The generated windows (see window_chain) carrying `labels`; ConfigError for a label that is not one."""
    where = f"domains.{domain.name}"
    if not labels:
        return []

    def fail(label: str) -> ConfigError:
        why = (
            "the domain has no window_months to regenerate it"
            if domain.window_months is None
            else f"it is not a window generated after {domain.windows[-1].label} every "
            f"{domain.window_months} months"
        )
        return ConfigError(
            where,
            f"released window {label!r} is not in the config's windows and its dates cannot be "
            f"reconstructed ({why}); add it to windows with its start and end",
        )

    if domain.window_months is None:
        raise fail(sorted(labels)[0])
    # How far the chain must run: the highest W number, and the latest date a label names.
    max_n, max_date = 0, None
    for label in sorted(labels):
        if m := _W_LABEL.fullmatch(label):
            max_n = max(max_n, int(m.group(1)))
        elif _MONTH_LABEL.fullmatch(label):
            try:
                day = dt.date.fromisoformat(label if len(label) == 10 else label + "-01")
            except ValueError:
                raise fail(label) from None
            max_date = day if max_date is None else max(max_date, day)
        else:
            raise fail(label)
    wanted, found = set(labels), []
    for steps, window in enumerate(window_chain(list(domain.windows), domain.window_months), start=1):
        if window.label in wanted:
            wanted.discard(window.label)
            found.append(window)
        if not wanted or (steps >= max_n and (max_date is None or window.start > max_date)):
            break
    if wanted:
        raise fail(sorted(wanted)[0])
    return found


def discover_arxiv(cfg: FrameConfig, domain: ArxivDomain, known: list[str], today: dt.date) -> ArxivDomain:
    in_config = {w.label for w in domain.windows}
    windows = list(domain.windows) + _reconstruct(domain, {k for k in known if k not in in_config})
    windows.sort(key=lambda w: w.start)
    if domain.window_months is not None:
        rows = read_arxiv_manifest(cfg) if cfg.source.mode == "mirror" else None
        # Continue the same chain as _reconstruct (from the config's last window) past the union's last.
        last_end = windows[-1].end
        for window in window_chain(list(domain.windows), domain.window_months):
            if window.end <= last_end:
                continue
            if window.end >= today:
                break
            if rows is not None and len(select_papers(rows, domain, window)) < domain.papers_per_window:
                break
            windows.append(window)
    dumped = [w.model_dump() for w in windows]
    return ArxivDomain.model_validate({**domain.model_dump(), "windows": dumped})


# ---- releases ---------------------------------------------------------------------------------


def _semver_key(version: str) -> tuple:
    try:
        return semver_key(version)
    except ValueError:
        raise FrameInputError("release version", f"{version!r} is not semver X.Y.Z") from None


def latest_version(parent: Path, below: str | None = None) -> Path | None:
    """The highest version folder under `parent` by semver precedence (only those below `below` when
    given) that holds a manifest.json; hidden, temporary and non-semver folders are ignored."""
    limit = semver_key(below) if below is not None else None
    found = [
        p
        for p in (parent.iterdir() if parent.is_dir() else [])
        if SEMVER.fullmatch(p.name)
        and (limit is None or semver_key(p.name) < limit)
        and (p / "manifest.json").is_file()
    ]
    return max(found, key=lambda p: semver_key(p.name), default=None)


def latest_release(releases_dir: Path, name: str) -> Path | None:
    """The highest-semver `releases_dir/name/<version>` folder holding a manifest.json, or None.

    Hidden and temporary folders (`.tmp-..`) and names that are not semver are ignored.
    """
    return latest_version(Path(releases_dir) / name)


def _natural(label: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.findall(r"\d+|\D+", label)]


def released_snapshots(release: Path) -> dict[str, list[str]]:
    """domain -> its distinct snapshots in the release's reports.parquet (natural order: W2 before W10)."""
    import pyarrow.parquet as pq

    path = Path(release) / "reports.parquet"
    if not path.is_file():
        raise FrameInputError(path, "release has no reports.parquet")
    try:
        table = pq.read_table(path, columns=["domain", "snapshot"])
    except (OSError, ValueError, KeyError) as exc:
        raise FrameInputError(path, f"cannot read domain/snapshot columns ({exc})") from None
    out: dict[str, set[str]] = {}
    for domain, snapshot in zip(
        table.column("domain").to_pylist(), table.column("snapshot").to_pylist(), strict=True
    ):
        out.setdefault(str(domain), set()).add(str(snapshot))
    return {d: sorted(s, key=_natural) for d, s in sorted(out.items())}


def next_version(version: str, bump: str = "minor") -> str:
    """'0.1.0' -> '0.2.0' (minor), '0.1.1' (patch), '1.0.0' (major); a pre-release suffix is dropped."""
    major, minor, patch = _semver_key(version)[:3]
    if bump == "major":
        return f"{major + 1}.0.0"
    if bump == "minor":
        return f"{major}.{minor + 1}.0"
    if bump == "patch":
        return f"{major}.{minor}.{patch + 1}"
    raise FrameInputError("version bump", f"{bump!r} is not one of major, minor, patch")
