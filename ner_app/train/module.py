"""The LightningModule around ``BiLstmCrfTagger``: optimisation, dev and test evaluation, RNG-exact resume."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.callbacks import TQDMProgressBar
from pytorch_lightning.trainer.states import TrainerFn
from torch.optim.lr_scheduler import LinearLR, ReduceLROnPlateau, SequentialLR

from ner_app.runtime.lightning_compat import logs_this_step
from ner_app.runtime.rng_state import capture_rng_states, restore_rng_states
from ner_app.tagger.batch import Batch
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSpec, frozen_fingerprints
from ner_app.text.scores import GoldEntities

_TAGGER = "tagger."  # where the tagger's state-dict keys start


@dataclass(frozen=True)
class LrSchedule:
    """The learning-rate schedule (``optim.schedule`` and its keys): none, linear or plateau."""

    kind: str = "none"
    warmup_fraction: float = 0.1  # linear: share of the optimiser steps that warm up
    plateau_factor: float = 0.5  # plateau: lr multiplier
    plateau_patience: int = 2  # plateau: epochs without a better dev F1 before it drops


@dataclass(frozen=True)
class Evaluation:
    """One pass over a whole split: predicted tags (training scheme) in split order, scores and speed."""

    predicted: list[list[str]]
    scores: dict[str, Any]
    seconds: float


class TaggerModule(pl.LightningModule):
    """Trains a tagger with Adam on the summed CRF NLL plus its features' penalties (the learned mixes'), and a
    distilled student also on its teachers' marginals (``distill_weight`` times their cross-entropy, summed over
    tokens, on soft-labelled batches); evaluates dev and test.

    ``gold`` holds the gold tags of "dev" and "test" in the data's original scheme, indexed by sentence. Each
    validation or test pass gathers the predictions of every rank, scores the whole split once and keeps an
    ``Evaluation`` in ``evaluations[split]``; during fit ``val_f1`` selects the best epoch. Training logs
    ``train_loss`` (the logged step's batch loss per sentence) and, once per epoch, ``train_token_loss`` (the
    summed loss of all the epoch's batches over their tokens).
    """

    flops_per_batch: int | None = None  # for Lightning's ThroughputMonitor: not counted (varies with length)

    def __init__(
        self,
        tagger: BiLstmCrfTagger,
        spec: TaggerSpec,
        gold: Mapping[str, Sequence[Sequence[str]]],
        lr: float = 1e-3,
        l2_coef: float = 0.1,
        schedule: LrSchedule = LrSchedule(),
        distill_weight: float = 1.0,
    ) -> None:
        super().__init__()
        self.tagger, self.spec = tagger, spec
        self.gold = {split: [list(t) for t in tags] for split, tags in gold.items()}
        # each split's gold entities, read at its first pass
        self._gold_entities: dict[str, GoldEntities] = {}
        self.lr, self.l2_coef, self.schedule = lr, l2_coef, schedule
        self.distill_weight = distill_weight  # a soft-labelled batch's loss weight (distillation)
        self.evaluations: dict[str, Evaluation] = {}
        self._predicted: dict[int, list[str]] = {}
        self._start = 0.0
        self._epoch_loss, self._epoch_tokens = torch.zeros((), dtype=torch.float64), 0

    # ------------------------------------------------------------------------------ training
    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        if "soft" in batch:  # teachers' marginals on unlabelled text (train/distillation.py)
            loss = self.distill_weight * self.tagger.distillation_loss(batch, self.l2_coef)
        else:
            loss = self.tagger.loss(batch, self.l2_coef)
        # The epoch's loss per token, sum(loss) / sum(tokens) over every batch (length-bucketed batches differ
        # by orders of magnitude): summed here on the device in float64, logged once in on_train_epoch_end.
        # Lightning's own on_epoch accumulation costs about a millisecond of Python a step (self.log moves its
        # result objects on every call), which is most of a small model's step.
        self._epoch_loss = self._epoch_loss + loss.detach().double()
        self._epoch_tokens += sum(map(len, batch["tokens"]))  # host-side count: no device sync
        if self._logs_step():
            sentences = len(batch["tokens"])
            self.log("train_loss", loss / sentences, prog_bar=True, batch_size=sentences)
            if self.schedule.kind != "none":  # the lr this step uses, in the log beside its loss
                self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=sentences)
        return loss

    def _logs_step(self) -> bool:
        """Whether this training step's values reach anything: the logger writes every ``log_every_n_steps``-th
        step, and Lightning's terminal bar shows the latest values at every step."""
        trainer = self.trainer
        return logs_this_step(trainer) or isinstance(trainer.progress_bar_callback, TQDMProgressBar)

    def on_train_epoch_start(self) -> None:
        self._epoch_loss = torch.zeros((), dtype=torch.float64, device=self.device)
        self._epoch_tokens = 0

    def on_train_epoch_end(self) -> None:
        # summed over every rank: one reduction an epoch
        totals = torch.stack([self._epoch_loss, self._epoch_loss.new_tensor(self._epoch_tokens)]).to(
            self.device
        )
        loss, tokens = self.trainer.strategy.reduce(totals, reduce_op="sum")
        if self._epoch_tokens:  # no batch summed (an epoch that ran none): nothing to log
            self.log("train_token_loss", loss / tokens, on_step=False, on_epoch=True, batch_size=1)

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        # The fused kernel runs on CPU and GPU and is 4x faster per step on CPU than the per-tensor loop, but
        # Lightning refuses gradient clipping with a fused optimizer under mixed precision: foreach there.
        mixed = "mixed" in str(self.trainer.precision)
        optimizer = torch.optim.Adam(params, lr=self.lr, fused=not mixed, foreach=True if mixed else None)
        if self.schedule.kind == "none":
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": self._lr_scheduler(optimizer)}

    def _lr_scheduler(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Lightning's scheduler entry for ``self.schedule``; its state travels in every checkpoint."""
        s = self.schedule
        if s.kind == "plateau":
            # stepped after each epoch's validation, on the score that picks the best epoch
            plateau = ReduceLROnPlateau(
                optimizer, mode="max", factor=s.plateau_factor, patience=s.plateau_patience
            )
            return {"scheduler": plateau, "monitor": "val_f1", "interval": "epoch"}
        # The optimiser steps of the whole run (max_epochs, limit_train_batches and accumulation counted in).
        total = max(1, int(self.trainer.estimated_stepping_batches))
        warmup = min(round(s.warmup_fraction * total), total - 1)
        decay = LinearLR(optimizer, start_factor=1.0, end_factor=0.0, total_iters=total - warmup)
        if not warmup:
            return {"scheduler": decay, "interval": "step"}
        # lr/(warmup+1), 2 lr/(warmup+1), ... up to lr at step ``warmup``, then down to 0 at step ``total``
        warm = LinearLR(optimizer, start_factor=1 / (warmup + 1), end_factor=1.0, total_iters=warmup)
        return {"scheduler": SequentialLR(optimizer, [warm, decay], milestones=[warmup]), "interval": "step"}

    # ------------------------------------------------------------------------------ evaluation
    def _begin(self) -> None:
        self._predicted, self._start = {}, time.perf_counter()

    def _collect(self, batch: Batch) -> None:
        predicted = self.spec.decode_tags(self.tagger.decode(batch), batch["mask"])
        self._predicted.update(zip(batch["index"].tolist(), predicted, strict=True))

    def _finish(self, split: str) -> Evaluation | None:
        """Score the whole split once from every rank's predictions; None for a partial pass."""
        predicted = self._predicted
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            shares: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(shares, predicted)
            predicted = {i: tags for share in shares for i, tags in share.items()}
        gold = self.gold[split]
        if len(predicted) != len(gold):  # sanity checks and limit_*_batches
            return None
        in_order = [predicted[i] for i in range(len(gold))]
        if split not in self._gold_entities:
            self._gold_entities[split] = GoldEntities(gold)
        scores = self._gold_entities[split].score(self.spec.to_source_scheme(in_order))
        evaluation = Evaluation(in_order, scores, time.perf_counter() - self._start)
        self.evaluations[split] = evaluation
        return evaluation

    def on_validation_epoch_start(self) -> None:
        self._begin()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._collect(batch)

    def on_validation_epoch_end(self) -> None:
        evaluation = self._finish("dev")
        if evaluation is not None:
            s = evaluation.scores
            # Every rank holds the same scores; sync_dist averages equal values, which keeps them exact.
            self.log_dict(
                {"val_f1": s["f1"], "val_precision": s["precision"], "val_recall": s["recall"]},
                prog_bar=True,
                sync_dist=True,
            )
            if self.schedule.kind == "plateau" and self.trainer.state.fn == TrainerFn.FITTING:
                self._plateau().step(s["f1"])

    def _plateau(self) -> ReduceLROnPlateau:
        scheduler = self.lr_schedulers()
        assert isinstance(scheduler, ReduceLROnPlateau)
        return scheduler

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        # The plateau scheduler steps in on_validation_epoch_end, before the epoch's checkpoints are written
        # (Lightning's own step comes after them, and a resumed run skips it: the resumed lr would differ).
        if not isinstance(scheduler, ReduceLROnPlateau):
            super().lr_scheduler_step(scheduler, metric)

    def on_test_epoch_start(self) -> None:
        self._begin()

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._collect(batch)

    def on_test_epoch_end(self) -> None:
        self._finish("test")

    def predict_step(self, batch: Batch, batch_idx: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(sentence index (B,), Viterbi tag ids (B, T), marginal probability of each chosen tag (B, T))."""
        return (batch["index"], *self.tagger.decode_scored(batch))

    # ------------------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # A frozen encoder (the biLM) is not copied into every checkpoint: the spec records its files and
        # fingerprint.
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if not self._frozen(k)}
        checkpoint["ner_app"] = self.spec.to_json()
        # Lightning does not restore RNG state on resume; saving it makes a resumed run equal an uninterrupted one.
        checkpoint["rng_states"] = capture_rng_states()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._restore_bilm(checkpoint)
        states = checkpoint.get("rng_states")
        if states and self.trainer.state.fn == "fit":  # only a resumed fit continues the random streams
            restore_rng_states(states)

    def _frozen(self, key: str) -> bool:
        return key.startswith(_TAGGER) and self.tagger.frozen(key[len(_TAGGER) :])

    def _restore_bilm(self, checkpoint: dict[str, Any]) -> None:
        """Put this module's frozen tensors (the biLM's) back into a checkpoint's state dict, after checking they
        are the same: the checkpoint's spec names the same frozen weights."""
        ours = {f.name: f.frozen_fingerprint for f in self.spec.features if f.frozen_fingerprint is not None}
        if not ours:
            return
        theirs = frozen_fingerprints(checkpoint.get("ner_app"))
        if any(theirs.get(name) != fingerprint for name, fingerprint in ours.items()):
            raise ValueError("checkpoint was trained with other biLM weights (fingerprints differ)")
        for key, value in self.state_dict().items():
            if self._frozen(key):
                checkpoint["state_dict"][key] = value
