"""The Forms' item lists: which Part/Items a 10-Q or 10-K has, their titles, and how to read an
item heading whatever a filer's typography (`ITEM 1A.RISK FACTORS`, `Item 7 —`, `1A. Risk Factors`).

Titles are matched by their key words, so a heading is recognised by what the Form calls the item,
not by one filer's spelling; the same lists say which items a filing names (QA's item recall).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FormItem:
    part: int | None  # 10-Q items live in Part I or II; 10-K items are numbered through
    item: str  # "1", "1A", ...
    slug: str  # stable file-name part, the same for every filer
    title: str  # the Form's own title
    pattern: re.Pattern[str]  # key words of the title, matched at the start of a heading's rest


def _p(words: str) -> re.Pattern[str]:
    # Only a heading's own separators may stand before the title: `Item 1A, "Risk Factors," in our
    # 10-K` is a cross-reference, not the item.
    return re.compile(r"^[\s.:\-—–]*(?:" + words + r")", re.I)


_APOS = r"[’'`]?"
ITEMS_10Q: tuple[FormItem, ...] = (
    FormItem(
        1,
        "1",
        "financial-statements",
        "Financial Statements",
        _p(r"(?:condensed\s+|consolidated\s+|interim\s+|unaudited\s+)*financial\s+statements"),
    ),
    FormItem(
        1,
        "2",
        "mdna",
        "Management's Discussion and Analysis of Financial Condition and Results of Operations",
        _p(r"management" + _APOS + r"s?\s+discussion"),
    ),
    FormItem(
        1,
        "3",
        "market-risk",
        "Quantitative and Qualitative Disclosures About Market Risk",
        _p(r"quantitative\s+and\s+qualitative|qualitative\s+and\s+quantitative"),
    ),
    FormItem(
        1, "4", "controls-and-procedures", "Controls and Procedures", _p(r"controls\s+and\s+procedures")
    ),
    FormItem(2, "1", "legal-proceedings", "Legal Proceedings", _p(r"legal\s+proceedings")),
    FormItem(2, "1A", "risk-factors", "Risk Factors", _p(r"risk\s+factors")),
    FormItem(
        2,
        "2",
        "equity-sales-and-repurchases",
        "Unregistered Sales of Equity Securities and Use of Proceeds",
        _p(
            r"unregistered\s+sales|(?:issuer\s+)?purchases?\s+of\s+equity|changes\s+in\s+securities"
            r"|sales\s+of\s+unregistered|share\s+repurchases?"
        ),
    ),
    FormItem(
        2,
        "3",
        "defaults-on-senior-securities",
        "Defaults Upon Senior Securities",
        _p(r"defaults\s+(?:up)?on\s+senior"),
    ),
    FormItem(
        2,
        "4",
        "mine-safety",
        "Mine Safety Disclosures",
        _p(r"mine\s+safety|\(?removed\s+and\s+reserved|submission\s+of\s+matters"),
    ),
    FormItem(2, "5", "other-information", "Other Information", _p(r"other\s+information")),
    FormItem(2, "6", "exhibits", "Exhibits", _p(r"exhibits")),
)
ITEMS_10K: tuple[FormItem, ...] = (
    FormItem(None, "1", "business", "Business", _p(r"business")),
    FormItem(None, "1A", "risk-factors", "Risk Factors", _p(r"risk\s+factors")),
    FormItem(None, "1B", "unresolved-staff-comments", "Unresolved Staff Comments", _p(r"unresolved\s+staff")),
    FormItem(None, "1C", "cybersecurity", "Cybersecurity", _p(r"cyber\s*security")),
    FormItem(None, "2", "properties", "Properties", _p(r"(?:description\s+of\s+)?propert(?:y|ies)")),
    FormItem(None, "3", "legal-proceedings", "Legal Proceedings", _p(r"legal\s+proceedings")),
    FormItem(
        None,
        "4",
        "mine-safety",
        "Mine Safety Disclosures",
        _p(r"mine\s+safety|\(?removed\s+and\s+reserved|submission\s+of\s+matters|\[?reserved"),
    ),
    FormItem(
        None,
        "5",
        "market-for-equity",
        "Market for Registrant's Common Equity, Related Stockholder "
        "Matters and Issuer Purchases of Equity Securities",
        _p(
            r"market\s+for\s+(?:the\s+)?(?:registrant|"
            r"company|our|common)"
        ),
    ),
    FormItem(
        None, "6", "reserved", "[Reserved]", _p(r"\[?\s*reserved|selected\s+(?:consolidated\s+)?financial")
    ),
    FormItem(
        None,
        "7",
        "mdna",
        "Management's Discussion and Analysis of Financial Condition and Results of Operations",
        _p(r"management" + _APOS + r"s?\s+discussion"),
    ),
    FormItem(
        None,
        "7A",
        "market-risk",
        "Quantitative and Qualitative Disclosures About Market Risk",
        _p(r"quantitative\s+and\s+qualitative|qualitative\s+and\s+quantitative"),
    ),
    FormItem(
        None,
        "8",
        "financial-statements",
        "Financial Statements and Supplementary Data",
        _p(r"(?:consolidated\s+)?financial\s+statements"),
    ),
    FormItem(
        None,
        "9",
        "changes-in-accountants",
        "Changes in and Disagreements with Accountants on Accounting and Financial Disclosure",
        _p(r"changes\s+in\s+and\s+disagreements"),
    ),
    FormItem(
        None, "9A", "controls-and-procedures", "Controls and Procedures", _p(r"controls\s+and\s+procedures")
    ),
    FormItem(None, "9B", "other-information", "Other Information", _p(r"other\s+information")),
    FormItem(
        None,
        "9C",
        "foreign-jurisdiction-inspections",
        "Disclosure Regarding Foreign Jurisdictions that Prevent Inspections",
        _p(r"disclosure\s+regarding\s+foreign"),
    ),
    FormItem(
        None,
        "10",
        "directors-and-governance",
        "Directors, Executive Officers and Corporate Governance",
        _p(r"directors"),
    ),
    FormItem(None, "11", "executive-compensation", "Executive Compensation", _p(r"executive\s+compensation")),
    FormItem(
        None,
        "12",
        "security-ownership",
        "Security Ownership of Certain Beneficial Owners and Management and Related Stockholder Matters",
        _p(r"security\s+ownership"),
    ),
    FormItem(
        None,
        "13",
        "relationships-and-independence",
        "Certain Relationships and Related Transactions, and Director Independence",
        _p(r"certain\s+relationships"),
    ),
    FormItem(
        None, "14", "accountant-fees", "Principal Accountant Fees and Services", _p(r"principal\s+account")
    ),
    FormItem(
        None, "15", "exhibits-and-schedules", "Exhibits and Financial Statement Schedules", _p(r"exhibits?")
    ),
    FormItem(None, "16", "form-10-k-summary", "Form 10-K Summary", _p(r"form\s+10-?k\s+summary")),
)


def form_items(form: str) -> tuple[FormItem, ...]:
    return ITEMS_10K if annual(form) else ITEMS_10Q


def annual(form: str) -> bool:
    return form.upper().startswith("10-K")


def item_label(form: str, part: int | None, item: str | None) -> str | None:
    """The peer-style identifier of an item: `part1item2` (10-Q), `1A` (10-K)."""
    if not item:
        return None
    if annual(form):
        return item.upper()
    return f"part{part}item{item.lower()}" if part else None


# "Item 1A.", "ITEM 7 —", "Item 1B:", "Item 1 BUSINESS" (no letter: the B starts the title), "Items 1 and 2."
ITEM_HEAD = re.compile(
    r"^items?\s*(?P<num>\d{1,2})\s*(?P<letter>[a-c](?![a-z]))?"
    r"(?P<more>(?:\s*(?:,|and|&|through|to|-|–)\s*(?:and\s+)?\d{1,2}[a-c]?(?![a-z0-9]))*)"
    r"\s*[.:\-—–]*\s*(?P<rest>.*)$",
    re.I | re.S,
)
_MORE = re.compile(r"(through|to|-|–)?\s*(?:and\s+)?(\d{1,2})([a-c]?)", re.I)


def covered_items(form: str, first: str, more: str) -> list[str]:
    """The items one heading covers: `Items 10, 11, 12, 13 and 14` or `Items 10 through 14`."""
    labels = [it.item for it in form_items(form)]
    out = [first.upper()]
    for m in _MORE.finditer(more or ""):
        nxt = (m.group(2) + m.group(3)).upper()
        if m.group(1) and out[-1] in labels and nxt in labels:  # a range: every item between
            out.extend(labels[labels.index(out[-1]) + 1 : labels.index(nxt) + 1])
        else:
            out.append(nxt)
    seen: list[str] = []
    for x in out:
        if x in labels and x not in seen:
            seen.append(x)
    return seen


PART_HEAD = re.compile(
    r"^part\s*(?P<roman>iv|i{1,3}|[1-4])(?![a-z])\s*[.:\-—–,]*\s*(?P<rest>.*)$", re.I | re.S
)
_ROMAN = {"i": 1, "ii": 2, "iii": 3, "iv": 4, "1": 1, "2": 2, "3": 3, "4": 4}


def part_number(roman: str) -> int:
    return _ROMAN[roman.lower()]


def match_title(form: str, item: str, rest: str) -> list[FormItem]:
    """The Form items numbered `item` whose title the heading's rest starts with."""
    return [it for it in form_items(form) if it.item == item.upper() and it.pattern.match(rest)]


def items_numbered(form: str, item: str) -> list[FormItem]:
    return [it for it in form_items(form) if it.item == item.upper()]


def by_title(form: str, text: str) -> list[FormItem]:
    """Items whose Form title a bare heading starts with (headings without "Item N")."""
    return [it for it in form_items(form) if it.pattern.match(text)]


_NAMED = re.compile(r"\bitems?\s*(\d{1,2})\s*([a-c](?![a-z]))?\s*[.:\-—–]*\s*", re.I)


def form_items_named(form: str, text: str) -> list[str]:
    """Labels of the Form items the text names as "Item N <its title>" (in order of the Form).

    A filing names its items in its table of contents, in its headings, or in a cross-reference
    index; an item it never names (a smaller company's omitted Item 3) is not expected."""
    found: set[str] = set()
    for m in _NAMED.finditer(text):
        item = m.group(1) + (m.group(2) or "").upper()
        rest = text[m.end() : m.end() + 120]
        for it in match_title(form, item, rest):
            found.add(item_label(form, it.part, it.item) or "")
    return [lab for it in form_items(form) if (lab := item_label(form, it.part, it.item)) in found]
