"""``train.py``: config -> corpus and spec -> data and model -> trainer -> reports and export, in that order
(the HTML report is drawn afterwards by the ``train`` command, from these files alone).

Nothing downstream changes what came before it: the spec is built once from the config and the training
data, and the DataModule, the model, the checkpoints and the export all read it. Every loop (fit, the final
dev and test evaluation with the best checkpoint) runs in the Lightning Trainer, on one device or under DDP
(docs/scaling_out.md); only global rank 0 writes files.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytorch_lightning as pl
import torch
from lightning_fabric.utilities.rank_zero import rank_zero_only
from pytorch_lightning.callbacks import Callback, EarlyStopping

from ner_app.config.checks import check_train_config
from ner_app.config.load import TrainConfig, config_to_dict, save_config
from ner_app.config.schema import ConfigError, input_features
from ner_app.files import write_text
from ner_app.records import canonical_sha256
from ner_app.runtime.finite import FiniteGuard
from ner_app.runtime.moved_checkpoint import MovableCheckpoint
from ner_app.runtime.run_dir import RunIdentity, data_fingerprint, opened_run, resumed_step, run_identity
from ner_app.runtime.trainer import build_trainer, require_logger
from ner_app.tagger.batch import MAX_WORD_CHARS
from ner_app.tagger.export import export_model
from ner_app.tagger.features import FeatureSpec, InputFeature, feature_class
from ner_app.tagger.features.words import WordEmbedding
from ner_app.tagger.glove import embedding_matrix, load_glove, require_package
from ner_app.tagger.model import BiLstmCrfTagger
from ner_app.tagger.spec import TaggerSizes, TaggerSpec
from ner_app.text.conll import write_predictions
from ner_app.text.soft_labels import read_manifest, read_soft_labels
from ner_app.text.tags import entity_types
from ner_app.text.vocab import build_word_vocab
from ner_app.train.calibration import calibrate_run
from ner_app.train.callbacks import LayerCacheFill, train_throughput
from ner_app.train.continued import OldDev, StartingPoint, continue_from, forgetting
from ner_app.train.corpus import EVALUATED, Corpus, data_files, data_reading, load_corpus
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.early_checks import check_elmo_files
from ner_app.train.metrics import MIX_PLACES, Mix, PreviousDev, RunCalibration, RunMetrics, SplitScores
from ner_app.train.module import LrSchedule, TaggerModule
from ner_app.train.reports import percent_table, text_report

log = logging.getLogger("ner_app")


def load_features(cfg: TrainConfig) -> tuple[list[FeatureSpec], dict[str, Any]]:
    """The run's input features (``model.features``, in order) as spec parts, and what each needs to be built
    (a frozen encoder loaded from its files), by name. An unknown name is a config error naming the known ones."""
    names = input_features(cfg)
    if "elmo" in names:
        check_elmo_files(cfg.elmo)
    specs, resources = [], {}
    for name in names:
        cls = feature_class(name, "config key 'model.features'", ConfigError)
        spec, resource = cls.from_config(cfg)
        specs.append(spec)
        if resource is not None:
            resources[name] = resource
    return specs, resources


def build_spec(
    cfg: TrainConfig,
    corpus: Corpus,
    features: Sequence[FeatureSpec],
    glove_words: list[str] | None,
    teacher_tags: Sequence[str] = (),
) -> TaggerSpec:
    """The tagger's spec from the config and the training split (GloVe's words join the vocabulary here); a
    distilled student's tags also hold its teachers' (``teacher_tags``: it learns their types from them)."""
    m, train = cfg.model, corpus.splits["train"]
    sizes = TaggerSizes(
        word_dim=m.word_dim,
        char_dim=m.char_dim,
        char_filters=m.char_filters,
        char_width=m.char_width,
        lstm_hidden=m.lstm_hidden,
        lstm_layers=m.lstm_layers,
        dropout=m.dropout,
    )
    spec = TaggerSpec.from_training_data(
        sizes,
        train.tokens,
        [*train.tags, list(teacher_tags)] if teacher_tags else train.tags,
        corpus.scheme,
        corpus.source_scheme,
        lowercase=cfg.data.lowercase,
        min_word_count=cfg.data.min_word_count,
        pretrained_words=glove_words if m.glove_oov and glove_words else (),
        max_word_chars=MAX_WORD_CHARS,
        features=features,
    )
    if len(spec.word_vocab) > spec.num_trainable_words:
        log.info(
            "GloVe adds %d frozen words outside the train vocabulary",
            len(spec.word_vocab) - spec.num_trainable_words,
        )
    return spec


def build_tagger(
    cfg: TrainConfig,
    spec: TaggerSpec,
    resources: Mapping[str, Any],
    corpus: Corpus,
    glove: tuple[list[str], np.ndarray] | None,
) -> BiLstmCrfTagger:
    """The spec's tagger; GloVe-initialised words, each frozen feature from its loaded encoder."""
    tagger = BiLstmCrfTagger.from_spec(spec, resources)
    if glove is not None and "words" in tagger.features:
        vocab = spec.words.build()  # a fresh copy: the training counts weight the coverage below
        vocab.counts = build_word_vocab(corpus.splits["train"].tokens, cfg.data.lowercase).counts
        weight, coverage = embedding_matrix(vocab, glove[0], glove[1], cfg.model.word_dim, cfg.seed)
        cast(WordEmbedding, tagger.feature("words")).init_word_embeddings(weight)
        log.info("GloVe (%s) covers %.1f%% of training tokens", cfg.model.glove, 100 * coverage)
    return tagger


