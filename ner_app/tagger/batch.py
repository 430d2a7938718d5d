"""``Batch``: the one type of a tagger batch, from the collate function to the model, the loops and predict."""

from __future__ import annotations

from typing import TypedDict

import torch

from ner_app.bilm.document import Context


class Batch(TypedDict, total=False):
    """Tensors of a batch of B sentences of at most T tokens (a plain dict at run time, so that Lightning
    moves every tensor in it, the list ``elmo_layers`` included, to the device).

    Always present: ``words`` (B, T), ``chars`` (B, T, W), ``elmo_chars`` (B, T, 50), ``mask`` (B, T) bool,
    ``tokens`` (the raw tokens) and ``index`` (B,) (each sentence's position in its split). With gold tags:
    ``tags`` (B, T). With the layer cache: ``elmo_layers`` L+1 x (B, T+2, 2P) and ``elmo_mask`` (B, T+2);
    in document context without it: ``elmo_context`` (docs/document_context.md).
    """

    words: torch.Tensor
    chars: torch.Tensor
    elmo_chars: torch.Tensor
    mask: torch.Tensor
    tokens: list[list[str]]
    index: torch.Tensor
    tags: torch.Tensor
    elmo_layers: list[torch.Tensor]
    elmo_mask: torch.Tensor
    elmo_context: list[Context]  # document context without the cache: each sentence's stream and position
