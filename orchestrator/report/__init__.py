"""Fleet reports for people (pure): a snapshot and a calibration plan in, a document out.

Kept out of the CLI so the same rendering can later be served by the worker or attached to a
workflow result, and so import-linter holds it to the pure-package rules (no I/O, no clock).
"""

from orchestrator.report.html import render_html

__all__ = ["render_html"]
