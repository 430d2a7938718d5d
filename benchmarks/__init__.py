"""Speed measurements of ner_app; run each from the repository root: ``python -m benchmarks.NAME --help``."""
