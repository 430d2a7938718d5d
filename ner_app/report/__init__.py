"""The offline HTML run report (docs/report.md): ``write_report(run_dir)`` -> ``run_dir/report.html``."""

from ner_app.report.run_report import build_report, report_after_training, write_report

__all__ = ["build_report", "report_after_training", "write_report"]
