"""`frame view`: the per-sample viewer, a static site of one `frame score` output folder (tasks.view),
optionally served on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import _fail
from flows.places import not_in_release
from tasks.errors import FrameInputError


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass  # one line per request would bury the URL


def serve(folder: Path, port: int = 0, seconds: float = 0) -> None:
    """Serve `folder` on 127.0.0.1 (`port` 0: a free one) until Ctrl-C, or for `seconds` when > 0."""
    import signal

    # Ctrl-C stops the server even when SIGINT came in ignored (a shell's background job, a CI runner)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    handler = functools.partial(_Quiet, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
        print(f"serving {folder} at {url} (Ctrl-C stops)", flush=True)
        timer = threading.Timer(seconds, httpd.shutdown) if seconds > 0 else None
        if timer is not None:
            timer.start()
        try:
            httpd.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:
            print("stopped", flush=True)
        finally:
            if timer is not None:  # a pending timer would keep the process alive after Ctrl-C
                timer.cancel()


def view_cmd(
    run_dir: Annotated[
        Path, typer.Argument(help="a `frame score` output folder (data/scores/<release>/<version>)")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="folder for the site (default <RUN_DIR>/view)")
    ] = None,
    release: Annotated[
        Path | None,
        typer.Option("--release", help="the release scored (default: the one the run's manifest names)"),
    ] = None,
    serve_site: Annotated[
        bool, typer.Option("--serve", help="then serve the site on 127.0.0.1 until Ctrl-C")
    ] = False,
    port: Annotated[int, typer.Option("--port", help="port for --serve (0: a free one)")] = 0,
    serve_for: Annotated[
        float,
        typer.Option("--serve-for", help="stop serving after this many seconds (0: at Ctrl-C)", hidden=True),
    ] = 0,
) -> None:
    """A static site of a scoring run: the leaderboard, a page per system (its instances sortable by any
    metric), a page per instance (S, Y and every report side by side with each metric's evidence) and a
    diff of every two systems on an instance. Opens from file:// with no network."""
    from tasks.view.load import load_run
    from tasks.view.site import write_site

    out = out if out is not None else run_dir / "view"
    try:
        not_in_release(out)
        if not 0 <= port <= 65535:
            raise FrameInputError("--port", f"must be 0..65535 (got {port})")
        run = load_run(run_dir, release)
        pages = write_site(run, out)
    except FrameInputError as exc:
        _fail(exc)
    for note in run.notes:
        print(f"frame: warning: {note}")
    print(
        f"{out / 'index.html'}: {pages} page(s), {len(run.systems)} system(s), "
        f"{len(run.instances)} instance(s)"
    )
    if serve_site:
        try:
            serve(out, port, serve_for)
        except OSError as exc:
            _fail(FrameInputError("--port", f"cannot serve on 127.0.0.1:{port} ({exc.strerror or exc})"))
