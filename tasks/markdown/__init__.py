"""One Markdown document model for the whole code base: `document` (line readers, `parse` into blocks
with line numbers and heading paths), `tables` (pipe tables as grids and TEDS trees), `teds` (table
similarity) and `numbers` (figures in text). No other module reads Markdown headings itself."""

from tasks.markdown import document, tables
from tasks.markdown.document import *  # noqa: F403
from tasks.markdown.tables import *  # noqa: F403

__all__ = [*document.__all__, *tables.__all__]
