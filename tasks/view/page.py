"""The viewer's page shell and safe rendering: escaping, Markdown without raw HTML, sortable tables, file
names of pages.

Every page is self-contained (inline CSS and one inline script) and carries a Content-Security-Policy
that allows only that script (by its hash), inline styles and data: images: a report that smuggles markup
past the renderer still cannot run code or fetch anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from markdown_it import MarkdownIt

__all__ = [
    "esc",
    "fmt",
    "markdown_headings",
    "markdown_html",
    "num_cell",
    "page",
    "page_name",
    "sortable_table",
    "table",
]

# Sorts a table by a column: clicking a header, or (the page's main table) `?sort=<column>&dir=asc|desc`
# (or the same after `#`) on load. Cells carry their sort key in data-v (numbers), rows without one go last.
SCRIPT = """
(function(){
function key(td,num){var v=td?td.getAttribute('data-v'):null;if(v===null)v=td?td.textContent:'';
if(!num)return v.toLowerCase();var x=parseFloat(v);return isNaN(x)?null:x;}
function sortBy(t,name,dir){var hs=t.tHead.rows[0].cells,i=-1;
for(var j=0;j<hs.length;j++){if(hs[j].getAttribute('data-col')===name)i=j;hs[j].removeAttribute('aria-sort');}
if(i<0)return false;var num=hs[i].getAttribute('data-num')==='1',b=t.tBodies[0];
var rows=Array.prototype.slice.call(b.rows);var s=dir==='asc'?1:-1;
rows.sort(function(p,q){var a=key(p.cells[i],num),c=key(q.cells[i],num);
if(a===null&&c===null)return 0;if(a===null)return 1;if(c===null)return -1;return a<c?-s:(a>c?s:0);});
rows.forEach(function(r){b.appendChild(r);});
hs[i].setAttribute('aria-sort',dir==='asc'?'ascending':'descending');
t.setAttribute('data-sorted',name+' '+dir);
return true;}
var ts=document.querySelectorAll('table.sortable');
ts.forEach(function(t){var hs=t.tHead.rows[0].cells;Array.prototype.forEach.call(hs,function(h){
h.addEventListener('click',function(){var d=h.getAttribute('aria-sort')==='descending'?'asc':'desc';
sortBy(t,h.getAttribute('data-col'),d);});});});
var q=new URLSearchParams(location.search||location.hash.replace(/^#/,''));var name=q.get('sort');
if(name)document.querySelectorAll('table.sortable[data-main]').forEach(function(t){
sortBy(t,name,q.get('dir')==='asc'?'asc':'desc');});
})();
""".strip()
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'"
)
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5rem auto;max-width:1500px;
padding:0 1rem;color:#1d1d1f;line-height:1.45;font-size:15px}
h1{font-size:1.5rem;border-bottom:2px solid #ddd;padding-bottom:.3rem;overflow-wrap:anywhere}
h2{margin-top:1.8rem;font-size:1.2rem}h3{font-size:1.05rem}nav{font-size:.9rem;margin-bottom:.5rem}
table{border-collapse:collapse;margin:.5rem 0 1rem}th,td{border:1px solid #d8d8d8;padding:3px 7px;
vertical-align:top;font-size:.86rem;text-align:left}th{background:#f2f2f4}
table.sortable th{cursor:pointer;user-select:none}th[aria-sort=descending]::after{content:" \\25BC"}
th[aria-sort=ascending]::after{content:" \\25B2"}
td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
tbody tr:nth-child(even){background:#fafafa}code{background:#f2f2f4;padding:0 3px}a{color:#0a58ca}
.wide{overflow-x:auto}.cols{display:flex;gap:12px;overflow-x:auto;align-items:flex-start}
.col{flex:0 0 560px;max-width:560px;border:1px solid #ddd;border-radius:4px;background:#fff}
.col>h3{margin:0;padding:6px 10px;background:#f2f2f4;border-bottom:1px solid #ddd;position:sticky;top:0}
.doc{padding:0 12px;max-height:80vh;overflow:auto;font-size:.88rem;overflow-wrap:anywhere}
.doc table{display:block;overflow-x:auto}.doc td,.doc th{overflow-wrap:normal;min-width:4em}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}
.ok{color:#116329}.bad{color:#a40e26}.muted{color:#666}.note{background:#fff8c5;padding:4px 8px}
details{margin:.3rem 0 .6rem}summary{cursor:pointer}td pre{font-size:.8rem;max-height:14em;overflow:auto}
.diff td{font-family:ui-monospace,monospace;font-size:.8rem;white-space:pre-wrap;overflow-wrap:anywhere}
.diff .add{background:#e6ffec}.diff .del{background:#ffebe9}.diff .hunk{background:#ddf4ff;color:#555}
""".strip()


def esc(text: object) -> str:
    """`text` as HTML text or attribute value (quotes escaped too)."""
    return html.escape("" if text is None else str(text), quote=True)


def fmt(value: object, digits: int = 3) -> str:
    """A score for display: fixed digits, "–" for missing/NaN."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    return "–" if math.isnan(x) else f"{x:.{digits}f}"


def page_name(text: str, keep: int = 80) -> str:
    """A portable file stem for an instance or system name: readable characters kept (at most `keep`), the
    rest "_", and a short digest so that two names which read alike never share a page."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", text.replace("->", "__")).strip("._")[:keep] or "x"
    return f"{stem}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:10]}"


def _link_as_text(renderer, tokens, idx, options, env):  # noqa: ANN001 (markdown-it's render-rule signature)
    """A link renders as its text followed by its target in <code>: never an href (reports are untrusted
    and pages must not reach the network)."""
    tok = tokens[idx]
    if tok.type == "link_open":
        env.setdefault("_links", []).append(tok.attrGet("href") or "")
        return '<span class="link">'
    target = env["_links"].pop() if env.get("_links") else ""
    return f"</span> <code>&lt;{esc(target)}&gt;</code>" if target else "</span>"


def _image_as_text(renderer, tokens, idx, options, env):  # noqa: ANN001
    tok = tokens[idx]
    alt = "".join(c.content for c in (tok.children or []))
    return f'<span class="muted">[image: {esc(alt)} &lt;{esc(tok.attrGet("src") or "")}&gt;]</span>'


_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").enable("strikethrough")
_MD.add_render_rule("link_open", _link_as_text)
_MD.add_render_rule("link_close", _link_as_text)
_MD.add_render_rule("image", _image_as_text)


def markdown_html(text: str) -> str:
    """Markdown -> HTML with raw HTML shown as text (html=False), links and images as text."""
    return _MD.render(text or "", {})


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table of already-escaped cells (`headers` escaped here)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    c = f' class="{esc(cls)}"' if cls else ""
    return f'<div class="wide"><table{c}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _cell(c: str) -> str:
    return c if c.startswith("<td") else f"<td>{c}</td>"


def num_cell(value: object, digits: int = 3) -> str:
    """A numeric cell with its sort key."""
    text = fmt(value, digits)
    key = "" if text == "–" else f' data-v="{float(value):.6g}"'  # type: ignore[arg-type]
    return f'<td class="n"{key}>{text}</td>'


def sortable_table(
    columns: Sequence[tuple[str, str, bool]], rows: Iterable[Sequence[str]], main: bool = False
) -> str:
    """A table the page's script sorts on a click: `columns` = (key, header text, numeric); the page's
    `main` table also by `?sort=<key>&dir=asc|desc` on load."""
    head = "".join(
        f'<th data-col="{esc(k)}" data-num="{int(n)}" title="sort by {esc(t)}">{esc(t)}</th>'
        for k, t, n in columns
    )
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    return (
        f'<div class="wide"><table class="sortable"{" data-main" if main else ""}>'
        f"<thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


def page(title: str, body: str, crumbs: Sequence[tuple[str, str]] = ()) -> str:
    """A whole page: `body` is HTML; `crumbs` = (relative href, label) links shown above the title."""
    nav = " / ".join(f'<a href="{esc(h)}">{esc(t)}</a>' for h, t in crumbs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"{f'<nav>{nav}</nav>' if nav else ''}<h1>{esc(title)}</h1>\n{body}\n"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


# Headings need the block structure only: inline parsing (most of the time) is skipped.
_BLOCKS = MarkdownIt("commonmark", {"html": False}).enable("table")
_BLOCKS.core.ruler.disable(["inline", "text_join"])


@lru_cache(maxsize=512)  # Y is aligned with every system's report
def markdown_headings(text: str) -> tuple[tuple[int, str], ...]:
    """(level, title) of every heading of a Markdown text, in order."""
    tokens = _BLOCKS.parse(text or "")
    return tuple(
        (int(tok.tag[1:]), tokens[i + 1].content.strip())
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and i + 1 < len(tokens)
    )
