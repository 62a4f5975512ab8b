"""Folder manifests: a persisted step output says what it holds, so a later run can trust it or redo it.

A grounding or gold report folder ends with MANIFEST.json ({"files": {name: {"sha256", "size"}}}),
written last. `check_folder` compares a folder with its manifest (one line per problem),
`manifest_digest` names a manifest's content (a release records it per input folder). `write_folder`
writes a folder all or nothing: a temp folder beside the target, the manifest last, then one atomic
exchange (`renameat2(RENAME_EXCHANGE)`); where the kernel or file system lacks it, two renames, and
`recover_leftovers` puts the earlier folder back when a kill fell between them.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from tasks.atomic import DIR_MODE, atomic_write_text
from tasks.files import file_kind

MANIFEST_FILE = "MANIFEST.json"
Entries = dict[str, dict[str, str | int]]


def sha256_file(path: Path) -> str:
    """sha256 of a regular file, read in 1 MiB blocks (the one implementation in frame). Anything else (a
    FIFO, a device: reading it could block for ever) is an OSError before it is opened."""
    before = os.stat(path)
    if not stat.S_ISREG(before.st_mode):
        raise OSError(errno.EINVAL, f"not a regular file ({file_kind(before.st_mode)})", str(path))
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for something else since the stat
            raise OSError(errno.EINVAL, "not a regular file (replaced while being opened)", str(path))
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def entries_below(folder: Path, exclude: str = MANIFEST_FILE) -> list[tuple[str, str | None]]:
    """(relative POSIX name, None for a regular file or what else it is: "a symbolic link", "a FIFO", ...)
    of every entry below `folder` that is not a folder, sorted, `exclude` left out. Links are listed, never
    followed (a linked folder is one entry); the walk is iterative, so any depth of folders is fine."""
    folder = Path(folder)
    out: list[tuple[str, str | None]] = []
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(folder / rel if rel else folder) as it:
                entries = list(it)
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                todo.append(name)
            elif name != exclude:
                out.append((name, None if stat.S_ISREG(mode) else file_kind(mode)))
    return sorted(out)


def files_below(folder: Path, exclude: str = MANIFEST_FILE) -> list[str]:
    """Relative POSIX names of every entry below `folder` that is not a folder (regular files, links,
    FIFOs, devices: a listing names them all), sorted, `exclude` left out."""
    return [rel for rel, _ in entries_below(folder, exclude)]


def scan_folder(folder: Path) -> Entries:
    """{relative name: {"sha256", "size"}} of every file below `folder` (its manifest aside)."""
    folder = Path(folder)
    return {
        rel: {"sha256": sha256_file(folder / rel), "size": (folder / rel).stat().st_size}
        for rel in files_below(folder)
    }


def manifest_digest(entries: Mapping[str, Mapping[str, str | int]]) -> str:
    """sha256 of a manifest's entries as canonical JSON: equal folders give equal digests."""
    canon = json.dumps(entries, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def write_manifest(folder: Path) -> Entries:
    """Write `folder/MANIFEST.json` for the files the folder holds now; call it after the last file."""
    entries = scan_folder(folder)
    text = json.dumps({"files": entries}, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_text(Path(folder) / MANIFEST_FILE, text)
    return entries


def read_manifest(folder: Path) -> Entries:
    """The entries of `folder/MANIFEST.json`; ValueError (one line) when absent or not a manifest."""
    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        raise ValueError("no manifest")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["files"]
        ok = isinstance(entries, dict) and all(
            isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("size"), int)
            for v in entries.values()
        )
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, RecursionError):
        ok = False
    if not ok:
        raise ValueError(f"{MANIFEST_FILE} is not a manifest")
    return entries


def _inside(rel: str) -> bool:
    """A manifest entry names a file inside its folder: relative, no '..', no empty part."""
    return not (rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in rel.split("/")))


