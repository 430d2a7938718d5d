"""``run_pretraining``: vocabulary, streams, ``BilmLanguageModel`` and a Lightning trainer from a config; then
the export (options.json, weights.hdf5, softmax.hdf5, vocab.txt) and held-out perplexities (metrics.json).

Every loop runs in Lightning: ``fit`` with periodic validation, then one ``validate`` per held-out file and
context (``perplexity.evaluate``). Under DDP every process runs this; each reads its own streams and its share
of the held-out batches, and global rank 0 alone writes files.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback, EarlyStopping

from ner_app.bilm.options import BilmOptions
from ner_app.bilm.weights import load_weights, save_bilm
from ner_app.config.checks import check_pretrain_config
from ner_app.config.load import BilmPretrainConfig, config_to_dict, save_config
from ner_app.files import atomic_path
from ner_app.pretrain.batches import TrainingBatch
from ner_app.pretrain.data import TrainingText, read_corpus
from ner_app.pretrain.documents import Document, first_sentences, read_documents
from ner_app.pretrain.heldout import BatchIterable, context_batches, shard_batches
from ner_app.pretrain.metrics import HeldoutScores, Perplexity, PretrainMetrics
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.perplexity import evaluate
from ner_app.pretrain.softmax_file import SOFTMAX_FILE, save_softmax
from ner_app.pretrain.streams import StreamBatches
from ner_app.pretrain.vocab import SoftmaxVocab
from ner_app.runtime.checkpoint import load_checkpoint
from ner_app.runtime.finite import FiniteGuard
from ner_app.runtime.moved_checkpoint import MovableCheckpoint
from ner_app.runtime.run_dir import RunIdentity, data_fingerprint, opened_run, resumed_step, run_identity
from ner_app.runtime.throughput import TrainingThroughput
from ner_app.runtime.trainer import build_trainer, fit_log_interval

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


def bilm_options(cfg: BilmPretrainConfig) -> BilmOptions:
    return BilmOptions.of(cfg.model)


def run_pretraining(cfg: BilmPretrainConfig, resume: bool = False) -> dict[str, Any]:
    """Pretrain the biLM of ``cfg``; write the exports and metrics.json into ``output_dir``; return the metrics
    (global rank 0; the other processes return {})."""
    check_pretrain_config(cfg)
    run_dir = Path(cfg.output_dir)
    with opened_run(run_dir, resume) as last:
        return _pretrain(cfg, run_dir, last, resume)


def _pretrain(cfg: BilmPretrainConfig, run_dir: Path, last: Path, resume: bool) -> dict[str, Any]:
    d, t = cfg.data, cfg.train
    if t.threads:
        torch.set_num_threads(t.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    # Read every input before training, so that a bad held-out path fails now and not after hours.
    corpus = read_corpus(d.train, d.max_train_tokens, d.train_documents, d.extra_train)
    heldout = {path: read_documents(path, d.heldout_max_sentences) for path in d.heldout}
    identity = run_identity(
        config_to_dict(cfg),
        data_fingerprint([Path(p) for p in [d.train, *d.extra_train]]),
        config_to_dict(BilmPretrainConfig()),
    )
    keep_below = resumed_step(last, identity) if resume else None
    position, throughput = StreamPosition(), TrainingThroughput(_rows, _tokens)
    every = MovableCheckpoint(
        dirpath=last.parent,
        save_top_k=0,
        save_last=True,
        every_n_train_steps=t.val_every_n_steps,
        enable_version_counter=False,
    )  # a fresh run overwrites last.ckpt
    best = MovableCheckpoint(
        dirpath=last.parent,
        filename="best",
        monitor="val_ppl",
        mode="min",
        save_top_k=1,
        enable_version_counter=False,
    )
    stopping = [best, EarlyStopping(monitor="val_ppl", mode="min", patience=t.patience)] if t.patience else []
    callbacks = [position, every, *stopping, RunIdentity(identity), FiniteGuard(), throughput]
    trainer = build_trainer(
        t,
        callbacks,
        run_dir,
        keep_below,
        grad_clip=t.grad_clip,
        max_steps=t.max_steps,
        max_epochs=-1,
        val_check_interval=t.val_every_n_steps,
        check_val_every_n_epoch=None,
        limit_val_batches=1.0 if heldout else 0,
    )
    vocab = _vocabulary(cfg, run_dir, corpus, resume, trainer.is_global_zero)
    train = StreamBatches(
        corpus,
        vocab,
        t.batch_size,
        t.unroll_steps,
        d.shuffle,
        cfg.seed,
        trainer.global_rank,
        trainer.world_size,
    )
    position.batches = train
    fit_log_interval(trainer, len(train))  # a corpus shorter than the interval logs every epoch, unwarned
    module = _language_model(cfg, vocab, corpus, train, resume, trainer)
    trainer.fit(
        module,
        train_dataloaders=train,
        val_dataloaders=_validation(cfg, heldout, vocab, trainer),
        ckpt_path=str(last) if resume else None,
        weights_only=True,
    )
    _save_last(trainer, last)
    best_step = _load_best(module, best) if stopping else None
    results: dict[str, dict[str, Perplexity]] = {
        path: {
            mode: evaluate(module, context_batches(docs, vocab, mode, t.eval_batch_size), trainer)
            for mode in d.heldout_contexts
        }
        for path, docs in heldout.items()
    }
    if not trainer.is_global_zero:
        return {}
    save_bilm(module.bilm, run_dir)
    save_softmax(module.softmax, run_dir / SOFTMAX_FILE)
    return _write_metrics(cfg, run_dir, trainer, train, len(vocab), throughput, best_step, heldout, results)


def _rows(batch: TrainingBatch) -> int:
    return len(batch["forward"]["mask"])


def _tokens(batch: TrainingBatch) -> int:
    return int(
        batch["forward"]["mask"].sum()
    )  # stream tokens of one direction (each direction reads them all)


def _vocabulary(
    cfg: BilmPretrainConfig, run_dir: Path, corpus: TrainingText, resume: bool, writer: bool
) -> SoftmaxVocab:
    """The softmax vocabulary: a resumed run's own (its checkpoint's softmax rows follow it), else counted
    afresh (every process counts the same corpus); rank 0 writes it and the config."""
    path = run_dir / "vocab.txt"
    if resume and path.is_file():
        vocab = SoftmaxVocab.load(path)
    else:
        vocab = SoftmaxVocab.from_counts(corpus.counts(), cfg.data.vocab_size)
        if writer:
            run_dir.mkdir(parents=True, exist_ok=True)
            vocab.save(path)
    if writer:
        save_config(cfg, run_dir / "config.yaml")
    return vocab


def _language_model(
    cfg: BilmPretrainConfig,
    vocab: SoftmaxVocab,
    corpus: TrainingText,
    train: StreamBatches,
    resume: bool,
    trainer: pl.Trainer,
) -> BilmLanguageModel:
    t, say = cfg.train, log.info if trainer.is_global_zero else log.debug
    say(
        "corpus %s: %d sentences, %d tokens (with <S>/</S>), %d types; softmax vocabulary %d; "
        "%d windows of %dx%d per epoch and process (%d processes)",
        cfg.data.train,
        corpus.num_sentences,
        len(corpus.tokens),
        len(corpus.types),
        len(vocab),
        len(train),
        t.batch_size,
        t.unroll_steps,
        trainer.world_size,
    )
    options = bilm_options(cfg)
    module = BilmLanguageModel(
        options.to_dict(),
        len(vocab),
        t.n_negative_samples,
        cfg.model.dropout,
        t.optimizer,
        t.lr,
        cfg.seed,
        sentence_reset=t.sentence_reset,
        frozen_bilm_steps=t.frozen_bilm_steps,
    )
    if cfg.model.init_weights and not resume:  # a resumed run's checkpoint holds the weights it reached
        load_weights(module.bilm, cfg.model.init_weights)
        say("biLM initialised from %s (the softmax starts afresh)", cfg.model.init_weights)
    say("biLM %d parameters, softmax %d", options.num_parameters(), module.softmax.W.numel() + len(vocab))
    return module


def _validation(
    cfg: BilmPretrainConfig, heldout: dict[str, list[Document]], vocab: SoftmaxVocab, trainer: pl.Trainer
) -> BatchIterable | None:
    """Periodic validation: the first sentences of the first held-out file, in its first context."""
    if not heldout:
        return None
    head = first_sentences(next(iter(heldout.values())), cfg.train.val_max_sentences)
    batches = context_batches(head, vocab, cfg.data.heldout_contexts[0], cfg.train.eval_batch_size)
    return BatchIterable(shard_batches(batches, trainer.global_rank, trainer.world_size)) if head else None


def _save_last(trainer: pl.Trainer, last: Path) -> None:
    """The run's true end, so that --resume with a larger max_steps continues from here. Every process builds
    the checkpoint (its streams' states are gathered); rank 0 writes it, by one atomic rename."""
    # The full state that --resume needs; said explicitly, so Lightning does not log its default.
    if trainer.is_global_zero:
        with atomic_path(last) as tmp:
            trainer.save_checkpoint(tmp, weights_only=False)
    else:  # its share of the state: Lightning writes on rank 0 only
        trainer.save_checkpoint(last, weights_only=False)


def _load_best(module: BilmLanguageModel, best: MovableCheckpoint) -> int | None:
    """Early stopping exports what validated best, not where patience ran out: its weights and step."""
    if not best.best_model_path:
        return None
    checkpoint = load_checkpoint(Path(best.best_model_path))
    module.load_state_dict(checkpoint["state_dict"])
    return int(checkpoint.get("global_step", 0))


def _write_metrics(
    cfg: BilmPretrainConfig,
    run_dir: Path,
    trainer: pl.Trainer,
    train: StreamBatches,
    vocab_size: int,
    throughput: TrainingThroughput,
    best_step: int | None,
    heldout: dict[str, list[Document]],
    results: dict[str, dict[str, Perplexity]],
) -> dict[str, Any]:
    """metrics.json (``PretrainMetrics``), returned as the dict it holds."""
    rate = throughput.rate()
    first = cfg.data.heldout_contexts[0]
    scores = {}
    for path, by_mode in results.items():
        documents = heldout[path]
        scores[Path(path).name] = HeldoutScores(
            path=str(path),
            sentences=sum(len(doc) for doc in documents),
            documents=len(documents),
            context=first,
            contexts=by_mode,
        )
        for mode, result in by_mode.items():
            log.info(
                "held-out %s (%s context): perplexity forward %.2f backward %.2f mean %.2f",
                path,
                mode,
                result["forward"],
                result["backward"],
                result["mean"],
            )
    metrics = PretrainMetrics(
        steps=trainer.global_step,
        epochs=round(train.position[0] + train.position[1] / len(train), 4),
        processes=trainer.world_size,
        train_tokens_per_s=rate[0] if rate else None,
        train_tokens_timed=rate[1] if rate else 0,
        vocab_size=vocab_size,
        parameters=bilm_options(cfg).num_parameters(),
        exported_step=best_step if best_step is not None else trainer.global_step,
        heldout=scores,
    )
    metrics.save(run_dir)
    return metrics.to_dict()
