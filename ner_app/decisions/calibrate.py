"""``ner-app calibrate``: an export's entity scores calibrated on a gold file, in any format convert reads (docs/calibration.md).

The tagger's emissions on the file are computed once (``Predictor.emission_batches``, batched as predict
batches), the temperature is fitted by ``tagger/crf/calibration.py``, and a copy of the export with the calibration
record in its ``tagger.json`` is written to the output folder (all or nothing; the source export is only read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from ner_app.decisions.emissions import crf_of, emission_tensors
from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import Claim, claim_folder
from ner_app.onnx.calibrated import write_calibrated
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.loading import AnyPredictor, load_predictor
from ner_app.predict.predictor import Predictor
from ner_app.tagger.crf.calibration import (
    CalibrationSet,
    Fit,
    calibration_record,
    calibration_set,
    fit_temperature,
)
from ner_app.tagger.export import export_model
from ner_app.text.annotations.splits import is_brat_folder, read_split
from ner_app.text.conll import require_annotated
from ner_app.text.pieces import split_pieces
from ner_app.text.tags import convert, detect_scheme


def _check_paths(model: Path, dev: Path, output: Path, option: str, fmt: str | None, claim: Claim) -> None:
    """One line for each mistake, before anything is loaded or written (``option``: the gold file's option,
    as typed; ``fmt``: its format, a brat gold being a folder)."""
    if not model.is_dir():
        raise MissingFileError(f"--model {model}: not a folder (expected an export directory)")
    if not dev.exists():
        raise MissingFileError(
            f"{option} {dev}: not found (expected a gold file: CoNLL, an annotation export or a brat folder)"
        )
    if not dev.is_file() and not is_brat_folder(dev, fmt):
        raise NerAppError(
            f"{option} {dev}: not a regular file (expected a gold file: CoNLL, an annotation export or a brat folder)"
        )
    out, source = output.resolve(), model.resolve()
    if out == source or out.is_relative_to(source):
        raise NerAppError(
            f"--output {output}: inside the export --model {model}; write the calibrated copy beside it"
        )
    if source.is_relative_to(out):
        raise NerAppError(f"--output {output}: holds the export --model {model}; name a new folder")
    claim_folder(output, claim)  # never another run's export, nor a calibrated copy changed since


def gold_set(
    predictor: AnyPredictor, dev: Path, option: str = "--gold", fmt: str | None = None
) -> CalibrationSet:
    """The emissions, Viterbi paths and labelled entities of every sentence of the gold file ``dev``, read as
    training reads a split file (any format: ``fmt``, or detected), sentences longer than ``MAX_TOKENS`` in
    pieces, as predict tags them."""
    sentences = read_split(dev, fmt)
    if not sentences:
        raise NerAppError(f"{option} {dev}: no sentences (expected 'token ... tag' lines)")
    require_annotated(sentences, dev)
    source = detect_scheme([s.tags for s in sentences])
    gold = [convert(s.tags, source, predictor.scheme) for s in sentences]
    pieces = split_pieces([s.tokens for s in sentences])
    gold_pieces = split_pieces(gold)
    documents = [sentences[i].doc for i, _ in pieces]

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor, Sequence[Sequence[str]]]]:
        for group, emissions, mask in emission_tensors(predictor, [t for _, t in pieces], documents):
            yield emissions, mask, [gold_pieces[p][1] for p in group]

    return calibration_set(crf_of(predictor), batches(), predictor.tags, predictor.scheme)


def calibrate_export(
    model: str | Path,
    dev: str | Path,
    output: str | Path,
    device: str = "cpu",
    batch_size: int = 64,
    max_tokens: int | None = None,
    option: str = "--gold",
    fmt: str | None = None,
    claim: Claim | None = None,
    threads: int | None = None,
) -> tuple[Fit, CalibrationSet]:
    """Fit the temperature of export ``model`` on gold file ``dev`` and write the calibrated copy to
    ``output`` (``claim``: how, the output policy of ``files.py``; default: calibrate's, without
    --overwrite). Returns the fit (its ECE and log loss before and after) and the data it was fitted on."""
    model, dev, output = Path(model), Path(dev), Path(output)
    claim = claim or Claim("calibrate")
    _check_paths(model, dev, output, option, fmt, claim)
    kwargs = {} if max_tokens is None else {"max_tokens": max_tokens}
    predictor = load_predictor(model, device, batch_size, threads=threads, **kwargs)
    data = gold_set(predictor, dev, option, fmt)
    if data.entities == 0:
        raise NerAppError(
            f"{option} {dev}: the tagger finds no entity in it, so there is nothing to calibrate on"
        )
    fit = fit_temperature(crf_of(predictor), data)
    record = calibration_record(fit, dev.name)
    if isinstance(predictor, OnnxPredictor):  # an ONNX folder gives a calibrated ONNX folder
        write_calibrated(model, output, dataclasses.asdict(record), claim)
        return fit, data
    assert isinstance(predictor, Predictor)
    export_model(predictor.tagger, dataclasses.replace(predictor.spec, calibration=record), output, claim)
    return fit, data
