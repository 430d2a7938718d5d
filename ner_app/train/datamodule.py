"""Batches for the tagger: collate and the LightningDataModule (its batch sampler: ``sampler.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from ner_app.tagger.batch import Batch, Context, batch_to, encode_batch
from ner_app.tagger.contexts import feature_contexts, feature_keys
from ner_app.tagger.features import FeatureError
from ner_app.tagger.spec import TaggerSpec
from ner_app.text.batching import check_budget
from ner_app.text.case import CaseView, case_view
from ner_app.text.runs import id_runs
from ner_app.text.soft_labels import SoftLabels
from ner_app.train.case_augment import CaseAugmentedBatches, EpochBatches
from ner_app.train.corpus import SPLITS, Corpus, Split
from ner_app.train.distillation import (
    DistillationBatches,
    DistillationCollator,
    DistillationDataset,
    SoftEpochWindow,
)
from ner_app.train.layer_cache import LayerCache
from ner_app.train.sampler import LengthBucketSampler

TRAIN_MAX_TOKENS = 8192  # 64 sentences x 128 tokens: data.max_tokens_per_batch
EVAL_MAX_TOKENS = 32768  # 256 sentences x 128 tokens: data.eval_max_tokens_per_batch


class Collator:
    """``collate_fn`` for ``(index, tokens, tags)`` items: encodes with the spec's features and, for a feature
    with a layer cache, adds its frozen encoder's layers read from disk; for a feature reading documents without
    one, each sentence's context. A class so that worker processes can pickle it."""

    def __init__(
        self,
        spec: TaggerSpec,
        layer_caches: Mapping[str, LayerCache] | None = None,
        contexts: Mapping[str, Sequence[Context]] | None = None,
        keys: Mapping[str, Sequence[bytes]] | None = None,
    ) -> None:
        self.spec = spec
        self.layer_caches = dict(layer_caches or {})
        # Document context (docs/document_context.md), per feature by dataset index: each sentence's stream and
        # position (the encoder runs on them), or its layer-cache key.
        self.contexts, self.keys = dict(contexts or {}), dict(keys or {})

    def __call__(self, items: Sequence[tuple[int, list[str], list[str]]]) -> Batch:
        index, tokens, tags = zip(*items, strict=True)
        inputs: dict[str, dict[str, Any]] = {}
        for name, cache in self.layer_caches.items():
            keys = self.keys.get(name)
            if keys is not None:
                layers, mask = cache.lookup_keys([keys[i] for i in index], tokens)
            else:
                layers, mask = cache.lookup(tokens)  # L+1 x (B, T+2, D)
            inputs[name] = {"layers": layers, "mask": mask}
        for name, contexts in self.contexts.items():
            if name not in inputs:
                inputs[name] = {"context": [contexts[i] for i in index]}
        return encode_batch(tokens, self.spec, tags, index, inputs)


class _SplitDataset(Dataset):
    def __init__(self, split: Split) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> tuple[int, list[str], list[str]]:
        return i, self.split.tokens[i], self.split.tags[i]


class _CaseViewDataset(_SplitDataset):
    """A split read by ``(index, view)`` items (``CaseAugmentedBatches``): the tokens in that case view."""

    def __getitem__(self, item: tuple[int, CaseView]) -> tuple[int, list[str], list[str]]:  # type: ignore[override]
        i, view = item
        return i, case_view(self.split.tokens[i], view), self.split.tags[i]


