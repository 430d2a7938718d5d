"""Batches of sentences under a token budget: the one batching rule of training, evaluation, ``predict`` (torch
and ONNX), ``evaluate``, ``embed``, pretraining's held-out batches, the layer-cache fill and document streams
(docs/performance.md, "memory"). No torch here: the ONNX predictor uses it too.

A batch's cost is its sentences x its padded length (B x T_max): every tensor of a batch scales with it, the
character tensors (B, T_max, W) included, whose W is capped (30 characters for the tagger, 50 for the biLM).
A budget (``max_tokens``) caps that cost; a sentence longer than the budget runs alone. ``None`` is no budget:
batches of ``max_sentences`` whatever their length, the batching before budgets existed.
"""

from __future__ import annotations

from collections.abc import Sequence

# predict's default pieces a batch (--batch-size). Larger is not faster on a CPU: predict sorts each chunk of
# 512 lines by length, and fewer, larger batches pad more (the shipped tagger at one thread: 11.6k words/s at
# 64, 9.0k at 256; docs/performance.md)
PREDICT_BATCH_SIZE = 64
# predict's default budget of padded tokens a batch holds (pieces x longest): 64 pieces of 250 tokens fit, so
# the default batch size is never split; it bounds memory when --batch-size is raised (--max-tokens)
PREDICT_MAX_TOKENS = 16384
# padded positions a biLM call reads at most (sentences x longest, or streams x longest in document context);
# 64 CoNLL-2003 sentences (at most 124 tokens) fit (--max-tokens)
EMBED_MAX_TOKENS = 8192
# sentences a biLM call reads at most (--batch-size): each recurrent step is one (B, P) x (P, 4C) matmul, whose
# weights are read once for all B rows, so more rows use the cores better (the original-size step ran at 1.8x
# the GFLOP/s with 256 rows as with 64 on the 2-core EPYC); EMBED_MAX_TOKENS still bounds a call's memory
EMBED_BATCH_SIZE = 256
# a document stream's positions at most (tokens + 2 per sentence; bilm/document.py): every CoNLL-2003 document
# fits (the largest has 1,729 positions)
MAX_POSITIONS = 2048


def check_budget(max_sentences: int | None, max_tokens: int | None) -> None:
    """Both caps must be None or at least 1 (a programming error otherwise: user values are checked before)."""
    for name, value in (("max_sentences", max_sentences), ("max_tokens", max_tokens)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be at least 1 (or None), got {value}")


def cost(length: int) -> int:
    """A sentence's tokens as the budget counts them: an empty one still takes a row (the biLM adds <S>, </S>)."""
    return max(length, 1)


def budget_batches(
    lengths: Sequence[int],
    max_sentences: int | None,
    max_tokens: int | None,
    keep_order: bool = False,
) -> list[list[int]]:
    """Indices grouped into batches, by increasing length (stable: ties keep their input order) or, with
    ``keep_order``, in input order (a stateful biLM, document streams). A batch closes when it holds
    ``max_sentences`` or when the next sentence would make B x T_max exceed ``max_tokens``, so every batch
    keeps to the budget unless it holds one sentence. Without a budget: slices of ``max_sentences``."""
    check_budget(max_sentences, max_tokens)
    order = list(range(len(lengths))) if keep_order else sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    group: list[int] = []
    longest = 0
    for i in order:
        n = cost(lengths[i])
        full = max_sentences is not None and len(group) == max_sentences
        if group and (full or (max_tokens is not None and (len(group) + 1) * max(longest, n) > max_tokens)):
            batches.append(group)
            group, longest = [], 0
        group.append(i)
        longest = max(longest, n)
    if group:
        batches.append(group)
    return batches


def batch_capacity(length: int, max_sentences: int, max_tokens: int | None) -> int:
    """How many sentences of ``length`` tokens a shuffled batch may hold: ``max_sentences`` when that many fit
    the budget, else the largest power of two that does (at least 1). Sentences of one capacity can be
    batched in any combination, so the number of batches does not depend on the shuffle; powers of two keep
    the capacities few (a batch wastes at most half its budget)."""
    if max_tokens is None or max_sentences * cost(length) <= max_tokens:
        return max_sentences
    fit = max_tokens // cost(length)
    return 1 << (fit.bit_length() - 1) if fit > 1 else 1
