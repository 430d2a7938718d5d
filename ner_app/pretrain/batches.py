"""The batches of biLM pretraining, typed: what the training streams and the held-out readers give
``BilmLanguageModel`` (plain dicts at run time, so Lightning moves them to the device as it moves any batch)."""

from __future__ import annotations

from typing import TypedDict

import torch

from ner_app.bilm.document import Context

IGNORE = -1  # target of a position with nothing to predict


class DirectionWindow(TypedDict):
    """One direction's window of the training streams (``StreamBatches.batch``), B rows of T tokens."""

    char_ids: torch.Tensor  # (B, T, 50) long, in text order
    targets: torch.Tensor  # (B, T) long softmax ids: the next token (forward) or the previous one, or IGNORE
    mask: torch.Tensor  # (B, T) bool
    resets: torch.Tensor  # (B, T) bool: where this direction's sentence begins
    document_resets: (
        torch.Tensor | None
    )  # (B, T) bool: where it begins a document; None for shuffled sentences


class TrainingBatch(TypedDict):
    """Window ``window`` of epoch ``epoch``: the forward LM's window and the backward LM's."""

    forward: DirectionWindow
    backward: DirectionWindow
    epoch: int
    window: int


class EvaluationBatch(TypedDict, total=False):
    """A held-out batch (``heldout.context_batches``): ``char_ids`` (sentence context) or ``contexts``
    (document context), the ``targets``, and its ``index`` in the list once sharded (``shard_batches``; -1 is
    a filler that holds nothing else)."""

    char_ids: torch.Tensor  # (B, T, 50) long, without <S> and </S> (the biLM adds them)
    contexts: list[Context]  # every sentence in its stream
    targets: torch.Tensor  # (B, T + 2) long softmax ids of <S> w1 .. wn </S>, IGNORE-padded
    index: int


__all__ = ["IGNORE", "DirectionWindow", "EvaluationBatch", "TrainingBatch"]
