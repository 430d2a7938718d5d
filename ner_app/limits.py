"""Bounds on every size a user's file or config can set, checked before anything is allocated.

A size from ``options.json``, ``tagger.json`` or a config goes to torch only after ``check_size``: a typo like
``lstm.dim: 1e9`` must be one clear error naming the key, not a 96 GB allocation (docs/reliability.md).
"""

from __future__ import annotations

import math
from typing import Any

from ner_app.errors import NerAppError

MAX_DIM = 1 << 16  # any hidden, projection, embedding or filter size
MAX_LAYERS = 64  # LSTM layers, highway layers
MAX_VOCAB = 1 << 24  # entries of any vocabulary
MAX_ENTITY_TYPES = 1_000  # a 4,001-tag CRF (BIOES): its work grows with the square of the tags
MAX_RNG_SEED = (1 << 32) - 1  # numpy's seeds are 32-bit: the largest seed a run can use
MAX_CHAR_WIDTH = 64  # char-CNN kernel width
MAX_CHAR_ID = 1 << 20  # characters of the char embedding (the biLM's is 261)
MAX_CONFIG_NODES = 100_000  # YAML nodes a config may expand to (aliases included)
MAX_OPTIONS_BYTES = 1 << 16  # a biLM's options.json (a released one is under 1 KB)
# A training sentence keeps its activations for the backward pass, whatever the batching: 2.2 GB peak at this
# length with the paper-size tagger (docs/performance.md). Longer ones are refused; evaluation has no bound.
MAX_TRAIN_SENTENCE_TOKENS = 20_000
# ``serve``: one POST /predict request (checked before it reaches the model; docs/serving.md)
SERVE_MAX_TEXTS = 256  # texts in one request
SERVE_MAX_CHARS = 100_000  # characters of all texts of one request together
# the body: every character escaped as a surrogate pair (12 bytes) and 64 bytes of JSON around each text
SERVE_MAX_BODY_BYTES = 12 * SERVE_MAX_CHARS + 64 * SERVE_MAX_TEXTS + 1024
# ``convert`` and annotation files: one JSONL line (one document of doccano, Prodigy or predict's JSONL), and a
# whole file read at once (a Label Studio export, a brat .txt/.ann, a CoNLL or CoNLL-U file)
MAX_ANNOTATION_LINE_BYTES = 1 << 26  # 64 MiB
MAX_ANNOTATION_FILE_BYTES = 1 << 29  # 512 MiB
# an integer of an annotation file (an offset, an id): 10^30 is beyond any text; Python parses 4,300 digits
MAX_JSON_INT_DIGITS = 30
# ``benchmark speed``: the words of one timed batch (the input is cycled to fill it: a batch size far above the
# input would otherwise grow without bound), and the timed or warm-up batches (the bootstrap draws
# 1,000 x batches indices)
MAX_BENCHMARK_BATCH_WORDS = 1 << 20
MAX_BENCHMARK_BATCHES = 10_000
# ``predict --input FOLDER`` or a glob: the files listed (their names are held in memory and sorted), and one file
# of them, read whole (a larger one is tagged alone, --input FILE, which streams)
MAX_PREDICT_FILES = 1_000_000
MAX_PREDICT_FILE_BYTES = 1 << 30  # 1 GiB
# ``ner_app.onnx.ray_batch``: one input file, which one Ray task reads whole (many files spread the reading)
MAX_RAY_FILE_BYTES = 1 << 30  # 1 GiB


class LimitError(NerAppError):
    """A size outside its bounds."""


def check_size(value: Any, key: str, where: str, low: int = 1, high: int = MAX_DIM) -> int:
    """``value`` must be an int in [low, high]; the error names the file (``where``) and the key."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitError(f"{where}: '{key}' must be an integer in [{low}, {high}], found {value!r:.40}")
    if not low <= value <= high:
        raise LimitError(f"{where}: '{key}' is {value}, expected an integer in [{low}, {high}]")
    return value


def check_number(
    value: Any, key: str, where: str, low: float, high: float = math.inf, *, open_low: bool = False
) -> float:
    """``value`` must be a finite number in [low, high] (or (low, high] with ``open_low``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if open_low else value >= low) and value <= high
    if not ok:
        bound = f"{'(' if open_low else '['}{low}, {high}{']' if math.isfinite(high) else ')'}"
        raise LimitError(f"{where}: '{key}' must be a finite number in {bound}, found {value!r:.40}")
    return float(value)
