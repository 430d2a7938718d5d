"""``run_pretraining``: vocabulary, streams, ``BilmLanguageModel`` and a Lightning trainer from a config; then
the export (options.json, weights.hdf5, softmax.hdf5, vocab.txt) and held-out perplexities (metrics.json).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, EarlyStopping

from ner_app.bilm.options import BilmOptions
from ner_app.bilm.weights import load_weights, save_bilm
from ner_app.config.load import BilmPretrainConfig, config_to_dict, save_config
from ner_app.errors import MissingFileError, NerAppError
from ner_app.files import atomic_path
from ner_app.pretrain.data import StreamBatches, read_corpus
from ner_app.pretrain.heldout import (
    context_batches,
    first_sentences,
    read_documents,
    shard_batches,
)
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.vocab import SoftmaxVocab
from ner_app.runtime.checkpoint import SafeCheckpointIO, load_checkpoint
from ner_app.runtime.devices import choose_precision
from ner_app.runtime.finite import FiniteGuard
from ner_app.runtime.log_progress import lightning_progress, silence_known_warnings
from ner_app.runtime.moved_checkpoint import MovableCheckpoint
from ner_app.runtime.run_dir import (
    ResumableCSVLogger,
    RunIdentity,
    check_identity,
    claimed_run_folder,
    data_fingerprint,
    run_identity,
)

log = logging.getLogger("ner_app")


class StreamPosition(Callback):
    """Tells the training streams which window the model has trained on, for the position in checkpoints.

    ``batches`` is set once the Trainer has said which share of the streams this process reads.
    """

    def __init__(self) -> None:
        self.batches: StreamBatches | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        if self.batches is not None:
            self.batches.mark_consumed(batch["epoch"], batch["window"])


class BatchIterable:
    """A fixed list of batches as one loader (Lightning would take a plain list for several loaders)."""

    def __init__(self, batches: list[dict[str, torch.Tensor]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def check_config(cfg: BilmPretrainConfig) -> None:
    """Reject values that would only fail deep inside training, naming the key."""
    t, m = cfg.train, cfg.model
    positive = {
        "data.vocab_size": cfg.data.vocab_size - 3, "train.batch_size": t.batch_size,
        "train.unroll_steps": t.unroll_steps, "train.n_negative_samples": t.n_negative_samples,
        "train.max_steps": t.max_steps, "train.val_every_n_steps": t.val_every_n_steps,
        "train.eval_batch_size": t.eval_batch_size, "model.n_layers": m.n_layers, "train.devices": t.devices,
        "train.num_nodes": t.num_nodes,
    }  # fmt: skip
    for key, value in positive.items():
        if value < 1:
            raise NerAppError(f"config key '{key}' is too small (vocab_size needs >= 4, the others >= 1)")
    for key, value in {"train.lr": t.lr, "train.grad_clip": t.grad_clip}.items():
        if not (
            isinstance(value, int | float)
            and math.isfinite(value)
            and value >= 0
            and (value > 0 or key != "train.lr")
        ):
            raise NerAppError(f"config key '{key}' must be a finite number (> 0 for lr), found {value}")
    if any(word in t.strategy for word in ("spawn", "fork", "notebook")):
        raise NerAppError(  # those run only the fit in their processes; the export needs every process after it
            f"config key 'train.strategy': '{t.strategy}' is not supported by pretrain-bilm; use ddp (or auto)"
        )
    if t.frozen_bilm_steps < 0:
        raise NerAppError(
            f"config key 'train.frozen_bilm_steps' must be at least 0, found {t.frozen_bilm_steps}"
        )
    if t.frozen_bilm_steps and t.devices * t.num_nodes > 1:
        # DDP's reducer would wait for the frozen biLM's gradients
        raise NerAppError(
            "config key 'train.frozen_bilm_steps' needs one process (train.devices x train.num_nodes = 1), "
            f"found {t.devices * t.num_nodes}"
        )
    if t.patience is not None and t.patience < 1:
        raise NerAppError(f"config key 'train.patience' must be at least 1 (or null), found {t.patience}")
    if not cfg.data.heldout_contexts or len(set(cfg.data.heldout_contexts)) < len(cfg.data.heldout_contexts):
        raise NerAppError("config key 'data.heldout_contexts' must list sentence and/or document, each once")
    leaked = sorted(
        {str(Path(p).resolve()) for p in cfg.data.extra_train}
        & {str(Path(p).resolve()) for p in cfg.data.heldout}
    )
    if leaked:  # training on the text that measures the model would make every perplexity meaningless
        raise NerAppError(
            f"config key 'data.extra_train': {leaked[0]} is also a held-out file (data.heldout)"
        )
    if not 0.0 <= m.dropout < 1.0:
        raise NerAppError(f"config key 'model.dropout' must be in [0, 1), found {m.dropout}")


def bilm_options(cfg: BilmPretrainConfig) -> BilmOptions:
    m = cfg.model
    return BilmOptions(
        char_dim=m.char_dim, filters=tuple((w, c) for w, c in m.filters), n_highway=m.n_highway,
        activation=m.activation, lstm_dim=m.lstm_dim, projection_dim=m.projection_dim, n_layers=m.n_layers,
        cell_clip=m.cell_clip, proj_clip=m.proj_clip, use_skip_connections=m.use_skip_connections,
    )  # fmt: skip


def save_softmax(module: BilmLanguageModel, path: Path) -> None:
    """``softmax.hdf5``: group ``softmax`` with ``W`` (V, P) and ``b`` (V,), float32 (the reference's LM head)."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        group = f.create_group("softmax")
        group.create_dataset("W", data=module.softmax.W.detach().float().cpu().numpy())
        group.create_dataset("b", data=module.softmax.b.detach().float().cpu().numpy())


def run_pretraining(cfg: BilmPretrainConfig, resume: bool = False) -> dict[str, Any]:
    """Pretrain the biLM of ``cfg``; write the exports and metrics.json into ``output_dir``; return the metrics.

    Under DDP every process runs this function; each reads its own streams, and global rank 0 alone writes
    files and returns the metrics (the others return {}).
    """
    check_config(cfg)
    run_dir = Path(cfg.output_dir)
    last = run_dir / "checkpoints" / "last.ckpt"
    if resume and not last.is_file():
        raise MissingFileError(f"--resume: no checkpoint at {last} (start afresh without --resume)")
    with claimed_run_folder(run_dir, resume):
        return _run_pretraining(cfg, run_dir, resume)


def _run_pretraining(cfg: BilmPretrainConfig, run_dir: Path, resume: bool) -> dict[str, Any]:
    last = run_dir / "checkpoints" / "last.ckpt"
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    # Read every input before training, so that a bad held-out path fails now and not after hours.
    d = cfg.data
    corpus = read_corpus(d.train, d.max_train_tokens, d.train_documents, d.extra_train)
    heldout = {path: read_documents(path, d.heldout_max_sentences) for path in d.heldout}
    identity = run_identity(
        config_to_dict(cfg),
        data_fingerprint([Path(p) for p in [d.train, *d.extra_train]]),
        config_to_dict(BilmPretrainConfig()),
    )
    keep_below = None
    if resume:  # refuse a stale or foreign checkpoint before the model is built
        saved = load_checkpoint(last)
        check_identity(saved, identity, last)
        keep_below = int(saved.get("global_step", 0))
        del saved
    t = cfg.train
    accelerator, precision = choose_precision(t.accelerator, t.precision)
    position = StreamPosition()
    checkpoint = MovableCheckpoint(  # Lightning writes checkpoints atomically (temp file + rename)
        dirpath=last.parent,
        save_top_k=0,
        save_last=True,
        every_n_train_steps=t.val_every_n_steps,
        enable_version_counter=False,  # a fresh run in the same output_dir overwrites last.ckpt
    )
    stopping = []
    if t.patience is not None:  # early stopping on held-out perplexity; the best weights are exported
        best = MovableCheckpoint(dirpath=last.parent, filename="best", monitor="val_ppl", mode="min", save_top_k=1,
                               enable_version_counter=False)  # fmt: skip
        stopping = [best, EarlyStopping(monitor="val_ppl", mode="min", patience=t.patience)]
    silence_known_warnings()
    trainer = pl.Trainer(
        accelerator=accelerator, devices=t.devices, num_nodes=t.num_nodes, strategy=t.strategy,
        precision=precision, max_steps=t.max_steps, max_epochs=-1,
        max_time={"minutes": t.max_time_minutes} if t.max_time_minutes else None,
        gradient_clip_val=t.grad_clip, gradient_clip_algorithm="norm",
        val_check_interval=t.val_every_n_steps, check_val_every_n_epoch=None,
        limit_val_batches=1.0 if heldout else 0,
        callbacks=[position, checkpoint, *stopping, RunIdentity(identity), FiniteGuard(),
                   *lightning_progress(t.enable_progress_bar)],
        logger=ResumableCSVLogger(run_dir, "logs", keep_below), plugins=[SafeCheckpointIO()],
        log_every_n_steps=t.log_every_n_steps, enable_progress_bar=t.enable_progress_bar,
        num_sanity_val_steps=0, enable_model_summary=False, default_root_dir=run_dir,
        use_distributed_sampler=False,  # the loaders are not DataLoaders: each process reads its own share
    )  # fmt: skip
    rank, world, writer = trainer.global_rank, trainer.world_size, trainer.is_global_zero
    vocab_path = run_dir / "vocab.txt"
    if resume and vocab_path.is_file():  # the softmax rows of the checkpoint follow this file
        vocab = SoftmaxVocab.load(vocab_path)
    else:  # every process counts the same corpus: the same vocabulary, with no message
        vocab = SoftmaxVocab.from_counts(corpus.counts(), cfg.data.vocab_size)
        if writer:
            run_dir.mkdir(parents=True, exist_ok=True)
            vocab.save(vocab_path)
    if writer:
        save_config(cfg, run_dir / "config.yaml")
    train = StreamBatches(
        corpus, vocab, t.batch_size, t.unroll_steps, cfg.data.shuffle, cfg.seed, rank, world
    )
    position.batches = train
    say = log.info if writer else log.debug
    say("corpus %s: %d sentences, %d tokens (with <S>/</S>), %d types; softmax vocabulary %d; "
        "%d windows of %dx%d per epoch and process (%d processes)", cfg.data.train, corpus.num_sentences,
        len(corpus.tokens), len(corpus.types), len(vocab), len(train), t.batch_size, t.unroll_steps, world)  # fmt: skip
    val = None
    if heldout:
        first = next(iter(heldout.values()))
        head = first_sentences(first, t.val_max_sentences)
        batches = context_batches(head, vocab, d.heldout_contexts[0], t.eval_batch_size)
        val = BatchIterable(shard_batches(batches, rank, world)) if head else None
    options = bilm_options(cfg)
    module = BilmLanguageModel(
        options.to_dict(), len(vocab), t.n_negative_samples, cfg.model.dropout, t.optimizer, t.lr, cfg.seed,
        sentence_reset=t.sentence_reset, frozen_bilm_steps=t.frozen_bilm_steps,
    )  # fmt: skip
    if cfg.model.init_weights and not resume:  # a resumed run's checkpoint holds the weights it reached
        load_weights(module.bilm, cfg.model.init_weights)
        say("biLM initialised from %s (the softmax starts afresh)", cfg.model.init_weights)
    say("biLM %d parameters, softmax %d", options.num_parameters(), module.softmax.W.numel() + len(vocab))
    trainer.fit(
        module,
        train_dataloaders=train,
        val_dataloaders=val,
        ckpt_path=str(last) if resume else None,
        weights_only=True,
    )
    # The run's true end, so that --resume with a larger max_steps continues from here. Every process builds
    # the checkpoint (its streams' states are gathered); rank 0 writes it.
    tmp = last.with_name("last.ckpt.tmp")
    # The full state that --resume needs; said explicitly, so Lightning does not log its default.
    trainer.save_checkpoint(tmp, weights_only=False)
    if writer:
        os.replace(tmp, last)

    best_step = None
    if stopping and stopping[0].best_model_path:  # export what validated best, not where patience ran out
        best_ckpt = load_checkpoint(Path(stopping[0].best_model_path))
        module.load_state_dict(best_ckpt["state_dict"])
        best_step = int(best_ckpt.get("global_step", 0))
        del best_ckpt
    module.to("cuda" if accelerator == "gpu" else "cpu")
    # Every process evaluates its share of the held-out batches; the sums are gathered (module.evaluate).
    results = {
        path: {mode: module.evaluate(context_batches(docs, vocab, mode, t.eval_batch_size))
               for mode in d.heldout_contexts}
        for path, docs in heldout.items()
    }  # fmt: skip
    if not writer:
        return {}
    save_bilm(module.bilm, run_dir)
    save_softmax(module, run_dir / "softmax.hdf5")
    # Stream tokens per second: a step reads B x T tokens in each direction on every process, which step
    # together; an epoch reads all of them once.
    speed = module.train_tokens * world / module.train_seconds if module.train_seconds else None
    metrics: dict[str, Any] = {
        "steps": trainer.global_step,
        "epochs": round(train.position[0] + train.position[1] / len(train), 4),
        "processes": world,
        "train_tokens_per_s": speed,
        "train_tokens_timed": module.train_tokens * world,
        "vocab_size": len(vocab),
        "parameters": options.num_parameters(),
        "exported_step": best_step if best_step is not None else trainer.global_step,
        "heldout": {},
    }
    for path, by_mode in results.items():
        first = d.heldout_contexts[0]
        metrics["heldout"][Path(path).name] = {
            "path": str(path), "sentences": sum(len(doc) for doc in heldout[path]),
            "documents": len(heldout[path]), "context": first, **by_mode[first], "contexts": by_mode,
        }  # fmt: skip
        for mode, result in by_mode.items():
            log.info("held-out %s (%s context): perplexity forward %.2f backward %.2f mean %.2f", path, mode,
                     result["forward"], result["backward"], result["mean"])  # fmt: skip
    with atomic_path(run_dir / "metrics.json") as tmp_metrics:
        tmp_metrics.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics
