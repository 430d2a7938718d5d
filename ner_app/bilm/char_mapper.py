"""Character ids for the ELMo biLM (docs/bilm_reference.md section 1).

Every token becomes exactly ``MAX_CHARS`` ids: UTF-8 bytes wrapped in begin/end-of-word markers and padded.
All ids are shifted by +1 so that 0 means "no token" (sentence padding).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import torch

MAX_CHARS = 50  # ids per token
N_CHARACTERS = 262  # 256 bytes + 5 specials + the padding id 0 after the shift

# Symbols before the +1 shift.
BOS_CHAR = 256  # begin of sentence
EOS_CHAR = 257  # end of sentence
BOW_CHAR = 258  # begin of word
EOW_CHAR = 259  # end of word
PAD_CHAR = 260  # padding inside a token

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _wrap(symbols: Sequence[int]) -> tuple[int, ...]:
    """[BOW, symbols..., EOW, PAD...] shifted by +1; symbols are already cut to MAX_CHARS - 2."""
    ids = [BOW_CHAR, *symbols, EOW_CHAR]
    ids += [PAD_CHAR] * (MAX_CHARS - len(ids))
    return tuple(i + 1 for i in ids)


BOS_IDS = _wrap([BOS_CHAR])
EOS_IDS = _wrap([EOS_CHAR])


@lru_cache(maxsize=200_000)
def token_to_ids(token: str) -> tuple[int, ...]:
    """The 50 shifted character ids of one token.

    ``<S>`` and ``</S>`` map to the sentence-boundary characters; any other string (the empty string too) is
    its UTF-8 bytes cut to the first 48 (a cut may split a multi-byte character: the partial bytes stay).
    """
    if token == BOS_TOKEN:
        return BOS_IDS
    if token == EOS_TOKEN:
        return EOS_IDS
    data = token.encode("utf-8", errors="ignore")[: MAX_CHARS - 2]
    return _wrap(data)


def batch_to_ids(sentences: Sequence[Sequence[str]]) -> torch.Tensor:
    """Character ids of a batch of tokenised sentences, without sentence boundaries.

    Returns a long tensor (B, T, 50) where T is the longest sentence; padded positions are all 0.
    The biLM adds ``<S>``/``</S>`` itself.
    """
    batch = len(sentences)
    longest = max((len(s) for s in sentences), default=0)
    ids = torch.zeros(batch, longest, MAX_CHARS, dtype=torch.long)
    for b, sentence in enumerate(sentences):
        if sentence:
            ids[b, : len(sentence)] = torch.tensor([token_to_ids(t) for t in sentence], dtype=torch.long)
    return ids
