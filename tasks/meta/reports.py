"""The generated reports a meta-evaluation's annotation files point at (`frame meta structure`, `frame meta
judge`): `<generations>/<system>/generations.parquet`, else `<generations>/<system>/reports/<stem>.md`.

The system names come from a file a user brings (a rankings CSV, an annotation sheet), so they are held to
what a user brings (docs/security.md): a system must be a system name (schemas.evaluation SYSTEM_NAME:
1-64 letters, digits, '.', '_' or '-', never '.' or '..'); every path is resolved and must stay inside the
generations folder (a symbolic link out of it is refused by name, never read); only the one file needed is
opened, and only when it is a regular file (a FIFO or device is refused before it is opened), of at most
REPORT_LIMIT bytes (a report) or PARQUET_LIMIT bytes (a generations table).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.evaluation import SYSTEM_NAME
from tasks.errors import FrameInputError
from tasks.files import FileProblem, NotRegularFile, open_regular, read_capped, within
from tasks.release.evalkit import report_file_name
from tasks.score.align import shown

__all__ = ["PARQUET_LIMIT", "REPORT_LIMIT", "Generations", "check_system"]

REPORT_LIMIT = 4 * 2_000_000  # bytes: a submission's max_chars (2,000,000) characters in any UTF-8
PARQUET_LIMIT = 512 * 1024 * 1024  # bytes of one system's generations.parquet

Generated = dict[str, tuple[str, str | None]]  # instance_id -> (markdown, error or None)


def check_system(system: str, where: str | Path, what: str = "") -> str:
    """`system` when it is a system name, else FrameInputError naming `where` (`what`: the row)."""
    if not SYSTEM_NAME.fullmatch(system) or system in (".", ".."):
        raise FrameInputError(
            where,
            f"{what}system {shown(system)} is not a system name (1-64 letters, digits, '.', '_' or '-'): "
            "refused",
        )
    return system


def _error(value: object) -> str | None:
    """A generation's error ("" / null / NaN: none; older generations files have no such column)."""
    return value if isinstance(value, str) and value else None


class Generations:
    """The reports of the systems under one generations folder (each system's table read once)."""

    def __init__(self, root: str | Path) -> None:
        self.given = Path(root)
        try:
            self.root = self.given.resolve()
        except (OSError, RuntimeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise FrameInputError(root, f"unusable folder ({why})") from None
        self._tables: dict[str, Generated | None] = {}

    def folder(self, system: str) -> Path:
        """`<generations>/<system>` as given (for messages); the system name checked."""
        return self.given / check_system(system, self.given)

    def _inside(self, path: Path) -> Path | None:
        """`path` resolved (None when nothing is there); FrameInputError when it leads outside the folder."""
        if not os.path.lexists(path):
            return None
        try:
            target = path.resolve()
        except (OSError, RuntimeError) as exc:
            raise FrameInputError(path, f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
        if not within(target, self.root):
            raise FrameInputError(
                path, f"leads outside the generations folder {self.given} (to {target}): refused"
            )
        return target

    def _descriptor(self, path: Path, target: Path) -> int | None:
        try:
            return open_regular(target, self.root)
        except FileNotFoundError:  # a link inside the folder to nothing: no report
            return None
        except NotRegularFile as exc:
            raise FrameInputError(path, f"{exc}: refused") from None
        except OSError as exc:
            raise FrameInputError(path, f"cannot be read ({exc.strerror or exc})") from None

    def table(self, system: str) -> Generated | None:
        """{instance_id: (markdown, error)} of the system's generations.parquet (None when it has none)."""
        if system not in self._tables:
            self._tables[system] = self._read_table(self.folder(system) / "generations.parquet")
        return self._tables[system]

    def _read_table(self, path: Path) -> Generated | None:
        target = self._inside(path)
        fd = None if target is None else self._descriptor(path, target)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > PARQUET_LIMIT:
                raise FrameInputError(
                    path, f"{size:,} bytes: over the {PARQUET_LIMIT:,}-byte limit of a generations table"
                )
            try:
                parquet = pq.ParquetFile(f)
                names = set(parquet.schema_arrow.names)
                if not {"instance_id", "markdown"} <= names:
                    raise FrameInputError(path, "not a generations table: needs instance_id, markdown")
                columns = ["instance_id", "markdown", *(c for c in ("error", "epoch") if c in names)]
                data = parquet.read(columns=columns).to_pydict()
            except (pa.ArrowException, OSError, ValueError) as exc:
                line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise FrameInputError(path, f"not a readable parquet file ({line[:200]})") from None
        errors = data.get("error") or [None] * len(data["instance_id"])
        epochs = data.get("epoch") or [0] * len(data["instance_id"])  # `--epochs`: the first sample is judged
        return {
            str(i): ("" if m is None else str(m), _error(e))
            for i, m, e, k in zip(data["instance_id"], data["markdown"], errors, epochs, strict=True)
            if not k
        }

    def report_file(self, system: str, instance_id: str) -> str | None:
        """The text of `<system>/reports/<stem>.md` (None when there is none)."""
        path = self.folder(system) / "reports" / f"{report_file_name(instance_id)}.md"
        target = self._inside(path)
        if target is None:
            return None
        try:
            too_large = "report of more than {limit:,} bytes: refused"
            data = read_capped(target, REPORT_LIMIT, self.root, too_large)
        except FileNotFoundError:
            return None
        except FileProblem as exc:
            raise FrameInputError(path, str(exc)) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameInputError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
