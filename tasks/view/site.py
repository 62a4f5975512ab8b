"""Writing the viewer's site: every page into a temporary folder beside `out`, then renamed into place,
so a failure never leaves half a site and never destroys an earlier one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tasks.atomic import DIR_MODE
from tasks.errors import FrameInputError
from tasks.view.board import index_page, instance_href, system_href, system_page
from tasks.view.instance import diff_href, diff_page, instance_page, pairs
from tasks.view.load import Run

__all__ = ["MARKER", "write_site"]

MARKER = ".frame-view"  # marks a folder this command wrote: only such a folder (or an empty one) is replaced


def _check_out(out: Path) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise FrameInputError(out, "exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise FrameInputError(out, "is a non-empty folder not written by `frame view`: choose another --out")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _pages(run: Run, root: Path) -> int:
    _write(root, "index.html", index_page(run))
    for s in run.systems:
        _write(root, system_href(s), system_page(run, s))
    n = 1 + len(run.systems)
    for inst in run.instances.to_dict("records"):
        iid = str(inst["instance_id"])
        _write(root, instance_href(iid), instance_page(run, inst))
        for a, b in pairs(run, iid):
            _write(root, diff_href(iid, a, b), diff_page(run, iid, a, b))
            n += 1
        n += 1
    return n


def write_site(run: Run, out: Path) -> int:
    """Write the site of `run` to `out` (absent, empty, or an earlier site); returns the number of pages."""
    out = Path(out)
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        n = _pages(run, tmp)
        (tmp / MARKER).write_text("written by `frame view`; replaced by the next one\n", encoding="utf-8")
        os.chmod(tmp, DIR_MODE)
        _check_out(out)  # again: someone may have written there meanwhile
        old = None
        if out.exists():
            old = out.parent / f"{tmp.name}.old"
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return n
