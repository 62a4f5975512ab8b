"""Run any program as a report system (a `command` system): one fresh folder per instance.

The folder holds what a participant may see, never the target report Y:
  sample.md                  the sample report S
  grounding/<doc_id>.md      each grounding document of G (file names made safe)
  grounding.jsonl            one object per document: its row (markdown included) and "path"
  instance.json              the instance's metadata without the target, plus "sample" and "grounding"
The program runs with that folder as cwd and in FRAME_INSTANCE_DIR, with a timeout (its whole process
group is killed then). The report is its stdout, or the file `output` it writes in the folder, decoded
as UTF-8. A timeout, a non-zero exit, empty or undecodable output becomes a failed Generation (one-line
error); the folder is removed afterwards in every case.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tasks.generate.systems import Generation, without_target

__all__ = ["INSTANCE_DIR_ENV", "run_command", "write_instance_folder"]

INSTANCE_DIR_ENV = "FRAME_INSTANCE_DIR"
_STDERR_CHARS = 300


def _jsonable(value: Any) -> Any:
    """json.dumps default: numpy arrays/scalars (rows read through pandas) as lists/numbers, else str."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _doc_file(doc_id: str, taken: set[str]) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", doc_id).strip(".") or "doc"
    name, n = f"{stem}.md", 1
    while name in taken:  # two ids that are made safe alike keep distinct files
        n += 1
        name = f"{stem}-{n}.md"
    taken.add(name)
    return name


def write_instance_folder(
    folder: Path, instance: Mapping[str, Any], grounding: Iterable[Mapping[str, Any]]
) -> None:
    """Write S, G and the instance's metadata (never the target) into `folder` (see the module docstring)."""
    visible = without_target(instance)
    (folder / "grounding").mkdir(parents=True, exist_ok=True)
    (folder / "sample.md").write_text(str(visible.get("sample_markdown") or ""), encoding="utf-8")
    taken: set[str] = set()
    lines, paths = [], []
    for row in grounding:
        path = "grounding/" + _doc_file(str(row.get("doc_id")), taken)
        (folder / path).write_text(str(row.get("markdown") or ""), encoding="utf-8")
        lines.append(json.dumps({**row, "path": path}, ensure_ascii=False, default=_jsonable))
        paths.append(path)
    (folder / "grounding.jsonl").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    meta = {k: v for k, v in visible.items() if k != "sample_markdown"}
    meta.update({"sample": "sample.md", "grounding": paths})
    text = json.dumps(meta, ensure_ascii=False, indent=2, sort_keys=True, default=_jsonable)
    (folder / "instance.json").write_text(text + "\n", encoding="utf-8")


def _last_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    if not lines:
        return "nothing on stderr"
    last = " ".join(lines[-1].split())
    return last if len(last) <= _STDERR_CHARS else last[: _STDERR_CHARS - 3] + "..."


def _run(
    argv: list[str], folder: Path, env: dict[str, str], timeout_s: float
) -> tuple[int | None, bytes, bytes]:
    """(exit code, stdout, stderr); exit code None when the timeout killed the program's process group."""
    proc = subprocess.Popen(
        argv,
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: a timeout also stops what it started
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a process that left the group still holds the pipes
            proc.kill()
            out, err = b"", b""
        return None, out, err
    return proc.returncode, out, err


def _report(folder: Path, output: str, stdout: bytes) -> tuple[str | None, str | None]:
    """(markdown, error) from stdout or the output file."""
    if output == "stdout":
        raw, empty = stdout, "printed nothing"
    else:
        target = folder / output
        if not target.is_file():
            return None, f"wrote no {output} in its folder"
        raw, empty = target.read_bytes(), f"wrote nothing to {output}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{'stdout' if output == 'stdout' else output} is not UTF-8 (byte {exc.start})"
    return (None, empty) if not text.strip() else (text, None)


def run_command(
    argv: list[str],
    instance: Mapping[str, Any],
    grounding: Iterable[Mapping[str, Any]],
    *,
    timeout_s: float,
    output: str = "stdout",
    env: Mapping[str, str] | None = None,
    workdir_root: Path | None = None,
    files: Mapping[str, str] | None = None,
) -> Generation:
    """Run `argv` on one instance (see the module docstring); `workdir_root` holds the instance folders
    (default: the system's temporary folder); `files` are extra {name: text} files of the instance folder
    (e.g. a generation skill)."""
    iid = str(instance["instance_id"])
    if workdir_root is not None:
        Path(workdir_root).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="frame-instance-", dir=workdir_root))
    try:
        write_instance_folder(folder, instance, grounding)
        for name, text in (files or {}).items():
            (folder / Path(name).name).write_text(text, encoding="utf-8")
        full_env = {**os.environ, **(env or {}), INSTANCE_DIR_ENV: str(folder)}
        try:
            code, stdout, stderr = _run(list(argv), folder, full_env, timeout_s)
        except OSError as exc:
            return Generation(
                iid, None, {"kind": "command"}, f"cannot run {argv[0]!r}: {exc.strerror or exc}"
            )
        meta: dict[str, Any] = {"kind": "command", "exit_code": code}
        if code is None:
            return Generation(iid, None, meta, f"timed out after {timeout_s:g} s")
        if code != 0:
            how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return Generation(iid, None, meta, f"{how}: {_last_line(stderr)}")
        markdown, error = _report(folder, output, stdout)
        return Generation(iid, markdown, meta, error)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
