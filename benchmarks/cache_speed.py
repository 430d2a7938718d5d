"""Time the paper-size ELMo tagger on CoNLL-2003 train with and without the frozen-layer cache, side by side.

    python -m benchmarks.cache_speed [--bilm original|small|tiny|DIR] [--threads 2] [--no-cache-batches 20]
                                     [--predict-sentences 500] [--work-dir DIR] [--trim-repeats 3]

``original``/``small``/``tiny``: that architecture with seeded random weights, written with ``save_bilm`` and
read back; a DIR holds ``options.json`` + ``weights.hdf5`` (the shipped biLM: ``data/bilm``). The tagger is
``configs/conll2003_elmo.yaml`` without GloVe, built by ``load_corpus``, ``build_spec`` and ``build_tagger``,
and runs as the real ``TaggerModule`` in a Lightning ``Trainer`` (the config's gradient-norm clip; bf16-mixed
on a GPU, 32-true on the CPU; no logger or checkpoints). Training, with the cache and without: a one-batch fit
warms up, then a fit over the first ``--no-cache-batches`` batches of the shuffled epoch is timed (each
batch from the end of the one before: building the batch and reading the cache included); then a full epoch
with the cache, the epoch without it extrapolated. Decoding: ``trainer.validate`` over dev with and without
the cache. Temp files (biLM, cache, export) are deleted unless ``--work-dir`` is given. ``--trim-repeats R``
adds a third table: the cache fill (of ``--trim-sentences`` train sentences, into fresh caches) and
``predict_texts`` with the char CNN over all 50 ids (the code before the tail trim) and with the trim,
alternated R times.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback
from torch.utils.benchmark import timer

from benchmarks.common import ROOT, SIZES, check_size, machine, print_table, random_bilm
from ner_app.bilm import BidirectionalLM, save_bilm
from ner_app.bilm.bilm import set_code_paths
from ner_app.config.load import TrainConfig, load_config
from ner_app.config.schema import RuntimeConfig
from ner_app.predict.predictor import Predictor
from ner_app.runtime.log_progress import silence_known_warnings
from ner_app.runtime.trainer import build_trainer
from ner_app.tagger.batch import Batch
from ner_app.tagger.export import export_model
from ner_app.train.corpus import load_corpus
from ner_app.train.datamodule import ConllDataModule
from ner_app.train.layer_cache import LayerCache
from ner_app.train.module import TaggerModule
from ner_app.train.run import build_spec, build_tagger, load_features

# UNTESTED: the CUDA path (biLM, cache fill and tagger on the GPU, bf16-mixed) was written without a GPU to
# run it on; only the CPU path has been run.
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


class Clock(Callback):
    """Seconds, sentences and tokens of the training or validation batches of one run of a Trainer; a batch's
    time runs from the end of the batch before (or the start of the epoch) to its own end."""

    def __init__(self) -> None:
        self.seconds, self.sentences, self.tokens, self._last = 0.0, 0, 0, 0.0

    def _tick(self, batch: Batch) -> None:
        now = timer()
        self.seconds, self._last = self.seconds + now - self._last, now
        self.sentences += len(batch["tokens"])
        self.tokens += sum(map(len, batch["tokens"]))

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last = timer()

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last = timer()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Batch, batch_idx: int
    ) -> None:
        self._tick(batch)

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Batch,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._tick(batch)


def timed(
    cfg: TrainConfig, train_batches: int | float = 1.0, val_batches: float = 0.0
) -> tuple[pl.Trainer, Clock]:
    """A Trainer of one epoch (at most ``train_batches``, a count or a fraction, and a ``val_batches`` fraction
    of dev), with the config's gradient clip and without logger or checkpoints; its ``Clock``."""
    clock = Clock()
    runtime = RuntimeConfig(
        accelerator="gpu" if CUDA else "cpu",
        precision="bf16-mixed" if CUDA else "32-true",
        enable_progress_bar=False,
    )
    trainer = build_trainer(
        runtime,
        [clock],
        grad_clip=cfg.optim.grad_clip,
        max_epochs=1,
        limit_train_batches=train_batches,
        limit_val_batches=val_batches,
        enable_checkpointing=False,
    )
    return trainer, clock


