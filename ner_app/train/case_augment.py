"""Case augmentation (``data.case_augment``): each epoch, a share of the training sentences is presented
lower-cased or upper-cased, tags unchanged, so that the word embedding, the char CNN and ELMo's characters all
see text as people often write it (docs/model.md#case-augmentation).

Which sentences, and which view each gets, depends only on the run's seed, the epoch and the number of
sentences: every rank of a DDP run and a resumed run draw the same. The views travel with the batch indices
(``(index, view)`` items), because the batch sampler runs in the main process, where Lightning sets the epoch,
while the dataset may be copied into worker processes that never see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
from torch.utils.data import Sampler

from ner_app.text.case import CaseView

_STREAM = 0x43415345  # "CASE": a random stream of its own, apart from the shuffle's


def case_views(count: int, share: float, seed: int, epoch: int) -> dict[int, CaseView]:
    """The sentences (of ``count``) that epoch ``epoch`` presents in another case: ``round(share * count)`` of
    them, the first half of the draw (rounded up) lower-cased, the rest upper-cased. Those left out are cased."""
    chosen = round(share * count)
    if not chosen:
        return {}
    order = np.random.default_rng([seed, epoch, _STREAM]).permutation(count)[:chosen]
    lower = (chosen + 1) // 2
    return {int(i): ("lower" if k < lower else "upper") for k, i in enumerate(order)}


class EpochBatches(Protocol):
    """A batch sampler whose batches depend on the epoch (``sampler.LengthBucketSampler``)."""

    def __iter__(self) -> Iterator[list[int]]: ...
    def __len__(self) -> int: ...
    def set_epoch(self, epoch: int) -> None: ...


class CaseAugmentedBatches(Sampler[list[tuple[int, CaseView]]]):
    """The batches of a training batch sampler over ``count`` sentences, each index paired with its view in
    the current epoch."""

    def __init__(self, batches: EpochBatches, count: int, share: float, seed: int) -> None:
        self.batches, self.count, self.share, self.seed = batches, count, share, seed
        self.epoch = 0

    @property
    def sampler(self) -> CaseAugmentedBatches:
        """Itself: Lightning calls ``set_epoch`` on ``batch_sampler.sampler`` at the start of every epoch."""
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[tuple[int, CaseView]]]:
        # lazy, like the sampler it wraps: the epoch is read at the first batch (a resumed run sets it late)
        views = case_views(self.count, self.share, self.seed, self.epoch)
        for batch in self.batches:
            yield [(i, views.get(i, "cased")) for i in batch]

    def __len__(self) -> int:
        return len(self.batches)
