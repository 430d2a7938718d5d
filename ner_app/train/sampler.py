"""Batches of sentences of similar length under a token budget, shuffled by epoch and sharded across DDP ranks:
the tagger's batch sampler."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence

from torch.utils.data import Sampler

from ner_app.text.batching import batch_capacity, budget_batches, check_budget, cost


class LengthBucketSampler(Sampler[list[int]]):
    """Batches of sentences of similar length, under a token budget.

    With ``shuffle``: indices are shuffled, cut into chunks of ``bucket_batches`` batches, sorted by length
    within each chunk and cut into batches, and the batches are shuffled; the random generator is seeded
    with ``seed + epoch`` (``set_epoch``), so every epoch is reproducible. Without: batches in increasing
    length order (``keep_order``: in index order). Every index occurs exactly once (``drop_last`` drops the
    one short batch, if any).

    ``max_tokens`` caps a batch's sentences x padded length (``ner_app.text.batching``); a sentence longer
    than it runs alone. Without shuffle, a batch closes at ``batch_size`` or at the budget. With shuffle, the
    sentences are first grouped by ``batch_capacity`` (``batch_size`` for every sentence whose ``batch_size``
    copies fit the budget, fewer for longer ones) and each group is bucketed as above with its capacity as
    batch size: the number of batches of an epoch never depends on the shuffle (Lightning counts them once),
    and data without a sentence longer than ``max_tokens / batch_size`` gets exactly the batches of no budget.

    Under DDP (``num_replicas`` > 1) every rank builds the same batches of the epoch and takes every
    ``num_replicas``-th one from ``rank`` on: the shares are disjoint. So that all ranks run the same number of
    steps, a shuffled (training) epoch drops its last ``len % num_replicas`` batches, and an ordered
    (evaluation) one repeats its first batches to fill the last round; evaluation keys its results by the
    sentence ``index``, so a repeat changes nothing.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
        bucket_batches: int = 50,
        num_replicas: int = 1,
        rank: int = 0,
        max_tokens: int | None = None,
        keep_order: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, {num_replicas}), got {rank}")
        check_budget(batch_size, max_tokens)
        self.num_replicas, self.rank = num_replicas, rank
        self.lengths = list(lengths)
        # private on purpose: Lightning re-creates samplers that have both batch_size and drop_last attributes
        # as cls(sampler, batch_size=..., drop_last=...), which this signature does not follow
        self._batch_size = batch_size
        self._drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        self.bucket_batches = bucket_batches
        self.max_tokens, self.keep_order = max_tokens, keep_order
        self.epoch = 0
        # capacity -> its sentences in index order, largest capacity first (without long sentences: one group)
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(self.lengths):
            groups.setdefault(batch_capacity(n, batch_size, max_tokens), []).append(i)
        self._groups = sorted(groups.items(), reverse=True)
        self._ordered: list[list[int]] | None = None  # the unshuffled batches (they never change)

    @property
    def sampler(self) -> LengthBucketSampler:
        """Itself: Lightning calls ``set_epoch`` on ``batch_sampler.sampler`` at the start of every epoch."""
        return self

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle of this epoch."""
        self.epoch = epoch

    def all_batches(self) -> list[list[int]]:
        """The batches of the current epoch over all ranks."""
        if not self.shuffle:
            return list(self._in_order())
        key = self.lengths.__getitem__
        rng = random.Random(self.seed + self.epoch)
        sized: list[tuple[int, list[int]]] = []  # (capacity, batch)
        for size, members in self._groups:
            perm = list(members)
            rng.shuffle(perm)
            chunk = size * self.bucket_batches  # a multiple of size: only a group's last batch can be short
            for start in range(0, len(perm), chunk):
                part = sorted(perm[start : start + chunk], key=key)
                sized.extend((size, part[i : i + size]) for i in range(0, len(part), size))
        rng.shuffle(sized)
        return [batch for size, batch in sized if not self._drop_last or len(batch) == size]

    def _in_order(self) -> list[list[int]]:
        if self._ordered is None:
            batches = budget_batches(self.lengths, self._batch_size, self.max_tokens, self.keep_order)
            if self._drop_last and batches:
                last = batches[-1]  # the one batch the data's end closed: dropped if it had room for more
                longest = max(cost(self.lengths[i]) for i in last)
                if len(last) < batch_capacity(longest, self._batch_size, self.max_tokens):
                    batches = batches[:-1]
            self._ordered = batches
        return self._ordered

    def batches(self) -> list[list[int]]:
        """This rank's batches of the current epoch."""
        batches, world = self.all_batches(), self.num_replicas
        if world == 1:
            return batches
        if self.shuffle:
            batches = batches[: len(batches) - len(batches) % world]
        else:
            batches = batches + batches[: -len(batches) % world]
        return batches[self.rank :: world]

    def __iter__(self) -> Iterator[list[int]]:
        # A generator, so the shuffle is chosen at the first batch: Lightning creates the iterator on resume
        # before it calls set_epoch, and an eager list would replay epoch 0's order (docs/reliability.md).
        yield from self.batches()

    def __len__(self) -> int:
        if self.shuffle:
            total = sum(
                len(members) // size if self._drop_last else math.ceil(len(members) / size)
                for size, members in self._groups
            )
            return total // self.num_replicas
        return math.ceil(len(self._in_order()) / self.num_replicas)