def check_folder(folder: Path) -> list[str]:
    """One line per way `folder` differs from its manifest; empty when it matches."""
    folder = Path(folder)
    if not folder.is_dir():
        return ["folder missing"]
    try:
        entries = read_manifest(folder)
    except ValueError as exc:
        return [str(exc)]
    problems = []
    for rel, want in sorted(entries.items()):
        path = folder / rel
        if not _inside(rel):
            problems.append(f"{rel[:120]!r} is not a file inside the folder")
            continue
        if not path.is_file():
            problems.append(f"{rel} missing")
            continue
        try:
            # the size first: a truncated or grown file needs no hashing to be caught
            same = path.stat().st_size == want["size"] and sha256_file(path) == want["sha256"]
        except OSError as exc:
            problems.append(f"{rel} unreadable ({exc.strerror or exc})")
            continue
        if not same:
            problems.append(f"{rel} changed since it was written")
    problems += [f"extra file {rel}" for rel in files_below(folder) if rel not in entries]
    return problems


def describe(problems: list[str], shown: int = 3) -> str:
    """The first problems of a folder in one line (`a.md changed since it was written, b.md missing`)."""
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return ", ".join(problems[:shown]) + more


def folder_digest(folder: Path) -> str:
    """The digest of the manifest that `folder`'s files would have now (compare with a recorded one)."""
    return manifest_digest(scan_folder(folder))


# ---------------------------------------------------------------- writing a folder all or nothing

RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?:old-(?P<old>\d+)|tmp-(?:(?P<pid>\d+)_)?[A-Za-z0-9_]+)$")


def _renameat2() -> Callable[..., int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError, TypeError):  # not Linux / glibc: no renameat2
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step; False when this system cannot (then nothing moved)."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False  # an old kernel, or a file system without RENAME_EXCHANGE
    raise OSError(err, os.strerror(err), str(b))


def replace_folder(new: Path, target: Path) -> None:
    """Put the finished folder `new` in place of `target` (a folder, or nothing yet).

    With RENAME_EXCHANGE a reader sees the old folder or the new one, never none, and a kill leaves the
    old content in `new` (a `.NAME.tmp-*` leftover). Otherwise two renames: `target` to `.NAME.old-PID`,
    then `new` to `target`; a kill between them leaves no `target`, and `recover_leftovers` (which every
    writer of `target` runs first) moves `.NAME.old-PID` back."""
    if not target.is_dir():
        os.rename(new, target)
    elif exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # it now holds the old content
    else:
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.rename(target, old)
        try:
            os.rename(new, target)
        except BaseException:
            os.rename(old, target)  # the earlier folder stays where it was
            raise
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a folder; the renames are done either way
    finally:
        os.close(fd)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (a process we may not signal counts as alive)."""
    if pid == os.getpid():
        return True  # this process may be writing it right now (another thread)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_leftovers(target: Path) -> list[Path]:
    """Clean what killed writers of `target` left beside it; returns the entries handled.

    A `.NAME.old-PID` of a dead writer with no `target` is the earlier folder of an interrupted
    two-rename replace: it is moved back. Every other leftover of a dead writer (`.NAME.old-PID` when
    `target` exists, `.NAME.tmp-PID_*`, temp folders of older versions without a PID) is removed."""
    target = Path(target)
    if not target.parent.is_dir():
        return []
    found = []
    for p in sorted(target.parent.iterdir()):
        m = _LEFTOVER.match(p.name)
        pid = m and (m["old"] or m["pid"])
        if m and m["name"] == target.name and not (pid and pid_alive(int(pid))):
            found.append((0 if m["old"] else 1, p))
    handled = []
    for is_tmp, p in sorted(found):
        if not is_tmp and not target.exists() and p.is_dir():
            os.rename(p, target)
        elif p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        handled.append(p)
    return handled


def temp_folder(target: Path) -> Path:
    """A new empty folder beside `target`, named `.NAME.tmp-PID_*` (so recovery knows its writer)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-{os.getpid()}_", dir=target.parent))
    os.chmod(tmp, DIR_MODE)  # a folder like any other (mkdtemp's 0700 would follow it into place)
    return tmp


def write_folder(target: Path, fill: Callable[[Path], None]) -> Entries:
    """Write `target` all or nothing: `fill(tmp)` writes the files into a temp folder, the manifest is
    written last, then the temp folder replaces `target`. Returns the manifest's entries."""
    target = Path(target)
    recover_leftovers(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_folder(target)
    try:
        fill(tmp)
        entries = write_manifest(tmp)
        replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return entries