def fit(module: TaggerModule, dm: ConllDataModule, cfg: TrainConfig, batches: int | None) -> Clock:
    """``trainer.fit`` over the first ``batches`` batches of the shuffled epoch (None: all of them), timed."""
    trainer, clock = timed(cfg, 1.0 if batches is None else batches)
    trainer.fit(module, datamodule=dm)
    return clock


def decode(module: TaggerModule, dm: ConllDataModule, cfg: TrainConfig) -> float:
    """Sentences/s of ``trainer.validate`` over dev: Viterbi decoding (the scoring afterwards is not timed)."""
    trainer, clock = timed(cfg, val_batches=1.0)
    trainer.validate(module, datamodule=dm, verbose=False)
    return clock.sentences / clock.seconds


def fill(cache: LayerCache, sentences: list[list[str]], bilm: BidirectionalLM) -> tuple[float, int, int]:
    """(seconds, distinct sentences computed, their tokens) of filling the cache with ``sentences``."""
    distinct = {tuple(s): None for s in sentences if s not in cache}
    start = timer()
    computed = cache.fill(sentences, bilm, batch_size=64, device=DEVICE)
    return timer() - start, computed, sum(len(s) for s in distinct)


def print_trim_table(
    bilm: BidirectionalLM,
    sample: list[list[str]],
    predictor: Predictor,
    lines: list[str],
    test_tokens: int,
    work: Path,
    repeats: int,
) -> None:
    """Fill and predict with the char CNN over 50 ids and trimmed, the two code paths alternated."""
    bilm.to(DEVICE)  # a Trainer leaves its module on the CPU
    seconds: dict[tuple[str, bool], list[float]] = {}
    predictions: dict[bool, list[dict[str, Any]]] = {}
    for r in range(repeats):
        for trim in (False, True):
            for model in (bilm, predictor.tagger):  # the cache's biLM and the predictor's alike
                set_code_paths(model, trim_tail=trim)
            try:
                cache = LayerCache.for_bilm(work / f"trim_{r}_{trim}", bilm)
                start = timer()
                cache.fill(sample, bilm, batch_size=64, device=DEVICE)
                seconds.setdefault(("fill", trim), []).append(timer() - start)
                start = timer()
                predictions[trim] = list(predictor.predict_texts(lines))
                seconds.setdefault(("predict", trim), []).append(timer() - start)
            finally:
                for model in (bilm, predictor.tagger):
                    set_code_paths(model, trim_tail=True)
            shutil.rmtree(work / f"trim_{r}_{trim}")
    # The trim is exact: the same entities and scores, bit for bit.
    if predictions[False] != predictions[True]:
        raise RuntimeError("predictions differ between the char CNN over 50 ids and the trimmed one")
    tokens = {"fill": sum(map(len, sample)), "predict": test_tokens}
    print(
        f"\nchar CNN over all 50 ids against the tail trim, median of {repeats}, alternated "
        f"(fill: {len(sample):,} train sentences into a fresh cache; predict: the lines above)\n"
    )
    rows = []
    for what in ("fill", "predict"):
        untrimmed, trimmed = (statistics.median(seconds[(what, trim)]) for trim in (False, True))
        rows.append(
            (
                what,
                f"{tokens[what] / untrimmed:,.0f}",
                f"{tokens[what] / trimmed:,.0f}",
                f"{untrimmed / trimmed:.2f}x",
            )
        )
    print_table(["path", "50 ids, tokens/s", "trimmed, tokens/s", "speed-up"], rows)


