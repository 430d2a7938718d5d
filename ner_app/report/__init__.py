"""Reports read by people: the offline HTML run report (docs/reports.md), HTML views of predictions, the output
formats of predictions, and tables comparing runs (docs/reports.md).

``import ner_app.report.formats`` stays light: the run report (matplotlib, seqeval) loads on first use of these
names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ner_app.report.run_report import build_report, report_after_training, write_report

__all__ = ["build_report", "report_after_training", "write_report"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ner_app.report import run_report

        return getattr(run_report, name)
    raise AttributeError(f"module 'ner_app.report' has no attribute {name!r}")
