"""Reports read by people: the offline HTML run report (docs/report.md), HTML views of predictions, and tables
comparing runs (docs/compare_and_predict_html.md)."""

from ner_app.report.run_report import build_report, report_after_training, write_report

__all__ = ["build_report", "report_after_training", "write_report"]