def write_reports(
    module: TaggerModule,
    corpus: Corpus,
    run_dir: Path,
    previous_dev: PreviousDev | None = None,
    calibration: RunCalibration | None = None,
) -> dict[str, Any]:
    """metrics.json (with the calibration's ECE before and after, and the old types' scores of a continued
    run), the dev and test reports and prediction files, from the module's evaluations."""
    spec, scores = module.spec, {}
    for split in EVALUATED:
        data, evaluation = corpus.splits[split], module.evaluations[split]
        predicted = evaluation.predicted
        predicted_source = spec.to_source_scheme(predicted)
        scores[split] = SplitScores.of(evaluation.scores, len(predicted) / max(evaluation.seconds, 1e-9))
        text = text_report(data.source_tags, predicted_source, data.tags, predicted, spec.scheme)
        write_text(run_dir / f"report_{split}.txt", text)
        write_predictions(
            run_dir / f"predictions_{split}.conll", data.tokens, data.source_tags, predicted_source
        )
        # the console shows one table per split, in percent as metrics.json; the file keeps seqeval's reports
        print(
            f"\n{split.capitalize()} set ({len(data.tokens)} sentences), {percent_table(evaluation.scores)}"
        )
    # the chosen checkpoint's mixes (a record then holds them without the weights), and the frozen encoder by
    # its weights (compare groups by this, whatever the files' paths)
    mixes = {
        name: tuple(Mix.of(m, MIX_PLACES[k]) for k, m in enumerate(cast(InputFeature, f).learned_mixes()))
        for name, f in module.tagger.features.items()
    }
    fingerprints = {f.name: f.frozen_fingerprint for f in spec.features}
    metrics = RunMetrics(
        scores["dev"],
        scores["test"],
        elmo_mix=mixes.get("elmo") or None,
        bilm_fingerprint=fingerprints.get("elmo"),
        transformer_mix=mixes.get("transformer") or None,
        transformer_fingerprint=fingerprints.get("transformer"),
        previous_dev=previous_dev,
        calibration=calibration,
    )
    metrics.write(run_dir / "metrics.json")
    return metrics.to_json()


def run_training(cfg: TrainConfig, resume: bool = False) -> dict[str, Any]:
    """Train, pick the best epoch on dev entity F1, then report on dev and test. Returns the metrics."""
    check_train_config(cfg)  # before the run folder is checked: a config error comes first
    for name in input_features(cfg):
        feature_class(name, "config key 'model.features'", ConfigError)
    require_logger(cfg.trainer.logger, "trainer.logger")
    run_dir = Path(cfg.output_dir)
    with opened_run(run_dir, resume) as last:
        return _run_training(cfg, run_dir, last, resume)


def run_identity_of(cfg: TrainConfig) -> dict[str, Any]:
    d = cfg.data
    files = (
        data_files(d.dir, d.format) if d.dir and not d.hub_name else []
    )  # CoNLL, parquet or save_to_disk files
    data = data_fingerprint(files) if files else f"hub:{d.hub_name}"
    if cfg.distill.marginals is not None:  # the teachers' marginals are training data too: what made them
        data = f"{data}+{canonical_sha256(repr(read_manifest(Path(cfg.distill.marginals)).identity()))}"
    # A linear schedule decays to 0 at the last step of max_epochs: another max_epochs would be another run.
    pinned = ["trainer.max_epochs"] if cfg.optim.schedule == "linear" else []
    return run_identity(config_to_dict(cfg), data, config_to_dict(type(cfg)()), pinned)