def quiet_lightning() -> None:
    """The tables, not Lightning's start-up notes; its warnings about this project's sampler are known."""
    for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for message in ("You are using a custom batch sampler", ".*does not have many workers"):
        warnings.filterwarnings("ignore", message=message)
    silence_known_warnings()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--bilm", default="original", help="original, small, tiny or a biLM folder (default original)")
    add("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    add("--no-cache-batches", type=int, default=20, help="batches trained without the cache (default 20)")
    add("--predict-sentences", type=int, default=500, help="test sentences to predict (default 500)")
    add("--work-dir", help="keep the biLM, cache and export here (default: a temp dir, deleted)")
    add("--max-sentences", type=int, help="first N sentences of each split only (smoke runs)")
    add("--trim-repeats", type=int, default=0, help="also time fill and predict with and without the trim")
    add("--trim-sentences", type=int, default=2000, help="train sentences of the trim table (default 2000)")
    args = parser.parse_args()
    if args.bilm not in SIZES and not (Path(args.bilm) / "options.json").is_file():
        parser.error(f"--bilm {args.bilm}: not one of {', '.join(SIZES)} nor a folder with options.json")
    torch.set_num_threads(args.threads)
    cfg = load_config(ROOT / "configs/conll2003_elmo.yaml")
    if not (Path(cfg.data.dir or "") / "train.txt").is_file():
        print(f"skipped: no CoNLL-2003 at {cfg.data.dir} (set NER_SHARED to the folder with data/conll2003)")
        return
    quiet_lightning()
    keep = args.work_dir is not None
    work = Path(args.work_dir) if keep else Path(tempfile.mkdtemp(prefix="cache_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> None:
    """Build everything under ``work``, measure, print the header and the tables."""
    cache_dir = work / "elmo_cache"
    shutil.rmtree(cache_dir, ignore_errors=True)  # a previous run's cache would make the fill free
    one_time: list[tuple[str, str]] = []
    options, weights = Path(args.bilm) / "options.json", Path(args.bilm) / "weights.hdf5"
    if args.bilm in SIZES:  # that architecture with random weights, written to hdf5
        start = timer()
        options, weights = save_bilm(random_bilm(args.bilm), work / f"bilm-{args.bilm}")
        one_time.append((f"write random '{args.bilm}' biLM to hdf5, s", f"{timer() - start:.1f}"))
    overrides = [
        f"elmo.options={options}",
        f"elmo.weights={weights}",
        "model.glove=null",
        f"elmo.cache_dir={cache_dir}",
    ]
    if args.max_sentences:
        overrides.append(f"data.max_sentences={args.max_sentences}")
    cfg = load_config(ROOT / "configs/conll2003_elmo.yaml", overrides)
    d = cfg.data
    corpus = load_corpus(d.dir, d.hub_name, d.scheme, d.max_sentences)
    torch.manual_seed(cfg.seed)
    start = timer()
    features, resources = load_features(cfg)
    spec = build_spec(cfg, corpus, features, None)
    dm = ConllDataModule(
        corpus, spec, batch_size=d.batch_size, eval_batch_size=d.eval_batch_size, seed=cfg.seed
    )
    tagger = build_tagger(cfg, spec, resources, corpus, None)
    gold = {split: corpus.splits[split].source_tags for split in ("dev", "test")}
    module = TaggerModule(tagger, spec, gold, lr=cfg.optim.lr, l2_coef=cfg.elmo.l2_coef)
    one_time.append(("build tagger (biLM read from hdf5), s", f"{timer() - start:.1f}"))
    bilm = tagger.feature("elmo").elmo.bilm.to(DEVICE)
    n_params = sum(p.numel() for p in bilm.parameters())
    check_size(args.bilm, n_params)
    train = dm.splits["train"].tokens
    train_tokens = sum(map(len, train))
    print(f"{machine()}, {'bf16-mixed' if CUDA else 'fp32'}")
    print(
        f"biLM '{args.bilm}' {n_params:,} parameters; tagger {sum(p.numel() for p in tagger.parameters()) - n_params:,}"
        f" parameters besides it; train {len(train):,} sentences, {train_tokens:,} tokens; batch "
        f"{cfg.data.batch_size} (eval {cfg.data.eval_batch_size})\n"
    )

    # -- one-time cost: the cache (fingerprint of the biLM, then train, then valid + test) --
    start = timer()
    cache = LayerCache.for_bilm(cache_dir, bilm)
    one_time.append(("open cache (fingerprint the biLM), s", f"{timer() - start:.1f}"))
    held_out = dm.splits["dev"].tokens + dm.splits["test"].tokens
    fill_train = 0.0
    for name, sentences in (("train", train), ("valid+test", held_out)):
        seconds, computed, tokens = fill(cache, sentences, bilm)
        fill_train = fill_train or seconds
        one_time += [
            (f"fill {name} ({computed:,} distinct of {len(sentences):,} sentences), s", f"{seconds:.1f}"),
            (f"fill {name}, sentences/s", f"{computed / seconds:,.0f}"),
            (f"fill {name}, tokens/s", f"{tokens / seconds:,.0f}"),
            (f"cache on disk after {name}, MB", f"{cache.nbytes / 2**20:,.1f}"),
        ]

    # -- training: the same first N batches of the shuffled epoch with and without the cache, then a full epoch --
    clocks: dict[bool, Clock] = {}
    for cached in (True, False):
        dm.layer_caches = {"elmo": cache} if cached else {}  # the collator takes it when the loader is made
        fit(module, dm, cfg, 1)  # warm-up
        clocks[cached] = fit(module, dm, cfg, args.no_cache_batches)
    dm.layer_caches = {"elmo": cache}
    epoch = fit(module, dm, cfg, None).seconds
    with_s, without_s, n = clocks[True].seconds, clocks[False].seconds, clocks[True].sentences
    without_epoch = without_s / n * len(train)

    # -- evaluation (decode on valid) --
    rates = {}
    for cached in (True, False):
        dm.layer_caches = {"elmo": cache} if cached else {}
        rates[cached] = decode(module, dm, cfg)

    # -- predict: export, load, predict_texts on detokenised test sentences (the biLM runs; no cache) --
    start = timer()
    export_dir = export_model(tagger, spec, work / "export")
    predictor = Predictor.from_export(export_dir, device=DEVICE)
    one_time.append(("export + Predictor.from_export, s", f"{timer() - start:.1f}"))
    lines = [" ".join(s) for s in dm.splits["test"].tokens[: args.predict_sentences]]
    list(predictor.predict_texts(lines[:8]))  # warm-up
    start = timer()
    list(predictor.predict_texts(lines))
    predict_rate = len(lines) / (timer() - start)

    saved = without_epoch - epoch
    one_time.append(
        (
            "train fill / epoch time saved (epochs to break even)",
            f"{fill_train / saved:.2f}" if saved > 0 else "never",
        )
    )
    valid = len(dm.splits["dev"])
    rows = [
        (
            f"train first {args.no_cache_batches} batches ({n:,} sentences), s",
            f"{with_s:.1f}",
            f"{without_s:.1f}",
            without_s / with_s,
        ),
        (
            "train sentences/s (those batches)",
            f"{n / with_s:,.0f}",
            f"{n / without_s:,.0f}",
            without_s / with_s,
        ),
        (
            f"train full epoch ({len(train):,} sentences), s",
            f"{epoch:.1f}",
            f"{without_epoch:.1f} (extrapolated)",
            without_epoch / epoch,
        ),
        (
            "train full epoch, sentences/s",
            f"{len(train) / epoch:,.0f}",
            f"{len(train) / without_epoch:,.0f} (extrapolated)",
            without_epoch / epoch,
        ),
        (
            f"decode valid ({valid:,} sentences), sentences/s",
            f"{rates[True]:,.0f}",
            f"{rates[False]:,.0f}",
            rates[True] / rates[False],
        ),
        (
            f"predict_texts test[:{len(lines)}] (biLM live), sentences/s",
            "n/a (no cache)",
            f"{predict_rate:,.0f}",
            None,
        ),
    ]
    print_table(
        ["measurement", "with cache", "without cache", "ratio"],
        [(label, a, b, "" if ratio is None else f"{ratio:.1f}x") for label, a, b, ratio in rows],
    )
    print(
        f"\nratio = speed-up from the cache (time without / time with). Extrapolated = per-sentence rate of the"
        f" timed batches ({clocks[True].tokens / n:.1f} tokens/sentence; train {train_tokens / len(train):.1f}) x train size.\n"
    )
    print_table(["one-time cost", "value"], one_time)
    if args.trim_repeats:
        test_tokens = sum(len(s) for s in dm.splits["test"].tokens[: len(lines)])
        print_trim_table(
            bilm, train[: args.trim_sentences], predictor, lines, test_tokens, work, args.trim_repeats
        )


if __name__ == "__main__":
    main()
