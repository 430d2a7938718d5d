"""The LightningModule around ``BiLstmCrfTagger``: optimisation, dev-F1 model selection, RNG-exact resume."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.training.reports import entity_scores


class TaggerModule(pl.LightningModule):
    """Trains a tagger with Adam on the summed CRF NLL plus the ELMo mix penalty; logs dev entity F1.

    ``decode_tags(tag_ids, mask)`` turns predictions into strings in the data's original scheme and
    ``dev_gold`` holds the dev gold tags in that scheme, indexed by sentence.
    """

    def __init__(
        self,
        tagger: BiLstmCrfTagger,
        decode_tags: Callable[[torch.Tensor, torch.Tensor], list[list[str]]],
        dev_gold: Sequence[Sequence[str]],
        lr: float = 1e-3,
        l2_coef: float = 0.1,
    ) -> None:
        super().__init__()
        self.tagger = tagger
        self.decode_tags = decode_tags
        self.dev_gold = [list(t) for t in dev_gold]
        self.lr, self.l2_coef = lr, l2_coef
        self._dev_predictions: dict[int, list[str]] = {}

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss = self.tagger.loss(batch, self.l2_coef)
        self.log("train_loss", loss / len(batch["tokens"]), prog_bar=True, batch_size=len(batch["tokens"]))
        return loss

    def on_validation_epoch_start(self) -> None:
        self._dev_predictions = {}

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        predicted = self.decode_tags(self.tagger.decode(batch), batch["mask"])
        for index, tags in zip(batch["index"].tolist(), predicted, strict=True):
            self._dev_predictions[index] = tags

    def on_validation_epoch_end(self) -> None:
        if len(self._dev_predictions) != len(self.dev_gold):  # sanity checks and partial runs
            return
        predicted = [self._dev_predictions[i] for i in range(len(self.dev_gold))]
        scores = entity_scores(self.dev_gold, predicted)
        self.log_dict({"val_f1": scores["f1"], "val_precision": scores["precision"], "val_recall": scores["recall"]},
                      prog_bar=True)  # fmt: skip

    def configure_optimizers(self) -> torch.optim.Optimizer:
        params = [p for p in self.parameters() if p.requires_grad]
        return torch.optim.Adam(params, lr=self.lr)

    # Lightning does not restore RNG state on resume; saving it makes a resumed run equal an uninterrupted one.
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = {
            "torch": torch.get_rng_state(),
            "numpy": np.random.get_state(),
            "python": random.getstate(),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get("rng_states")
        if states:
            torch.set_rng_state(states["torch"])
            np.random.set_state(states["numpy"])
            random.setstate(states["python"])
