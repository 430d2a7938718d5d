"""Callbacks: the frozen-layer cache, filled once per node before the first batch, and throughput.

Lightning already writes checkpoints atomically (``TorchCheckpointIO`` saves through an fsspec transaction:
a temporary file renamed into place) and ships a throughput monitor, so neither is reimplemented here.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback

from ner_app.errors import NerAppError
from ner_app.runtime.throughput import TrainingThroughput
from ner_app.tagger.batch import Batch
from ner_app.tagger.features import CacheSource, FeatureSpec
from ner_app.text.case import CASE_VIEWS, case_view
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.layer_cache import LayerCache, fill_document_cache
from ner_app.train.module import TaggerModule

log = logging.getLogger("ner_app")


class LayerCacheFill(Callback):
    """Before the first loop: local rank 0 of every node computes, for every input feature with a frozen encoder
    (``InputFeature.cache_source``), the layers of every sentence the cache in ``directory`` does not hold yet,
    on its own device; after a barrier every rank opens the cache and the DataModule's batches carry the layers
    from then on (docs/scaling_out.md)."""

    def __init__(self, directory: str, batch_size: int = 64) -> None:
        self.directory, self.batch_size = directory, batch_size

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        dm = getattr(trainer, "datamodule", None)  # a property Lightning's type stubs do not declare
        assert isinstance(pl_module, TaggerModule) and isinstance(dm, ConllDataModule)
        for feature in pl_module.spec.features:
            fingerprint = feature.frozen_fingerprint
            if (
                fingerprint is None or feature.name in dm.layer_caches
            ):  # nothing frozen, or an earlier stage's
                continue
            source = pl_module.tagger.feature(feature.name).cache_source()
            if source is not None:
                # the spec's fingerprint: the encoder's weights were checked against it when they were loaded
                source = dataclasses.replace(source, fingerprint_of=_constant(fingerprint))
                dm.use_layer_cache(self._filled(trainer, dm, feature, source), feature.name)

    def _filled(
        self, trainer: pl.Trainer, dm: ConllDataModule, feature: FeatureSpec, source: CacheSource
    ) -> LayerCache:
        if trainer.local_rank == 0:
            device, start = trainer.strategy.root_device, time.perf_counter()
            encoder = source.module
            home, full_disk = next(encoder.parameters()).device, ""
            name = "ELMo" if feature.name == "elmo" else feature.name  # in the progress and the log lines
            try:
                cache = LayerCache.for_source(self.directory, source)
                positions = feature.document_positions
                if positions is not None:  # docs/document_context.md
                    documents = [
                        [split.tokens[i] for i in doc]
                        for name, split in dm.splits.items()
                        for doc in dm.documents(name)
                    ]
                    encoder.to(device)
                    computed = fill_document_cache(
                        cache,
                        documents,
                        source,
                        positions,
                        progress=trainer.is_global_zero,
                        label="biLM" if feature.name == "elmo" else feature.name,
                    )
                else:
                    sentences = [tokens for split in dm.splits.values() for tokens in split.tokens]
                    if dm.case_augment:  # the cache is keyed by the exact tokens: each view has its own rows
                        train = dm.splits["train"].tokens
                        sentences += [case_view(t, v) for v in CASE_VIEWS[1:] for t in train]
                    encoder.to(device)
                    computed = cache.fill(
                        sentences,
                        source,
                        batch_size=self.batch_size,
                        device=device,
                        progress=trainer.is_global_zero,
                        label="biLM" if feature.name == "elmo" else feature.name,
                    )
            except (
                OSError
            ) as err:  # a full disk: the cache keeps its last published state (docs/reliability.md)
                full_disk = (
                    f"{self.directory}: cannot write the {name} layer cache ({err.strerror}); free space or "
                )
            finally:
                encoder.to(home)
            if full_disk:  # raised here, once the fill's frames (and its progress bar) are gone
                raise NerAppError(full_disk + "set elmo.cache_dir=null")
            log.info(
                "%s layer cache %s: %d sentences computed in %.1f s, %d cached, %.1f MB on disk",
                name,
                self.directory,
                computed,
                time.perf_counter() - start,
                len(cache),
                cache.nbytes / 2**20,
            )
        trainer.strategy.barrier("layer cache filled")
        if trainer.local_rank != 0:  # opened after the fill, so that it sees every sentence
            cache = LayerCache.for_source(self.directory, source)
        return cache


def _constant(value: str) -> Callable[[], str]:
    return lambda: value


def train_throughput() -> TrainingThroughput:
    """Lightning's monitor counting sentences (samples) and tokens (items) of every training batch."""
    return TrainingThroughput(batch_size_fn=_sentences, length_fn=_tokens)


def _sentences(batch: Batch) -> int:
    return len(batch["tokens"])


def _tokens(batch: Batch) -> int:
    return sum(map(len, batch["tokens"]))  # counted on the host: the mask's sum would wait for the device
