"""Knowledge distillation's training data (Hinton et al. 2015, for a CRF: the teachers' per-token tag marginals;
docs/distillation.md): the gold training sentences and the teachers' soft-labelled ones, in batches of one kind.

An epoch is every gold batch (case-augmented as usual) and every soft batch (or, with ``SoftEpochWindow``, a
window of them), shuffled together with the seed and the epoch, so a resumed run and every DDP rank draw the
same. A gold batch carries tags (the CRF likelihood), a soft one ``soft`` (B, T, K) (the cross-entropy of the
teachers' marginals, ``BiLstmCrfTagger.distillation_loss``).
Items are ``(index, view)``: indices below the gold count are gold sentences, the rest soft ones.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ner_app.tagger.batch import Batch, encode_batch
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.case import CaseView, case_view
from ner_app.text.soft_labels import SoftLabels
from ner_app.train.case_augment import CaseAugmentedBatches, EpochBatches
from ner_app.train.corpus import Split
from ner_app.train.sampler import LengthBucketSampler

_STREAM = 0x4B44  # "KD": the interleaving's own random stream


class DistillationDataset(Dataset):
    """Gold sentences (``split``) then soft-labelled ones (``soft``), read by ``(index, view)`` items."""

    def __init__(self, split: Split, soft: SoftLabels) -> None:
        self.split, self.soft = split, soft

    def __len__(self) -> int:
        return len(self.split) + len(self.soft.sentences)

    def __getitem__(self, item: tuple[int, CaseView]) -> tuple[int, list[str], list[str] | np.ndarray]:
        i, view = item
        if i < len(self.split):
            return i, case_view(self.split.tokens[i], view), self.split.tags[i]
        j = i - len(self.split)
        return i, self.soft.sentences[j], self.soft.rows(j)


class DistillationCollator:
    """A batch of one kind: gold items encoded with their tags, soft ones with their marginals padded into
    ``soft`` (B, T, K) float32."""

    def __init__(self, spec: TaggerSpec) -> None:
        self.spec = spec

    def __call__(self, items: Sequence[tuple[int, list[str], list[str] | np.ndarray]]) -> Batch:
        index, tokens, targets = zip(*items, strict=True)
        if all(isinstance(t, list) for t in targets):
            return encode_batch(tokens, self.spec, targets, index)  # the gold tags
        batch = encode_batch(tokens, self.spec, None, index)
        longest, width = batch["mask"].shape[1], len(self.spec.tag_vocab)
        soft = np.zeros((len(tokens), longest, width), dtype=np.float32)  # (B, T, K)
        for b, rows in enumerate(targets):
            soft[b, : len(rows)] = rows
        batch["soft"] = torch.from_numpy(soft)
        return batch


class DistillationBatches(Sampler[list[tuple[int, CaseView]]]):
    """The gold batches (``gold``: a batch sampler of ``(index, view)`` items) and the soft ones (``soft``: a
    batch sampler over the soft sentences, whose indices are offset by ``offset``), interleaved at random."""

    def __init__(self, gold: CaseAugmentedBatches, soft: EpochBatches, offset: int, seed: int) -> None:
        self.gold, self.soft, self.offset, self.seed = gold, soft, offset, seed
        self.epoch = 0

    @property
    def sampler(self) -> DistillationBatches:
        """Itself: Lightning calls ``set_epoch`` on ``batch_sampler.sampler`` at the start of every epoch."""
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.gold.set_epoch(epoch)
        self.soft.set_epoch(epoch)

    def __iter__(self) -> Iterator[list[tuple[int, CaseView]]]:
        # lazy, like the samplers it joins: the epoch is read at the first batch (a resumed run sets it late)
        gold: list[list[tuple[int, CaseView]]] = [list(b) for b in self.gold]
        cased: CaseView = "cased"  # soft sentences are read as the teachers read them
        soft = [[(i + self.offset, cased) for i in b] for b in self.soft]
        kinds = [True] * len(gold) + [False] * len(soft)
        random.Random(self.seed * 1_000_003 + self.epoch + _STREAM).shuffle(kinds)
        gold_iter, soft_iter = iter(gold), iter(soft)
        for is_gold in kinds:
            yield next(gold_iter) if is_gold else next(soft_iter)

    def __len__(self) -> int:
        return len(self.gold) + len(self.soft)


class SoftEpochWindow(Sampler[list[int]]):
    """About ``sentences`` soft sentences an epoch, when the unlabelled text is too long to read whole each epoch.

    The passes over the text follow one another as an endless stream of batches, pass ``p`` being ``pool``'s
    shuffled batches at its epoch ``p``, and epoch ``e`` takes the ``e``-th window of that stream: every epoch
    the same number of whole batches (Lightning counts them once), every sentence once before any repeats, and
    the window a function of the seed and the epoch alone (a resumed run draws the same). ``pool`` holds every
    rank's batches (one replica); under DDP each rank takes every ``world``-th batch of the window.
    """

    def __init__(self, pool: LengthBucketSampler, sentences: int, world: int = 1, rank: int = 0) -> None:
        if pool.num_replicas != 1:
            raise ValueError("the pool's batches are every rank's: build it with one replica")
        if sentences < 1:
            raise ValueError(f"sentences must be at least 1, got {sentences}")
        self.pool, self.world, self.rank = pool, world, rank
        self.per_pass = len(pool)  # a pass's batches: the same in every pass (LengthBucketSampler's promise)
        share = min(sentences, len(pool.lengths)) / max(len(pool.lengths), 1)
        self.window = max(world, round(self.per_pass * share) // world * world)  # whole batches, every rank
        self.epoch = 0

    @property
    def sampler(self) -> SoftEpochWindow:
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        # lazy, like LengthBucketSampler: the epoch is read at the first batch (a resumed run sets it late)
        passes, offset = divmod(self.epoch * self.window, self.per_pass)
        drawn: list[list[int]] = []
        while len(drawn) < self.window:  # a window may end in the next pass
            self.pool.set_epoch(passes)
            drawn.extend(self.pool.all_batches()[offset : offset + self.window - len(drawn)])
            passes, offset = passes + 1, 0
        yield from drawn[self.rank :: self.world]

    def __len__(self) -> int:
        return self.window // self.world
