"""One `ast.parse` at a time in this process.

CPython 3.11 keeps the counter that `ast.parse` uses while it builds Python AST objects in state shared
by every thread; a garbage collection inside one parse can hand the interpreter to another thread that
parses too, and one of them then fails with "SystemError: AST constructor recursion depth mismatch"
(cpython gh-106905 and the reports around it). frame runs such threads side by side: `frame score` loads
MiniLM in a warm-up thread (importing torch parses the source of its decorated functions) while the flow
reads the scoring code's imports (tasks/score/registry.py) and pydantic / inspect parse signature strings.
`install()` wraps `ast.parse` in one re-entrant lock for the whole process (libraries look it up on the
`ast` module at each call, so they get the wrapper too); a nested parse in the same thread still runs.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.RLock()
_ORIGINAL = ast.parse


def parse(source: Any, *args: Any, **kwargs: Any) -> ast.AST:
    """`ast.parse`, never at the same time as another thread's."""
    with _LOCK:
        return _ORIGINAL(source, *args, **kwargs)


def install() -> None:
    """Route every `ast.parse` of the process through `parse` (idempotent)."""
    ast.parse = parse
