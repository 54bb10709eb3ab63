"""Reports of scenario runs: the step table and the timeline picture.

- :mod:`epochlab.report.table` - the step table in the seeds' style (Markdown, ``rich`` or
  plain text), the verdict text and ``report.md``.
- :mod:`epochlab.report.picture` - ``timeline.png`` with matplotlib when installed.

Both optional packages are imported only when used: ``epochlab`` and its CLI work without them.
"""

from epochlab.report import picture
from epochlab.report.table import (
    Row,
    format_log,
    render_report,
    render_terminal,
    render_verdict,
    step_rows,
    table_markdown,
    table_text,
)

__all__ = [
    "Row",
    "format_log",
    "picture",
    "render_report",
    "render_terminal",
    "render_verdict",
    "step_rows",
    "table_markdown",
    "table_text",
]
