"""What calibration and selection read of a predictor of either kind (``predict/loading.py``): its batches of
emissions as tensors and its CRF as the torch module their math runs on. A torch export gives its own; an
ONNX folder's emissions come from onnxruntime and its CRF is rebuilt from ``crf.npz`` (the scores with the
scheme's forbidden entries already set) at its temperature, so both run the same fit and the same
uncertainty."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.loading import AnyPredictor
from ner_app.tagger.crf.crf import CRF


def crf_of(predictor: AnyPredictor) -> CRF:
    """The predictor's CRF: a torch export's own, or an ONNX folder's scores in a CRF without constraints
    (they are in its scores already) at the folder's temperature."""
    if not isinstance(predictor, OnnxPredictor):
        return predictor.tagger.crf
    start, trans, end = (torch.from_numpy(np.asarray(a, np.float32)) for a in predictor.crf)
    crf = CRF(len(start))
    with torch.no_grad():
        crf.start_transitions.copy_(start)
        crf.transitions.copy_(trans)
        crf.end_transitions.copy_(end)
    crf.temperature = predictor.temperature
    return crf.eval()


def emission_tensors(
    predictor: AnyPredictor, pieces: Sequence[Sequence[str]], documents: Sequence[int] | None = None
) -> Iterator[tuple[list[int], Tensor, Tensor]]:
    """(piece indices, emissions (B, T, K), mask (B, T)) of every batch of ``pieces`` (non-empty sentences of
    at most ``MAX_TOKENS``; ``documents``: a document id per piece), batched as predict batches them."""
    if not isinstance(predictor, OnnxPredictor):
        yield from predictor.emission_batches(pieces, documents)
        return
    for group, emissions, lengths in predictor.emission_batches(pieces, documents):
        mask = torch.arange(emissions.shape[1])[None, :] < torch.from_numpy(lengths)[:, None]
        yield group, torch.from_numpy(emissions), mask
