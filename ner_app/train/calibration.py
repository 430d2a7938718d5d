"""Calibration at the end of training: the chosen weights' temperature fitted on dev (``tagger/crf/calibration.py``),
its entity ECE and log loss before and after on dev and test, and the reliability diagrams' bins, written to
``calibration.json`` in the run folder (the run report draws them) and kept in the export's spec.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ner_app.files import write_text
from ner_app.tagger.batch import batch_to
from ner_app.tagger.crf.calibration import (
    CalibrationSet,
    calibration_record,
    calibration_set,
    fit_temperature,
    scores_at,
)
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import Calibration
from ner_app.text.reliability import expected_calibration_error, log_loss, reliability_bins
from ner_app.train.corpus import EVALUATED, Corpus
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.metrics import RunCalibration

log = logging.getLogger("ner_app")
CALIBRATION_FILE = "calibration.json"


def split_set(tagger: BiLstmCrfTagger, dm: ConllDataModule, corpus: Corpus, split: str) -> CalibrationSet:
    """The emissions and labelled predicted entities of a split, batched as evaluation batches it."""
    spec, tags = dm.spec, corpus.splits[split].tags
    device = next(tagger.parameters()).device

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor, Sequence[Sequence[str]]]]:
        for batch in dm.dataloader(split):
            batch = batch_to(batch, device)
            with torch.no_grad():
                emissions = tagger.emissions(batch)  # (B, T, K)
            yield emissions, batch["mask"], [tags[i] for i in batch["index"].tolist()]

    return calibration_set(tagger.crf, batches(), spec.tag_vocab, spec.scheme)


def _summary(tagger: BiLstmCrfTagger, data: CalibrationSet, temperature: float) -> dict[str, Any]:
    scores = scores_at(tagger.crf, data, temperature)
    return {
        "ece": expected_calibration_error(scores, data.correct),
        "log_loss": log_loss(scores, data.correct),
        "bins": [dataclasses.asdict(b) for b in reliability_bins(scores, data.correct)],
    }


def calibrate_run(
    tagger: BiLstmCrfTagger, dm: ConllDataModule, corpus: Corpus, run_dir: Path
) -> tuple[Calibration, RunCalibration] | None:
    """Fit the temperature on dev, write ``calibration.json`` (dev and test, before and after) and return the
    export's record and metrics.json's; None, with a log line, when the tagger predicts no entity on dev."""
    was_training = tagger.training
    tagger.eval()
    try:
        sets = {split: split_set(tagger, dm, corpus, split) for split in EVALUATED}
        if sets["dev"].entities == 0:
            log.info("calibration skipped: the tagger predicts no entity on dev")
            return None
        fit = fit_temperature(tagger.crf, sets["dev"])
        report: dict[str, Any] = {"temperature": fit.temperature, "fit_seconds": fit.seconds}
        for split, data in sets.items():
            report[split] = {
                "entities": data.entities,
                "before": _summary(tagger, data, 1.0),
                "after": _summary(tagger, data, fit.temperature),
            }
    finally:
        tagger.train(was_training)
    write_text(run_dir / CALIBRATION_FILE, json.dumps(report, indent=2) + "\n")
    dev, test = report["dev"], report["test"]
    log.info(
        "calibration: temperature %.3f; entity ECE dev %.4f -> %.4f, test %.4f -> %.4f",
        fit.temperature,
        dev["before"]["ece"],
        dev["after"]["ece"],
        test["before"]["ece"],
        test["after"]["ece"],
    )
    return calibration_record(fit, "dev"), RunCalibration.of(report)