def _run_training(cfg: TrainConfig, run_dir: Path, last: Path, resume: bool) -> dict[str, Any]:
    identity = run_identity_of(cfg)
    # before anything is built
    keep_below = resumed_step(last, identity, cfg.trainer.max_epochs) if resume else None
    if getattr(rank_zero_only, "rank", 0) == 0:  # under DDP every rank runs this function; one writes
        save_config(cfg, run_dir / "config.yaml")
    if cfg.trainer.threads:
        torch.set_num_threads(cfg.trainer.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)

    d, m = cfg.data, cfg.model
    if m.glove == "package":
        require_package()  # before a corpus download: the missing package is the first thing to fix
    start = StartingPoint.load(m.init_from) if m.init_from else None
    known = start.types if start is not None else ()  # dev and test may hold a type only the export knows
    teachers = read_manifest(Path(cfg.distill.marginals)) if cfg.distill.marginals is not None else None
    if teachers is not None:  # ... or only the teachers know (a student learns it from their marginals)
        known = (*known, *entity_types(teachers.tags))
    corpus = load_corpus(
        d.dir, d.hub_name, d.scheme, d.max_sentences, d.format, options=data_reading(d), known_types=known
    )
    features, resources = load_features(cfg)
    glove = load_glove(m.glove, m.word_dim) if m.glove else None
    spec = build_spec(
        cfg, corpus, features, glove[0] if glove is not None else None, teachers.tags if teachers else ()
    )
    tagger = None
    if start is not None:  # the export's words and types, and weights, with the data's new ones added
        tagger, spec = continue_from(start, spec, lambda s: build_tagger(cfg, s, resources, corpus, glove))
    old_dev = OldDev.read(d.previous_dev, d.tag_column) if d.previous_dev else None
    before, old_types = None, start.types if start is not None else ()
    if old_dev is not None and start is not None and getattr(rank_zero_only, "rank", 0) == 0:
        before = old_dev.score(start.tagger, start.spec, d.eval_batch_size)  # the export, before any step
    del start  # the export's tagger: no longer needed
    soft = None
    if cfg.distill.marginals is not None:  # distillation: the teachers' marginals, in the spec's tag order
        where = f"distill.marginals {cfg.distill.marginals}"
        soft = read_soft_labels(cfg.distill.marginals, cfg.distill.max_sentences)
        if soft.scheme != spec.scheme:
            raise ConfigError(f"{where}: marginals of scheme {soft.scheme}, but data.scheme is {spec.scheme}")
        soft = soft.in_order(spec.tag_vocab.itos, where)
        log.info("distillation: %d soft-labelled sentences beside the gold ones", len(soft.sentences))
        if cfg.distill.sentences_per_epoch is not None:
            log.info("distillation: about %d of them an epoch", cfg.distill.sentences_per_epoch)
    dm = ConllDataModule(
        corpus,
        spec,
        batch_size=d.batch_size,
        eval_batch_size=d.eval_batch_size,
        num_workers=d.num_workers,
        seed=cfg.seed,
        max_tokens=d.max_tokens_per_batch,
        eval_max_tokens=d.eval_max_tokens_per_batch,
        case_augment=d.case_augment,
        soft=soft,
        soft_per_epoch=cfg.distill.sentences_per_epoch,
    )
    if tagger is None:
        tagger = build_tagger(cfg, spec, resources, corpus, glove)
    gold = {split: corpus.splits[split].source_tags for split in EVALUATED}
    o = cfg.optim
    schedule = LrSchedule(o.schedule, o.warmup_fraction, o.plateau_factor, o.plateau_patience)
    module = TaggerModule(
        tagger,
        spec,
        gold,
        lr=o.lr,
        l2_coef=cfg.elmo.l2_coef,
        schedule=schedule,
        distill_weight=cfg.distill.weight,
    )

    # Two callbacks (the best file is then named, not asked for as "best"): Lightning 2.6 writes a
    # ``save_last`` copy only in an epoch whose score improved, so a killed run would redo up to ``patience``
    # epochs. The second writes last.ckpt after every epoch's validation, with the best callback's state.
    best = MovableCheckpoint(dirpath=last.parent, filename="best", monitor="val_f1", mode="max")
    every_epoch = MovableCheckpoint(dirpath=last.parent, filename=last.stem, enable_version_counter=False)
    callbacks: list[Callback] = [
        best,
        every_epoch,
        EarlyStopping(monitor="val_f1", mode="max", patience=cfg.trainer.patience),
        train_throughput(),
        RunIdentity(identity),
        FiniteGuard(),
    ]
    if any(f.frozen_fingerprint is not None for f in spec.features) and cfg.elmo.cache_dir:
        callbacks.append(LayerCacheFill(cfg.elmo.cache_dir))
    t = cfg.trainer
    trainer = build_trainer(
        t,
        callbacks,
        run_dir,
        keep_below,
        grad_clip=o.grad_clip,
        max_epochs=t.max_epochs,
        limit_train_batches=t.limit_train_batches,
        accumulate_grad_batches=t.accumulate_grad_batches,
    )
    trainer.fit(module, datamodule=dm, ckpt_path=str(last) if resume else None, weights_only=True)
    chosen = best.best_model_path or None  # None: no complete dev pass; keep the last weights
    # The best weights are loaded once, by the dev pass; the test pass evaluates the same weights in the module.
    trainer.validate(module, datamodule=dm, ckpt_path=chosen, verbose=False, weights_only=True)
    trainer.test(module, datamodule=dm, verbose=False)
    metrics: dict[str, Any] = {}
    if trainer.is_global_zero:
        previous = None
        if old_dev is not None and before is not None:
            after = old_dev.score(module.tagger, spec, d.eval_batch_size)  # the chosen checkpoint
            previous = forgetting(old_dev, old_types, before, after)
        # the temperature of the chosen weights, fitted on dev (under DDP on rank 0's share of it)
        calibrated = calibrate_run(module.tagger, dm, corpus, run_dir)
        record, summary = calibrated if calibrated is not None else (None, None)
        metrics = write_reports(module, corpus, run_dir, previous, summary)
        export_model(module.tagger, dataclasses.replace(spec, calibration=record), run_dir / "export")
    return metrics
