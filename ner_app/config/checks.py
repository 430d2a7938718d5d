"""Every value check of both config trees: values the type checks of ``load.py`` accept but no run can use.

Sizes and numbers outside their bounds are ``LimitError``s (``ner_app.limits``), other values ``ConfigError``s;
both name the key and are one line with exit code 2.
"""

from __future__ import annotations

import math
from pathlib import Path

from ner_app.config.schema import BilmPretrainConfig, ConfigError, TrainConfig, input_features
from ner_app.limits import MAX_CHAR_WIDTH, MAX_LAYERS, MAX_RNG_SEED, MAX_VOCAB, check_number, check_size


def check_train_config(cfg: TrainConfig) -> None:
    """Values of a ``TrainConfig`` that type checks accept but no run can use."""
    where = "config"
    m, t, d = cfg.model, cfg.trainer, cfg.data
    check_size(cfg.seed, "seed", where, low=0, high=MAX_RNG_SEED)  # numpy's seeds are 32-bit
    for key in ("word_dim", "char_dim", "char_filters", "lstm_hidden"):
        check_size(getattr(m, key), f"model.{key}", where)
    check_size(m.char_width, "model.char_width", where, high=MAX_CHAR_WIDTH)
    check_size(m.lstm_layers, "model.lstm_layers", where, high=MAX_LAYERS)
    check_number(m.dropout, "model.dropout", where, 0.0, 0.99)
    check_number(cfg.elmo.dropout, "elmo.dropout", where, 0.0, 0.99)
    check_number(cfg.elmo.l2_coef, "elmo.l2_coef", where, 0.0)
    check_number(cfg.optim.lr, "optim.lr", where, 0.0, open_low=True)
    check_number(cfg.optim.grad_clip, "optim.grad_clip", where, 0.0)
    check_number(cfg.optim.warmup_fraction, "optim.warmup_fraction", where, 0.0, 0.99)
    check_number(cfg.optim.plateau_factor, "optim.plateau_factor", where, 0.0, 0.99, open_low=True)
    check_size(cfg.optim.plateau_patience, "optim.plateau_patience", where, low=0, high=1 << 20)
    check_size(t.accumulate_grad_batches, "trainer.accumulate_grad_batches", where, high=1 << 20)
    check_size(d.batch_size, "data.batch_size", where, high=MAX_VOCAB)
    check_size(d.eval_batch_size, "data.eval_batch_size", where, high=MAX_VOCAB)
    check_size(d.min_word_count, "data.min_word_count", where, high=MAX_VOCAB)
    check_size(d.num_workers, "data.num_workers", where, low=0, high=MAX_LAYERS)
    check_number(d.case_augment, "data.case_augment", where, 0.0, 1.0)
    names = input_features(cfg)
    if not names or len(set(cfg.model.features)) != len(cfg.model.features):
        raise ConfigError(
            f"config key 'model.features': expected a non-empty list of distinct input features, found "
            f"{cfg.model.features} (with elmo.enabled={str(cfg.elmo.enabled).lower()})"
        )
    if d.case_augment and "elmo" in names and cfg.elmo.context == "document":
        raise ConfigError(  # a sentence's stream holds its neighbours as written: one view would mix cases
            "config key 'data.case_augment' works with elmo.context=sentence only (document streams are read "
            "as written); set elmo.context=sentence or data.case_augment=0"
        )
    if d.max_sentences is not None:
        check_size(d.max_sentences, "data.max_sentences", where, high=1 << 40)
    for key in ("max_tokens_per_batch", "eval_max_tokens_per_batch"):
        if getattr(d, key) is not None:
            check_size(getattr(d, key), f"data.{key}", where, high=1 << 40)
    check_size(t.max_epochs, "trainer.max_epochs", where, high=1 << 20)
    check_size(t.patience, "trainer.patience", where, low=0, high=1 << 20)
    check_size(t.log_every_n_steps, "trainer.log_every_n_steps", where, high=1 << 30)
    if t.threads is not None:
        check_size(t.threads, "trainer.threads", where, high=1024)
    if t.max_time_minutes is not None:
        check_number(t.max_time_minutes, "trainer.max_time_minutes", where, 0.0, open_low=True)
    if t.limit_train_batches is not None:
        check_number(t.limit_train_batches, "trainer.limit_train_batches", where, 0.0, open_low=True)
    if d.previous_dev is not None and m.init_from is None:
        raise ConfigError(
            "data.previous_dev: the old model's dev file is scored before and after continuing its export: "
            "it needs model.init_from (train --init-from EXPORT)"
        )
    check_number(cfg.distill.weight, "distill.weight", where, 0.0)
    if cfg.distill.max_sentences is not None:
        check_size(cfg.distill.max_sentences, "distill.max_sentences", where, high=1 << 40)
    if cfg.distill.sentences_per_epoch is not None:
        check_size(cfg.distill.sentences_per_epoch, "distill.sentences_per_epoch", where, high=1 << 40)
    if cfg.distill.marginals is not None:
        frozen = [name for name in names if name not in ("words", "chars")]
        if frozen:
            raise ConfigError(
                f"config key 'distill.marginals': a student reads words and chars only (the fast tagger), found "
                f"{', '.join(frozen)} in model.features; distil into a tagger without a frozen encoder"
            )
        if m.init_from is not None:
            raise ConfigError("distill.marginals: a student starts fresh; leave model.init_from out")
    if cfg.elmo.max_stream_positions < 2:
        raise ConfigError(
            f"elmo.max_stream_positions: expected at least 2 (<S> and </S>), found {cfg.elmo.max_stream_positions}"
        )


