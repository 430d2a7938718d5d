"""What an output format is and what its writer knows: defined in ``text/outputs.py`` (beside the annotation
formats whose writers use them), importable from here as before."""

from __future__ import annotations

from ner_app.text.outputs import FilesWriter, OutputFormat, Target, Writer, json_line

__all__ = ["FilesWriter", "OutputFormat", "Target", "Writer", "json_line"]
