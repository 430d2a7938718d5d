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
MAX_CHAR_WIDTH = 64  # char-CNN kernel width
MAX_CHAR_ID = 1 << 20  # characters of the char embedding (the biLM's is 261)
MAX_CONFIG_NODES = 100_000  # YAML nodes a config may expand to (aliases included)


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


def check_train_config(cfg: Any) -> None:
    """Values of a ``TrainConfig`` that type checks accept but no run can use."""
    where = "config"
    m, t, d = cfg.model, cfg.trainer, cfg.data
    for key in ("word_dim", "char_dim", "char_filters", "lstm_hidden"):
        check_size(getattr(m, key), f"model.{key}", where)
    check_size(m.char_width, "model.char_width", where, high=MAX_CHAR_WIDTH)
    check_size(m.lstm_layers, "model.lstm_layers", where, high=MAX_LAYERS)
    check_number(m.dropout, "model.dropout", where, 0.0, 0.99)
    check_number(cfg.elmo.dropout, "elmo.dropout", where, 0.0, 0.99)
    check_number(cfg.elmo.l2_coef, "elmo.l2_coef", where, 0.0)
    check_number(cfg.optim.lr, "optim.lr", where, 0.0, open_low=True)
    check_number(cfg.optim.grad_clip, "optim.grad_clip", where, 0.0)
    check_size(d.batch_size, "data.batch_size", where, high=MAX_VOCAB)
    check_size(d.eval_batch_size, "data.eval_batch_size", where, high=MAX_VOCAB)
    check_size(d.min_word_count, "data.min_word_count", where, high=MAX_VOCAB)
    check_size(d.num_workers, "data.num_workers", where, low=0, high=MAX_LAYERS)
    if d.max_sentences is not None:
        check_size(d.max_sentences, "data.max_sentences", where, high=1 << 40)
    check_size(t.max_epochs, "trainer.max_epochs", where, high=1 << 20)
    check_size(t.patience, "trainer.patience", where, low=0, high=1 << 20)
    check_size(t.log_every_n_steps, "trainer.log_every_n_steps", where, high=1 << 30)
    if t.threads is not None:
        check_size(t.threads, "trainer.threads", where, high=1024)
    if t.max_time_minutes is not None:
        check_number(t.max_time_minutes, "trainer.max_time_minutes", where, 0.0, open_low=True)
    if t.limit_train_batches is not None:
        check_number(t.limit_train_batches, "trainer.limit_train_batches", where, 0.0, open_low=True)