def check_pretrain_config(cfg: BilmPretrainConfig) -> None:
    """Reject values that would only fail deep inside training, naming the key."""
    t, m = cfg.train, cfg.model
    check_size(cfg.seed, "seed", "config", low=0, high=MAX_RNG_SEED)  # numpy's seeds are 32-bit
    positive = {
        "data.vocab_size": cfg.data.vocab_size - 3,
        "train.batch_size": t.batch_size,
        "train.unroll_steps": t.unroll_steps,
        "train.n_negative_samples": t.n_negative_samples,
        "train.max_steps": t.max_steps,
        "train.val_every_n_steps": t.val_every_n_steps,
        "train.eval_batch_size": t.eval_batch_size,
        "model.n_layers": m.n_layers,
        "train.devices": t.devices,
        "train.num_nodes": t.num_nodes,
    }
    for key, value in positive.items():
        if value < 1:
            raise ConfigError(f"config key '{key}' is too small (vocab_size needs >= 4, the others >= 1)")
    for key, number in {"train.lr": t.lr, "train.grad_clip": t.grad_clip}.items():
        if not (
            isinstance(number, int | float)
            and math.isfinite(number)
            and number >= 0
            and (number > 0 or key != "train.lr")
        ):
            raise ConfigError(f"config key '{key}' must be a finite number (> 0 for lr), found {number}")
    if any(word in t.strategy for word in ("spawn", "fork", "notebook")):
        raise ConfigError(  # those run only the fit in their processes; the export needs every process after it
            f"config key 'train.strategy': '{t.strategy}' is not supported by pretrain-bilm; use ddp (or auto)"
        )
    if t.frozen_bilm_steps < 0:
        raise ConfigError(
            f"config key 'train.frozen_bilm_steps' must be at least 0, found {t.frozen_bilm_steps}"
        )
    if t.frozen_bilm_steps and t.devices * t.num_nodes > 1:
        # DDP's reducer would wait for the frozen biLM's gradients
        raise ConfigError(
            "config key 'train.frozen_bilm_steps' needs one process (train.devices x train.num_nodes = 1), "
            f"found {t.devices * t.num_nodes}"
        )
    if t.patience is not None and t.patience < 1:
        raise ConfigError(f"config key 'train.patience' must be at least 1 (or null), found {t.patience}")
    if not cfg.data.heldout_contexts or len(set(cfg.data.heldout_contexts)) < len(cfg.data.heldout_contexts):
        raise ConfigError("config key 'data.heldout_contexts' must list sentence and/or document, each once")
    leaked = sorted(
        {str(Path(p).resolve()) for p in cfg.data.extra_train}
        & {str(Path(p).resolve()) for p in cfg.data.heldout}
    )
    if leaked:  # training on the text that measures the model would make every perplexity meaningless
        raise ConfigError(
            f"config key 'data.extra_train': {leaked[0]} is also a held-out file (data.heldout)"
        )
    if not m.filters or any(len(f) != 2 or min(f) < 1 for f in m.filters):
        raise ConfigError(
            f"config key 'model.filters' must be [width, channels] pairs of positive sizes, found {m.filters}"
        )
    if not 0.0 <= m.dropout < 1.0:
        raise ConfigError(f"config key 'model.dropout' must be in [0, 1), found {m.dropout}")
    for key, clip in (("model.cell_clip", m.cell_clip), ("model.proj_clip", m.proj_clip)):
        if clip is not None and not (math.isfinite(clip) and clip > 0):  # -1 would clamp every value to -1
            raise ConfigError(f"config key '{key}' must be a positive number or null, found {clip}")
