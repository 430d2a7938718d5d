"""``train.py``: build data, model and trainer from a ``TrainConfig``, fit, then report on dev and test."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.loggers import CSVLogger

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.document import fill_document_cache
from ner_app.bilm.layer_cache import LayerCache, bilm_fingerprint
from ner_app.bilm.weights import load_bilm
from ner_app.config import ConfigError, TrainConfig, save_config
from ner_app.data.datamodule import ConllDataModule
from ner_app.data.glove import embedding_matrix, load_glove
from ner_app.errors import MissingFileError
from ner_app.export import build_tagger as build_spec_tagger
from ner_app.export import export_model, make_spec
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.training.callbacks import AtomicModelCheckpoint, ThroughputMonitor
from ner_app.training.devices import choose_precision
from ner_app.training.module import TaggerModule
from ner_app.training.reports import entity_scores, text_report, write_metrics, write_predictions

log = logging.getLogger("ner_app")


def build_datamodule(cfg: TrainConfig) -> ConllDataModule:
    d = cfg.data
    dm = ConllDataModule(
        data_dir=d.dir, hub_name=d.hub_name, scheme=d.scheme, batch_size=d.batch_size,
        eval_batch_size=d.eval_batch_size, lowercase=d.lowercase, min_word_count=d.min_word_count,
        num_workers=d.num_workers, seed=cfg.seed, max_sentences=d.max_sentences,
    )  # fmt: skip
    dm.setup()
    return dm


def build_tagger(cfg: TrainConfig, dm: ConllDataModule) -> tuple[BiLstmCrfTagger, dict[str, Any]]:
    """The tagger for this config and data, and its spec; GloVe-initialised words, ELMo from the biLM files."""
    m, e = cfg.model, cfg.elmo
    bilm, elmo_spec = None, None
    if e.max_stream_positions < 2:
        raise ConfigError(
            f"elmo.max_stream_positions: expected at least 2 (<S> and </S>), found {e.max_stream_positions}"
        )
    if e.enabled:
        if not e.options or not e.weights:
            raise MissingFileError(
                "elmo.enabled needs elmo.options and elmo.weights (paths to options.json and hdf5)"
            )
        for key, path in (("elmo.options", e.options), ("elmo.weights", e.weights)):
            if not Path(path).is_file():
                raise MissingFileError(
                    f"{key}: {path} does not exist. Pretrain a biLM (python -m ner_app pretrain-bilm --config "
                    "configs/bilm_news.yaml) or set elmo.options and elmo.weights to an ELMo options.json and "
                    "weights hdf5; elmo.enabled=false trains without ELMo."
                )
        bilm = load_bilm(e.options, e.weights)
        elmo_spec = {"options": str(Path(e.options).resolve()), "weights": str(Path(e.weights).resolve()),
                     "fingerprint": bilm_fingerprint(bilm), "dropout": e.dropout, "do_layer_norm": e.do_layer_norm,
                     "context": e.context, "max_stream_positions": e.max_stream_positions}  # fmt: skip
    glove = load_glove(m.glove, m.word_dim) if m.glove else None
    if glove is not None and m.glove_oov:
        log.info("GloVe adds %d frozen words outside the train vocabulary", dm.extend_word_vocab(glove[0]))
    sizes = {"word_dim": m.word_dim, "char_dim": m.char_dim, "char_filters": m.char_filters, "char_width": m.char_width,
             "lstm_hidden": m.lstm_hidden, "lstm_layers": m.lstm_layers, "dropout": m.dropout}  # fmt: skip
    spec = make_spec(sizes, elmo_spec, dm.word_vocab, dm.num_trainable_words, dm.char_vocab, dm.tag_vocab, dm.scheme,
                     dm.source_scheme, dm.max_word_chars)  # fmt: skip
    tagger = build_spec_tagger(spec, bilm)
    if glove is not None:
        weight, coverage = embedding_matrix(dm.word_vocab, glove[0], glove[1], m.word_dim, cfg.seed)
        tagger.init_word_embeddings(weight)
        log.info("GloVe (%s) covers %.1f%% of training tokens", m.glove, 100 * coverage)
    return tagger, spec


def fill_layer_cache(directory: str, bilm: BidirectionalLM, dm: ConllDataModule) -> LayerCache:
    """Open (or build) the frozen-layer cache of this biLM and compute every sentence it does not hold yet
    (in document mode: every sentence in its document's context, keyed by the whole document)."""
    cache = LayerCache.for_bilm(directory, bilm)
    start = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if dm.elmo_context == "document":
        documents = [
            [split.tokens[i] for i in doc] for name, split in dm.splits.items() for doc in dm.documents(name)
        ]
        computed = fill_document_cache(
            cache, documents, bilm.to(device), dm.max_stream_positions, progress=True
        )
    else:
        sentences = [tokens for split in dm.splits.values() for tokens in split.tokens]
        computed = cache.fill(sentences, bilm.to(device), batch_size=64, device=device, progress=True)
    bilm.to("cpu")
    log.info("ELMo layer cache %s: %d sentences computed in %.1f s, %d cached, %.1f MB on disk",
             directory, computed, time.perf_counter() - start, len(cache), cache.nbytes / 2**20)  # fmt: skip
    return cache


@torch.inference_mode()
def predict_split(module: TaggerModule, dm: ConllDataModule, split: str) -> tuple[list[list[str]], float]:
    """Predicted tags of a split in the training scheme, in file order, and sentences/s."""
    module.eval()
    device = module.device
    predictions: dict[int, list[str]] = {}
    start = time.perf_counter()
    for batch in dm.dataloader(split):
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        tags = dm.decode_tags(module.tagger.decode(batch), batch["mask"])
        predictions.update(zip(batch["index"].tolist(), tags, strict=True))
    seconds = time.perf_counter() - start
    return [predictions[i] for i in range(len(predictions))], len(predictions) / max(seconds, 1e-9)


def report(module: TaggerModule, dm: ConllDataModule, run_dir: Path) -> dict[str, Any]:
    """Evaluate once on dev and once on test; write metrics.json, reports and prediction files."""
    metrics: dict[str, Any] = {}
    for split, name in (("valid", "dev"), ("test", "test")):
        data = dm.splits[split]
        predicted, speed = predict_split(module, dm, split)
        predicted_source = dm.to_source_scheme(predicted)
        metrics[name] = entity_scores(data.source_tags, predicted_source)
        metrics[name]["sentences_per_s"] = speed
        text = text_report(data.source_tags, predicted_source, data.tags, predicted, dm.scheme)
        (run_dir / f"report_{name}.txt").write_text(text, encoding="utf-8")
        write_predictions(
            run_dir / f"predictions_{name}.conll", data.tokens, data.source_tags, predicted_source
        )
        if name == "test":
            print(f"\nTest set ({len(data.tokens)} sentences):\n{text}")
    write_metrics(run_dir / "metrics.json", metrics)
    return metrics


def run_training(cfg: TrainConfig, resume: bool = False) -> dict[str, Any]:
    """Train, pick the best epoch on dev entity F1, then report on dev and test. Returns the metrics."""
    run_dir = Path(cfg.output_dir)
    checkpoints = run_dir / "checkpoints"
    last = checkpoints / "last.ckpt"
    if resume and not last.is_file():
        raise MissingFileError(f"--resume: no checkpoint at {last}")
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    dm = build_datamodule(cfg)
    tagger, spec = build_tagger(cfg, dm)
    if tagger.elmo is not None:
        dm.elmo_context, dm.max_stream_positions = cfg.elmo.context, cfg.elmo.max_stream_positions
    if tagger.elmo is not None and cfg.elmo.cache_dir:
        dm.layer_cache = fill_layer_cache(cfg.elmo.cache_dir, tagger.elmo.bilm, dm)

    def decode_source(ids: torch.Tensor, mask: torch.Tensor) -> list[list[str]]:
        return dm.to_source_scheme(dm.decode_tags(ids, mask))

    module = TaggerModule(
        tagger,
        decode_source,
        dm.splits["valid"].source_tags,
        lr=cfg.optim.lr,
        l2_coef=cfg.elmo.l2_coef,
        spec=spec,
    )
    accelerator, precision = choose_precision(cfg.trainer.accelerator, cfg.trainer.precision)
    t = cfg.trainer
    best = AtomicModelCheckpoint(
        dirpath=checkpoints, filename="best", monitor="val_f1", mode="max", save_last=True
    )
    trainer = pl.Trainer(
        accelerator=accelerator, devices=1, precision=precision, max_epochs=t.max_epochs,
        gradient_clip_val=cfg.optim.grad_clip, gradient_clip_algorithm="norm",
        callbacks=[best, EarlyStopping(monitor="val_f1", mode="max", patience=t.patience), ThroughputMonitor()],
        logger=CSVLogger(run_dir, name="logs", version=""), log_every_n_steps=t.log_every_n_steps,
        limit_train_batches=t.limit_train_batches,
        max_time={"minutes": t.max_time_minutes} if t.max_time_minutes else None, enable_progress_bar=t.enable_progress_bar,
        num_sanity_val_steps=0, enable_model_summary=False, default_root_dir=run_dir,
    )  # fmt: skip
    trainer.fit(module, datamodule=dm, ckpt_path=str(last) if resume else None)
    if best.best_model_path:
        module.load_weights(best.best_model_path)
    module.to("cuda" if accelerator == "gpu" else "cpu")
    metrics = report(module, dm, run_dir)
    export_model(module.tagger, spec, run_dir / "export")
    return metrics