class ConllDataModule(pl.LightningDataModule):
    """Batches of a ``Corpus`` encoded with a ``TaggerSpec``: both are built before it and never changed by it.

    Training batches are shuffled and length-bucketed; dev and test batches come in length order. Under DDP
    the sampler gives every rank its own share (``LengthBucketSampler``). A batch's ``index`` is the
    sentence's position in ``corpus.splits[name]`` (file order for local files). ``use_layer_cache`` makes
    every later batch carry a frozen feature's layers from disk. ``max_tokens`` (training) and
    ``eval_max_tokens`` cap a batch's sentences x padded length (None: no cap); the defaults split no batch of
    CoNLL-2003 (at most 124 tokens a sentence) at the default batch sizes. ``case_augment`` is the share of
    the training sentences each epoch presents lower- or upper-cased (``ner_app.train.case_augment``). With
    ``soft`` (teachers' marginals on unlabelled sentences), training epochs also hold its sentences, in batches
    of their own (``ner_app.train.distillation``).
    """

    def __init__(
        self,
        corpus: Corpus,
        spec: TaggerSpec,
        batch_size: int = 32,
        eval_batch_size: int = 64,
        num_workers: int = 0,
        seed: int = 0,
        max_tokens: int | None = TRAIN_MAX_TOKENS,
        eval_max_tokens: int | None = EVAL_MAX_TOKENS,
        case_augment: float = 0.0,
        soft: SoftLabels | None = None,
        soft_per_epoch: int | None = None,
    ) -> None:
        super().__init__()
        self.corpus, self.spec = corpus, spec
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        check_budget(batch_size, max_tokens)
        check_budget(eval_batch_size, eval_max_tokens)
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens
        self.num_workers, self.seed = num_workers, seed
        if not 0.0 <= case_augment <= 1.0:
            raise ValueError(f"case_augment must be in [0, 1], got {case_augment}")
        self.case_augment = case_augment
        self.soft = soft  # distillation: teachers' marginals on unlabelled sentences, trained beside train
        self.soft_per_epoch = soft_per_epoch  # about this many of them an epoch (SoftEpochWindow); None: all
        self.layer_caches: dict[str, LayerCache] = {}

    @property
    def splits(self) -> dict[str, Split]:
        return self.corpus.splits

    @property
    def layer_cache(self) -> LayerCache | None:
        """The layer cache of the (first) cached feature; None before one is used."""
        return next(iter(self.layer_caches.values()), None)

    def use_layer_cache(self, cache: LayerCache, feature: str | None = None) -> None:
        """Read the frozen layers of input feature ``feature`` (default: the spec's one feature with a frozen
        encoder) of every later batch from ``cache`` (which holds every sentence)."""
        if feature is None:
            frozen = [f.name for f in self.spec.features if f.frozen_fingerprint is not None]
            if len(frozen) != 1:
                raise FeatureError(f"use_layer_cache: name the feature (frozen features: {frozen})")
            feature = frozen[0]
        self.layer_caches[feature] = cache

    def _replicas(self) -> tuple[int, int]:
        """(number of ranks, this rank) when a Trainer runs this module, else (1, 0)."""
        trainer = self.trainer
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    def dataloader(self, split: str, shuffle: bool = False, batch_size: int | None = None) -> DataLoader:
        """Batches of a split ("train", "dev" or "test"); train uses ``batch_size`` and ``max_tokens``, the
        others ``eval_batch_size`` (unless ``batch_size`` is given) and ``eval_max_tokens``."""
        if split not in SPLITS:
            raise KeyError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
        data = self.splits[split]
        size = batch_size or (self.batch_size if split == "train" else self.eval_batch_size)
        # document context (docs/document_context.md): each sentence's stream, or its layer-cache key
        contexts = feature_contexts(self.spec, data.tokens, data.docs, self.layer_caches)
        keys = feature_keys(self.spec, data.tokens, data.docs, self.layer_caches)
        replicas, rank = self._replicas()
        budget = self.max_tokens if split == "train" else self.eval_max_tokens
        sampler = LengthBucketSampler(
            [len(t) for t in data.tokens],
            size,
            shuffle=shuffle,
            seed=self.seed,
            num_replicas=replicas,
            rank=rank,
            max_tokens=budget,
        )
        if split == "train" and shuffle and self.soft is not None:
            return self._distillation_loader(data, sampler, size)
        augment = split == "train" and shuffle and self.case_augment > 0
        if augment and (contexts or keys):
            raise ValueError("case augmentation reads sentences alone: it needs ELMo in sentence context")
        return DataLoader(
            _CaseViewDataset(data) if augment else _SplitDataset(data),
            batch_sampler=CaseAugmentedBatches(sampler, len(data), self.case_augment, self.seed)
            if augment
            else sampler,
            collate_fn=Collator(self.spec, self.layer_caches, contexts, keys),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def _distillation_loader(self, data: Split, gold: LengthBucketSampler, size: int) -> DataLoader:
        """Training batches of gold and soft-labelled sentences (a student's features read no documents)."""
        assert self.soft is not None
        replicas, rank = self._replicas()
        windowed = self.soft_per_epoch is not None
        pool = LengthBucketSampler(
            [len(t) for t in self.soft.sentences],
            size,
            shuffle=True,
            seed=self.seed,
            num_replicas=1 if windowed else replicas,
            rank=0 if windowed else rank,
            max_tokens=self.max_tokens,
        )
        soft: EpochBatches = pool
        if self.soft_per_epoch is not None:  # a window of the labelled sentences an epoch
            soft = SoftEpochWindow(pool, self.soft_per_epoch, replicas, rank)
        cased = CaseAugmentedBatches(gold, len(data), self.case_augment, self.seed)
        return DataLoader(
            DistillationDataset(data, self.soft),
            batch_sampler=DistillationBatches(cased, soft, len(data), self.seed),
            collate_fn=DistillationCollator(self.spec),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def transfer_batch_to_device(self, batch: Batch, device: torch.device, dataloader_idx: int) -> Batch:
        # Lightning's default walks every value of the batch, each token's string too, at every step
        return batch_to(batch, device)

    def documents(self, split: str) -> list[range]:
        """The documents of a split as ranges of sentence indices: runs of consecutive sentences with one
        ``doc`` id (CoNLL ``-DOCSTART-`` blocks; a file without any is one document)."""
        return id_runs(self.splits[split].docs)

    def train_dataloader(self) -> DataLoader:
        return self.dataloader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.dataloader("dev")

    def test_dataloader(self) -> DataLoader:
        return self.dataloader("test")
