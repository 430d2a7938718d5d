"""``ner-app export --onnx --quantize int8``: the ONNX graphs with int8 weights, by onnxruntime's dynamic
quantization (``quantize_dynamic``): the weights of the LSTMs, the char CNN and the output layer are stored as
int8 and the activations are quantized on the fly, batch by batch; the embedding tables are stored as int8 and
dequantized when looked up. No calibration data is needed. How far the tags move is measured on CoNLL-2003
(``benchmarks/onnx_int8.py``, docs/performance.md)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ner_app.errors import NerAppError

QUANTIZE = ("int8",)  # what --quantize accepts
INT8_TOLERANCE = 0.25  # int8 emissions may differ from the tagger's by this share of its largest emission


def check_quantize(name: str | None) -> None:
    if name is not None and name not in QUANTIZE:
        raise NerAppError(f"--quantize {name!r}: expected one of {', '.join(QUANTIZE)}")


def quantize_graph(path: Path) -> None:
    """Replace the graph at ``path`` by its dynamically quantized form (int8 weights)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    tmp = path.with_name(f".{path.stem}.int8.onnx")
    quiet = logging.getLogger()  # it advises "pre-processing" on the root logger; the graph needs none
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8)
    finally:
        quiet.setLevel(level)
    os.replace(tmp, path)
