"""Which tag transitions a tagging scheme allows, as boolean masks for the CRF.

The masks say which tags may start a sentence, which tag may follow which, and which may end a sentence; the
CRF gives every other transition a large negative score so that Viterbi never outputs a malformed entity. The
rules themselves are the tag grammar's (``ner_app.text.tags.may_follow``).
"""

from __future__ import annotations

import torch

from ner_app.text.tags import TRAINING_SCHEMES, may_follow, scheme_part


def allowed_transitions(tags: list[str], scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bool masks ``(start (K,), trans (K, K), end (K,))`` of a scheme; ``trans[i, j]``: tag j may follow i.

    ``scheme`` is ``"BIO"`` (IOB2), ``"IOB1"`` or ``"BIOES"``. ValueError for an unknown scheme or a tag that
    the scheme does not have.
    """
    if scheme not in TRAINING_SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}: expected one of {', '.join(TRAINING_SCHEMES)}")
    parts = [scheme_part(tag, scheme) for tag in tags]
    start = torch.tensor([may_follow(None, p, scheme) for p in parts], dtype=torch.bool)
    end = torch.tensor([may_follow(p, None, scheme) for p in parts], dtype=torch.bool)
    trans = torch.tensor([[may_follow(p, q, scheme) for q in parts] for p in parts], dtype=torch.bool)
    return start, trans.reshape(len(parts), len(parts)), end
