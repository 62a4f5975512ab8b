"""Run any program as a report system (a `command` system): one fresh folder per instance.

The folder holds what a participant may see, never the target report Y:
  sample.md                  the sample report S
  grounding/<doc_id>.md      each grounding document of G (file names made safe)
  grounding.jsonl            one object per document: its row (markdown included) and "path"
  instance.json              the instance's metadata without the target, plus "sample" and "grounding"
The program runs with that folder as cwd and in FRAME_INSTANCE_DIR, with a timeout, in an environment of
its own: frame's variables that PASS_ENV (PATH, HOME, locale, temp, proxy and CA) or `pass_env` name, and
`env`; an API key frame holds passes only if `pass_env` names it exactly. The report is its stdout, or
the file `output` it writes in the folder (a regular file inside the folder), decoded as UTF-8; at most
`max_chars` characters of it are read: a program printing (or writing) more is stopped. A timeout,
too much output, a non-zero exit, empty or undecodable output becomes a failed Generation (one-line
error). Whatever the outcome, nothing the program started outlives its instance: once it exits (or is
stopped), every process of its session and process group and every process whose environment carries the
instance's random FRAME_INSTANCE_TOKEN (one that left the session) is killed; then the folder is removed.
"""

from __future__ import annotations

import codecs
import fnmatch
import json
import os
import re
import secrets
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.files import NotRegularFile, read_regular, within
from tasks.generate.generation import Generation, without_target

__all__ = [
    "INSTANCE_DIR_ENV",
    "INSTANCE_TOKEN_ENV",
    "MAX_CHARS",
    "PASS_ENV",
    "program_env",
    "run_command",
    "write_instance_folder",
]

INSTANCE_DIR_ENV = "FRAME_INSTANCE_DIR"
INSTANCE_TOKEN_ENV = "FRAME_INSTANCE_TOKEN"  # random per instance: marks every process started for it
MAX_CHARS = 2_000_000  # a report's cap: a submission's default max_chars (schemas.evaluation)
_STDERR_CHARS = 300
_STDERR_KEEP = 64 * 1024  # bytes of stderr kept: its end (an error shows the last line)
_POLL_S = 0.05  # how often the output file's size is looked at while the program runs
_DRAIN_S = 5.0  # how long the pipes are read once every process of the instance is gone
# what any program needs to start, find its tools and reach the network; nothing else of frame's
# environment (API keys, tokens, cloud credentials) reaches a program unless `pass_env` names it
PASS_ENV = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TERM", "NO_COLOR",
    "FORCE_COLOR", "TMPDIR", "TEMP", "TMP", "LD_LIBRARY_PATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT",
)  # fmt: skip


