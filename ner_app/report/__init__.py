"""Reports read by people: the offline HTML run report (docs/reports.md), HTML views of predictions, and tables
comparing runs (docs/reports.md)."""

from ner_app.report.run_report import build_report, report_after_training, write_report

__all__ = ["build_report", "report_after_training", "write_report"]
