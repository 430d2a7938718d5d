"""``BilmLanguageModel``: the biLM trained as two language models with one shared softmax (bilm-tf recipe)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.trainer.states import TrainerFn
from torch import nn

from ner_app.bilm.document import context_layers
from ner_app.bilm.lstm import State
from ner_app.bilm.options import BilmOptions
from ner_app.errors import NerAppError
from ner_app.pretrain.batches import IGNORE, EvaluationBatch, TrainingBatch
from ner_app.pretrain.metrics import Perplexity
from ner_app.pretrain.softmax import SampledSoftmaxLoss
from ner_app.runtime.lightning_compat import attached_trainer
from ner_app.runtime.rng_state import capture_rng_states, restore_rng_states


class BilmLanguageModel(pl.LightningModule):
    """Forward LM predicts token t+1 from the forward top layer, backward LM t-1 from the backward top layer.

    Training batches come from ``StreamBatches``: both directions carry their state across windows of the
    same row (reset at window 0 of an epoch). With ``sentence_reset`` (default) the state is also zeroed at each
    sentence start inside a window, so training sees every sentence exactly as the stateless biLM computes it
    in ELMo and in validation; without it the state runs on across sentences, as bilm-tf trained. Validation
    batches come from ``sentence_batches`` and run the stateless biLM sentence by sentence with the exact
    softmax.

    Why not one stateful ``ElmoLstm`` call per window: its backward stack would start each window from the
    state it ended the previous window with, which has read the token just before this window, the backward
    target of the window's first position. The model would learn to read that leak. Instead each direction
    runs its own stack over its own windows (``ElmoLstm.run_direction``): the backward LM reads the streams right to left,
    like bilm-tf's separate reversed stream, so its carried state is its true right-hand context.

    Every evaluation runs through Lightning's validation loop (``validation_step``): periodic validation during
    ``fit`` logs ``val_ppl``; an evaluation run by ``trainer.validate`` leaves its result in ``perplexity``.
    """

    def __init__(
        self,
        options: dict[str, Any],
        vocab_size: int,
        num_sampled: int,
        dropout: float = 0.1,
        optimizer: str = "adagrad",
        lr: float = 0.2,
        seed: int = 0,
        sentence_reset: bool = True,
        frozen_bilm_steps: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.bilm = BilmOptions.from_dict(options).build(stateful=False, dropout=dropout)
        self.softmax = SampledSoftmaxLoss(vocab_size, self.bilm.projection_dim, num_sampled, seed)
        self.output_dropout = nn.Dropout(dropout)  # on the top layer, before the softmax
        self.states: dict[str, list[State] | None] = {"forward": None, "backward": None}
        self._val: dict[int, Sums] = {}  # this process's validation batches by index
        self.perplexity: Perplexity | None = None  # the last validation's result

    # ------------------------------------------------------------------------------------ training
    def embed(self, char_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """char_ids (B, T, 50), mask (B, T) -> token representations (B, T, P), zero where masked."""
        encoded = self.bilm.token_encoder(char_ids[mask])  # (N, P), each distinct token encoded once
        return encoded.new_zeros(*mask.shape, encoded.shape[-1]).masked_scatter(mask[:, :, None], encoded)

    def direction_top(
        self, direction: str, x: torch.Tensor, resets: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One direction's window (B, T, P) in text order -> its top layer (B, T, P), its state carried.

        ``resets`` (B, T) bool in text order: where this direction's state is zeroed (its sentence starts).
        """
        lstm = self.bilm.lstm
        layers = lstm.forward_layers if direction == "forward" else lstm.backward_layers
        if direction == "backward":
            x = x.flip(1)  # windows are full, so reversing the time axis is reversing every row
            resets = resets.flip(1) if resets is not None else None
        batch, steps, _ = x.shape
        carried = self.states[direction]
        if carried is None:
            zeros = (x.new_zeros(batch, lstm.projection_size), x.new_zeros(batch, lstm.cell_size))
            states = [zeros] * lstm.n_layers
        else:
            states = [(h.to(x.device, x.dtype), c.to(x.device, x.dtype)) for h, c in carried]
        data = x.transpose(0, 1).reshape(steps * batch, -1)  # (T * B, P) time-major: the cells' packed layout
        packed_resets = resets.transpose(0, 1).reshape(-1) if resets is not None else None  # (T * B,)
        stack = list(lstm.run_direction(layers, data, [batch] * steps, states, resets=packed_resets))
        self.states[direction] = [(h.detach().float(), c.detach().float()) for _, (h, c) in stack]  # TBPTT
        top = stack[-1][0].view(steps, batch, -1).transpose(0, 1)  # (B, T, P)
        return top.flip(1) if direction == "backward" else top

    def training_step(self, batch: TrainingBatch, batch_idx: int) -> torch.Tensor:
        if batch["window"] == 0:  # a new epoch packs new streams
            self.states = {"forward": None, "backward": None}
        fwd, bwd = batch["forward"], batch["backward"]
        windows = {"forward": fwd, "backward": bwd}
        # While frozen, the biLM runs without a graph: its weights get no gradient (the optimiser skips them,
        # Adagrad's accumulators included) and the step skips the biLM's backward.
        frozen = self.global_step < self.hparams["frozen_bilm_steps"]
        tops = {}
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen):
            # Both windows in one encoder call: words they share are encoded once.
            chars, mask = torch.cat([fwd["char_ids"], bwd["char_ids"]]), torch.cat([fwd["mask"], bwd["mask"]])
            embedded = self.embed(chars, mask).split(len(fwd["mask"]))
            for direction, inputs in zip(("forward", "backward"), embedded, strict=True):
                # without sentence resets the state still starts from zero at each document (the stream of
                # document-context ELMo, docs/document_context.md)
                resets = (
                    windows[direction]["resets"]
                    if self.hparams["sentence_reset"]
                    else windows[direction]["document_resets"]
                )
                tops[direction] = self.direction_top(direction, inputs, resets)
        losses = {}
        for direction in ("forward", "backward"):
            top = self.output_dropout(tops[direction])
            targets = windows[direction]["targets"]
            valid = targets != IGNORE
            losses[direction] = self.softmax.sampled_loss(top[valid], targets[valid])
        loss = (losses["forward"] + losses["backward"]) / 2
        size = len(fwd["mask"])
        self.log("train_loss", loss, prog_bar=True, batch_size=size)
        self.log_dict({f"train_loss_{d}": v for d, v in losses.items()}, batch_size=size)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        if self.hparams["optimizer"] == "adagrad":
            return torch.optim.Adagrad(
                self.parameters(), lr=self.hparams["lr"], initial_accumulator_value=1.0
            )
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])

    def setup(self, stage: str) -> None:
        if self.trainer.world_size > 1:
            # Every process was seeded alike; its own dropout masks come from its own seed. (DDP copies rank 0's
            # initial weights to all; the candidate sampler keeps one seed: one draw per step, as one process.)
            seed = np.random.SeedSequence([self.hparams["seed"], self.global_rank]).generate_state(1)[0]
            torch.manual_seed(int(seed))

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # The carried states, so --resume continues the streams where they were; the random streams, which
        # dropout and the candidate sampler draw from, so that a resumed run does not drift. Under DDP every
        # process has its own of both: all are gathered (every process builds the checkpoint, rank 0 writes it).
        mine = {
            "carried_states": {d: _to_cpu(s) for d, s in self.states.items()},
            "rng_states": capture_rng_states({"softmax_sampler": self.softmax.sampler.generator}),
        }
        processes = _gather(mine)
        checkpoint.update(processes[0])  # one process: the layout of single-device checkpoints
        if len(processes) > 1:
            checkpoint["process_states"] = processes

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        mine = checkpoint  # a load outside a Trainer (inspection) takes rank 0's states
        if attached_trainer(self) is not None and (
            self.trainer.world_size > 1 or "process_states" in checkpoint
        ):
            world, processes = self.trainer.world_size, checkpoint.get("process_states", [checkpoint])
            if len(processes) != world:
                raise NerAppError(
                    f"checkpoint written by {len(processes)} process(es), resumed with {world}: resume with the "
                    "same train.devices x train.num_nodes (each process continues its own streams)"
                )
            mine = processes[self.global_rank]
        self.states = mine.get("carried_states", {"forward": None, "backward": None})
        if mine.get("rng_states"):
            restore_rng_states(mine["rng_states"], {"softmax_sampler": self.softmax.sampler.generator})

    # ---------------------------------------------------------------------------------- evaluation
    def sentence_nll(self, batch: EvaluationBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact NLL of every prediction of a ``sentence_batches`` or ``document_batches`` batch: forward
        (N_f,), backward (N_b,)."""
        if "contexts" in batch:  # each sentence's positions in its document's stream, read from zero state
            layers, mask = context_layers(self.bilm, batch["contexts"])
            top = layers[-1]
        else:
            out = self.bilm(batch["char_ids"])  # stateless: every sentence from zero state
            top, mask = out.layers[-1], out.mask
        targets = batch["targets"]  # (B, T+2); top (B, T+2, 2P), mask (B, T+2)
        p = self.bilm.projection_dim
        fwd_valid = mask[:, :-1] & mask[:, 1:]  # position t predicts t+1
        bwd_valid = mask[:, 1:] & mask[:, :-1]  # position t+1 predicts t
        fwd = self.softmax.full_nll(top[:, :-1, :p][fwd_valid], targets[:, 1:][fwd_valid])
        bwd = self.softmax.full_nll(top[:, 1:, p:][bwd_valid], targets[:, :-1][bwd_valid])
        return fwd, bwd

    def batch_sums(self, batch: EvaluationBatch) -> Sums:
        """(forward NLL sum, predictions, backward NLL sum, predictions) of one batch, the sums in float64."""
        fwd, bwd = self.sentence_nll(batch)
        return fwd.double().sum().item(), len(fwd), bwd.double().sum().item(), len(bwd)

    def on_validation_epoch_start(self) -> None:
        self._val = {}

    def validation_step(self, batch: EvaluationBatch, batch_idx: int) -> None:
        if batch["index"] >= 0:  # -1: a filler of shard_batches
            self._val[int(batch["index"])] = self.batch_sums(batch)

    def on_validation_epoch_end(self) -> None:
        parts = _merge(_gather(self._val))
        self.perplexity = combine(parts) if parts else None
        if self.perplexity is not None and self.trainer.state.fn == TrainerFn.FITTING:
            ppl = self.perplexity
            # Every process holds the same numbers; sync_dist averages equal values, which keeps them exact.
            self.log_dict(
                {
                    f"val_ppl_{k}" if k != "mean" else "val_ppl": ppl[k]
                    for k in ("forward", "backward", "mean")
                },
                sync_dist=True,
            )


Sums = tuple[float, int, float, int]  # forward NLL sum, predictions, backward NLL sum, predictions


def combine(parts: dict[int, Sums]) -> Perplexity:
    """Perplexities of per-batch sums, added in batch order (the same additions on any number of processes)."""
    fwd_sum, bwd_sum, count = 0.0, 0.0, 0
    for index in sorted(parts):
        f, n, b, _ = parts[index]
        fwd_sum, bwd_sum, count = fwd_sum + f, bwd_sum + b, count + n
    ppl = perplexities(fwd_sum / count, bwd_sum / count)
    return {
        "forward": ppl["forward"],
        "backward": ppl["backward"],
        "mean": ppl["mean"],
        "predicted_tokens": count,
    }


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _gather(obj: Any) -> list[Any]:
    """``obj`` of every process in rank order (plain Python values and CPU tensors); [obj] without DDP."""
    if not _distributed():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _merge(shares: list[dict[int, Sums]]) -> dict[int, Sums]:
    return {k: v for share in shares for k, v in share.items()}


def _to_cpu(states: list[State] | None) -> list[State] | None:
    return None if states is None else [(h.cpu(), c.cpu()) for h, c in states]


def perplexities(forward_nll: float, backward_nll: float) -> dict[str, float]:
    """exp(mean NLL) per direction; the mean is exp of the mean of both NLLs, as bilm-tf reports it."""
    return {
        "forward": math.exp(forward_nll),
        "backward": math.exp(backward_nll),
        "mean": math.exp((forward_nll + backward_nll) / 2),
    }