def program_env(
    pass_env: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a program starts with: the variables of `source` (default os.environ) that
    PASS_ENV or `pass_env` name (a name, or a glob such as "HF_*"), then `env`. A glob never matches a
    secret frame knows (a variable listed in FRAME_SECRET_ENVS): only its exact name passes it."""
    from tasks.llm.redact import ENV_NAMES

    source = os.environ if source is None else source
    secret = {n for n in source.get(ENV_NAMES, "").split(",") if n}
    wanted = [*PASS_ENV, *pass_env]
    named = {w for w in pass_env if not any(c in w for c in "*?[")}  # the user's exact names

    def passes(name: str) -> bool:
        if name in named:
            return True
        return name not in secret and any(fnmatch.fnmatchcase(name, w) for w in wanted)

    return {**{k: v for k, v in source.items() if passes(k)}, **(env or {})}


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


def _byte_limit(max_chars: int) -> int:
    """Bytes beyond which a text has more than `max_chars` characters whatever its UTF-8 (<= 4 bytes each)."""
    return 4 * max_chars


def _too_long(output: str, max_chars: int) -> str:
    more = f"more than {max_chars} characters"
    said = f"printed {more}" if output == "stdout" else f"wrote {more} to {output}"
    return f"{said} (max_chars {max_chars})"


@dataclass
class _Pipes:
    """What the program printed: stdout while within `max_chars` characters (kept only when it is the
    report), and the end of stderr."""

    keep_stdout: bool
    max_chars: int
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    chars: int = 0
    too_long: bool = False
    decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))

    def feed(self, name: str, data: bytes) -> None:
        if name == "stderr":
            self.stderr += data
            del self.stderr[:-_STDERR_KEEP]
        elif self.keep_stdout and not self.too_long:
            self.chars += len(self.decoder.decode(data))
            if self.chars > self.max_chars:
                self.too_long = True
                self.stdout.clear()
            else:
                self.stdout += data

    def read(self, sel: selectors.BaseSelector, timeout: float) -> None:
        """One round of reading what the pipes hold, waiting at most `timeout` seconds for it."""
        for key, _ in sel.select(timeout=max(timeout, 0.0)):
            if key.data is None:  # the program's pidfd: it exited
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if data:
                self.feed(key.data, data)
            else:
                sel.unregister(key.fileobj)


def _exited(pid: int) -> bool:
    """Whether the program exited. It is left unreaped, so its pid (its group's and session's id) cannot
    be reused until frame has stopped everything of the instance."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped by someone else
        return True


def _file_too_big(path: Path | None, max_chars: int) -> bool:
    try:
        return path is not None and os.stat(path).st_size > _byte_limit(max_chars)
    except OSError:
        return False


def _watch(
    proc: subprocess.Popen,
    sel: selectors.BaseSelector,
    pipes: _Pipes,
    timeout_s: float,
    output: str,
    folder: Path,
) -> str | None:
    """Read the pipes until the program exits (None) or must be stopped (why: timeout, too much output)."""
    deadline = time.monotonic() + timeout_s
    out = None if output == "stdout" else folder / output
    while not _exited(proc.pid):
        now = time.monotonic()
        if now >= deadline:
            return f"timed out after {timeout_s:g} s"
        pipes.read(sel, min(_POLL_S, deadline - now))
        if pipes.too_long:
            return _too_long("stdout", pipes.max_chars) + ": stopped it"
        if _file_too_big(out, pipes.max_chars):
            return _too_long(output, pipes.max_chars) + ": stopped it"
    return None


def _stat_fields(pid: int) -> tuple[str, int, int]:
    """(state, process group, session) of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return fields[0].decode(), int(fields[2]), int(fields[3])


def _started_for(pid: int, leader: int, needle: bytes) -> bool:
    """Whether the live process `pid` provably belongs to the instance whose program is `leader` (not
    yet reaped): it is in the program's process group or session, or its environment holds the token."""
    try:
        state, group, session = _stat_fields(pid)
        if state in ("Z", "X"):
            return False  # already dead
        if leader in (group, session):
            return True
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\x00")
    except (OSError, ValueError, IndexError):
        return False  # gone, or not ours to read


def _kill(pid: int, leader: int, needle: bytes) -> None:
    """SIGKILL `pid` through a pidfd, checked again once the pidfd is held: a pid reused in between by a
    process that is not the instance's is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if _started_for(pid, leader, needle):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


def _stop_all(leader: int, token: str) -> None:
    """Kill every process started for the instance (see the module docstring). Call while the program's
    process `leader` is not yet reaped."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not hasattr(os, "pidfd_open"):
        return  # no pidfd: the process group is all that can be stopped safely
    needle = f"{INSTANCE_TOKEN_ENV}={token}".encode()
    me = os.getpid()
    for _ in range(100):  # a process may fork while it is looked for: look until none is left
        try:
            pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
        except OSError:
            return  # no /proc: the process group is all that can be told
        found = [p for p in pids if p not in (me, leader) and _started_for(p, leader, needle)]
        if not found:
            return
        for p in found:
            _kill(p, leader, needle)
        time.sleep(0.02)


@dataclass
class _Outcome:
    code: int | None  # exit code; None when frame stopped the program
    stdout: bytes
    stderr: bytes
    stopped: str | None  # why frame stopped it (the error); None when it ended by itself


def _run(
    argv: list[str], folder: Path, env: dict[str, str], timeout_s: float, output: str, max_chars: int
) -> _Outcome:
    """Run the program (see the module docstring); nothing it started is alive when this returns."""
    token = secrets.token_hex(16)
    proc = subprocess.Popen(
        argv,
        cwd=folder,
        env={**env, INSTANCE_TOKEN_ENV: token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a session and process group of its own
    )
    pipes = _Pipes(keep_stdout=output == "stdout", max_chars=max_chars)
    sel = selectors.DefaultSelector()
    try:
        for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, selectors.EVENT_READ, name)
        try:
            pidfd: int | None = os.pidfd_open(proc.pid)  # readable once the program exits: no polling delay
            sel.register(pidfd, selectors.EVENT_READ, None)
        except (OSError, AttributeError):
            pidfd = None
        try:
            stopped = _watch(proc, sel, pipes, timeout_s, output, folder)
        finally:
            _stop_all(proc.pid, token)
            code = proc.wait()
            if pidfd is not None:
                sel.unregister(pidfd)
                os.close(pidfd)
        drain_end = time.monotonic() + _DRAIN_S  # the pipes end once their last writer is gone
        while sel.get_map() and not pipes.too_long and time.monotonic() < drain_end:
            pipes.read(sel, drain_end - time.monotonic())
    finally:
        sel.close()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if stopped is None and pipes.too_long:
        stopped = _too_long("stdout", max_chars)
    return _Outcome(None if stopped else code, bytes(pipes.stdout), bytes(pipes.stderr), stopped)


def _output_file(folder: Path, output: str, max_chars: int) -> tuple[bytes | None, str | None]:
    """(bytes, None) of the output file, a regular file inside the folder; else (None, the error)."""
    root = os.path.realpath(folder)
    real = os.path.realpath(folder / output)
    if not within(real, root):
        return None, f"{output} leads outside its folder (a symbolic link): refused"
    try:
        if stat.S_ISDIR(os.stat(real).st_mode):
            return None, f"wrote no {output} in its folder"
    except OSError:
        return None, f"wrote no {output} in its folder"
    limit = _byte_limit(max_chars)
    try:
        raw = read_regular(real, limit + 1, root)
    except NotRegularFile as exc:
        return None, f"{output} is {exc}: refused"
    except OSError as exc:
        return None, f"cannot read {output} ({exc.strerror or exc})"
    if len(raw) > limit:
        return None, _too_long(output, max_chars)
    return raw, None


def _report(folder: Path, output: str, stdout: bytes, max_chars: int) -> tuple[str | None, str | None]:
    """(markdown, error) from stdout or the output file."""
    if output == "stdout":
        raw, empty = stdout, "printed nothing"
    else:
        got, error = _output_file(folder, output, max_chars)
        if got is None:
            return None, error
        raw, empty = got, f"wrote nothing to {output}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{'stdout' if output == 'stdout' else output} is not UTF-8 (byte {exc.start})"
    if len(text) > max_chars:
        return None, _too_long(output, max_chars)
    return (None, empty) if not text.strip() else (text, None)


def run_command(
    argv: list[str],
    instance: Mapping[str, Any],
    grounding: Iterable[Mapping[str, Any]],
    *,
    timeout_s: float,
    output: str = "stdout",
    env: Mapping[str, str] | None = None,
    pass_env: Iterable[str] = (),
    workdir_root: Path | None = None,
    files: Mapping[str, str] | None = None,
    max_chars: int = MAX_CHARS,
) -> Generation:
    """Run `argv` on one instance (see the module docstring); `workdir_root` holds the instance folders
    (default: the system's temporary folder); `files` are extra {name: text} files of the instance folder
    (e.g. a generation skill); a report of more than `max_chars` characters is an error. The program's
    environment is `program_env(pass_env, env)`."""
    iid = str(instance["instance_id"])
    if workdir_root is not None:
        Path(workdir_root).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="frame-instance-", dir=workdir_root))
    try:
        write_instance_folder(folder, instance, grounding)
        for name, text in (files or {}).items():
            (folder / Path(name).name).write_text(text, encoding="utf-8")
        full_env = {**program_env(pass_env, env), INSTANCE_DIR_ENV: str(folder)}
        try:
            run = _run(list(argv), folder, full_env, timeout_s, output, max_chars)
        except OSError as exc:
            return Generation(
                iid, None, {"kind": "command"}, f"cannot run {argv[0]!r}: {exc.strerror or exc}"
            )
        meta: dict[str, Any] = {"kind": "command", "exit_code": run.code}
        if run.stopped is not None:
            return Generation(iid, None, meta, run.stopped)
        assert run.code is not None
        if run.code != 0:
            how = f"killed by signal {-run.code}" if run.code < 0 else f"exited with code {run.code}"
            return Generation(iid, None, meta, f"{how}: {_last_line(run.stderr)}")
        markdown, error = _report(folder, output, run.stdout, max_chars)
        return Generation(iid, markdown, meta, error)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
