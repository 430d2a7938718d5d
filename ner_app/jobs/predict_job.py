"""What ``predict`` is asked (``PredictJob``): read by ``jobs/predict.py`` and ``jobs/predict_workers.py``."""

from __future__ import annotations

from dataclasses import dataclass

from ner_app.files import Claim
from ner_app.jobs.input_files import Shard


@dataclass(frozen=True)
class PredictJob:
    """What ``predict`` was asked: the input, the format and where it goes, the readings and the export."""

    input: str  # a file, a folder, a glob pattern, or - for standard input
    format: str  # a name of report/formats.py FORMATS
    output: str | None  # None: standard output
    min_score: float
    alternatives: int
    flag_missed: float | None
    workers: int | None
    model: str | None  # None: the shipped tagger
    batch_size: int
    max_tokens: int | None
    threads: int | None
    device: str
    overwrite: bool = False  # --overwrite: replace an output predict did not write
    shard: Shard | None = None  # --shard I/N: this share of a folder's files (jobs/input_files.py)

    @property
    def claim(self) -> Claim:
        """How predict may write ``output`` (the output policy of ``files.py``)."""
        return Claim("predict", self.overwrite)
