"""Callbacks: the frozen-layer cache, filled once per node before the first batch, and throughput.

Lightning already writes checkpoints atomically (``TorchCheckpointIO`` saves through an fsspec transaction:
a temporary file renamed into place) and ships a throughput monitor, so neither is reimplemented here.
"""

from __future__ import annotations

import logging
import time

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback

from ner_app.errors import NerAppError
from ner_app.runtime.throughput import TrainingThroughput
from ner_app.tagger.batch import Batch
from ner_app.text.case import CASE_VIEWS, case_view
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.layer_cache import LayerCache, fill_document_cache
from ner_app.train.module import TaggerModule

log = logging.getLogger("ner_app")


class LayerCacheFill(Callback):
    """Before the first loop: local rank 0 of every node computes the frozen biLM's layers of every sentence
    the cache in ``directory`` does not hold yet, on its own device; after a barrier every rank opens the
    cache and the DataModule's batches carry the layers from then on (docs/scaling_out.md)."""

    def __init__(self, directory: str, batch_size: int = 64) -> None:
        self.directory, self.batch_size = directory, batch_size

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        dm = getattr(trainer, "datamodule", None)  # a property Lightning's type stubs do not declare
        assert isinstance(pl_module, TaggerModule) and isinstance(dm, ConllDataModule)
        elmo = pl_module.tagger.elmo
        if elmo is None or dm.layer_cache is not None:  # no biLM, or already filled by an earlier stage
            return
        bilm, fingerprint = elmo.bilm, pl_module.spec.elmo.fingerprint if pl_module.spec.elmo else ""
        if trainer.local_rank == 0:
            device, start = trainer.strategy.root_device, time.perf_counter()
            home, full_disk = next(bilm.parameters()).device, ""
            try:
                cache = LayerCache(self.directory, fingerprint, bilm.num_layers, bilm.output_dim)
                elmo_ref = pl_module.spec.elmo
                if elmo_ref is not None and elmo_ref.context == "document":  # docs/document_context.md
                    documents = [
                        [split.tokens[i] for i in doc]
                        for name, split in dm.splits.items()
                        for doc in dm.documents(name)
                    ]
                    computed = fill_document_cache(
                        cache,
                        documents,
                        bilm.to(device),
                        elmo_ref.max_stream_positions,
                        progress=trainer.is_global_zero,
                    )
                else:
                    sentences = [tokens for split in dm.splits.values() for tokens in split.tokens]
                    if dm.case_augment:  # the cache is keyed by the exact tokens: each view has its own rows
                        train = dm.splits["train"].tokens
                        sentences += [case_view(t, v) for v in CASE_VIEWS[1:] for t in train]
                    computed = cache.fill(
                        sentences,
                        bilm.to(device),
                        batch_size=self.batch_size,
                        device=device,
                        progress=trainer.is_global_zero,
                    )
            except (
                OSError
            ) as err:  # a full disk: the cache keeps its last published state (docs/reliability.md)
                full_disk = (
                    f"{self.directory}: cannot write the ELMo layer cache ({err.strerror}); free space or "
                )
            finally:
                bilm.to(home)
            if full_disk:  # raised here, once the fill's frames (and its progress bar) are gone
                raise NerAppError(full_disk + "set elmo.cache_dir=null")
            log.info(
                "ELMo layer cache %s: %d sentences computed in %.1f s, %d cached, %.1f MB on disk",
                self.directory,
                computed,
                time.perf_counter() - start,
                len(cache),
                cache.nbytes / 2**20,
            )
        trainer.strategy.barrier("layer cache filled")
        if trainer.local_rank != 0:  # opened after the fill, so that it sees every sentence
            cache = LayerCache(self.directory, fingerprint, bilm.num_layers, bilm.output_dim)
        dm.use_layer_cache(cache)


def train_throughput() -> TrainingThroughput:
    """Lightning's monitor counting sentences (samples) and tokens (items) of every training batch."""
    return TrainingThroughput(batch_size_fn=_sentences, length_fn=_tokens)


def _sentences(batch: Batch) -> int:
    return len(batch["tokens"])


def _tokens(batch: Batch) -> int:
    return sum(map(len, batch["tokens"]))  # counted on the host: the mask's sum would wait for the device
