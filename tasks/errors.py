"""Errors that the CLI turns into one clear line on stderr and exit code 2 (no traceback).

Defined in `schemas.errors` (shapes raise them while validating); imported from here by tasks and flows.
"""

from schemas.errors import ConfigError, FrameInputError

__all__ = ["ConfigError", "FrameInputError"]
