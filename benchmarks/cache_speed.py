"""Time the paper-size ELMo tagger on CoNLL-2003 train with and without the frozen-layer cache, side by side.

    python benchmarks/cache_speed.py [--bilm original|small|tiny|DIR] [--threads 2] [--no-cache-batches 20]
                                     [--predict-sentences 500] [--work-dir DIR] [--trim-repeats 3]

``original``/``small``/``tiny``: that architecture with seeded random weights, written with ``save_bilm`` and
read back; a DIR holds ``options.json`` + ``weights.hdf5`` (the shipped biLM: ``data/bilm``). The tagger is
``configs/conll2003_elmo.yaml`` without GloVe, built by ``load_corpus``, ``build_spec`` and ``build_tagger``. A training step
is what Lightning does: loss, backward, grad-norm clip, Adam. Without the cache only the first
``--no-cache-batches`` batches of the shuffled epoch are run and the epoch is extrapolated from them.
Temp files (biLM, cache, export) are deleted unless ``--work-dir`` is given. ``--trim-repeats R`` adds a
third table: the cache fill (of ``--trim-sentences`` train sentences, into fresh caches) and ``predict_texts``
with the char CNN over all 50 ids (the code before the tail trim) and with the trim, alternated R times.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
from bilm_speed import ORIGINAL_PARAMS, SIZES, cpu_model, init_weights  # noqa: E402  (this script's folder)

from ner_app.bilm import BidirectionalLM, save_bilm  # noqa: E402
from ner_app.bilm.char_cnn import CharCNN  # noqa: E402
from ner_app.bilm.layer_cache import LayerCache  # noqa: E402
from ner_app.config import load_config  # noqa: E402
from ner_app.data.corpus import load_corpus  # noqa: E402
from ner_app.data.datamodule import ConllDataModule  # noqa: E402
from ner_app.export import export_model  # noqa: E402
from ner_app.predict.predictor import Predictor  # noqa: E402
from ner_app.tagger.model import BiLstmCrfTagger  # noqa: E402
from ner_app.training.run import build_spec, build_tagger, load_elmo  # noqa: E402

# UNTESTED: the CUDA path (biLM, cache fill and tagger on the GPU, bf16 autocast, synchronised clocks) was
# written without a GPU to run it on; only the CPU path has been run.
CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"


def clock() -> float:
    """perf_counter after the GPU has finished its queued work."""
    if CUDA:
        torch.cuda.synchronize()
    return time.perf_counter()


def autocast() -> AbstractContextManager[Any]:
    """bf16 autocast on GPU (as Lightning's bf16-mixed), nothing on CPU (fp32)."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if CUDA else nullcontext()


def to_device(batch: dict[str, Any]) -> dict[str, Any]:
    """Tensors and lists of tensors (cached ``elmo_layers``) onto DEVICE."""

    def move(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.to(DEVICE, non_blocking=True)
        return [move(x) for x in v] if isinstance(v, list) and v and isinstance(v[0], torch.Tensor) else v

    return {k: move(v) for k, v in batch.items()}


def train_steps(
    tagger: BiLstmCrfTagger,
    batches: Iterable[dict[str, Any]],
    opt: torch.optim.Optimizer,
    l2: float,
    clip: float,
) -> tuple[float, int, int]:
    """Seconds, sentences and tokens of training steps over ``batches`` (batch building, cache reads included)."""
    tagger.train()
    params = [p for p in tagger.parameters() if p.requires_grad]
    sentences, tokens, start = 0, 0, clock()
    for batch in batches:
        tokens += sum(map(len, batch["tokens"]))
        batch = to_device(batch)
        with autocast():
            loss = tagger.loss(batch, l2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sentences += len(batch["tokens"])
    return clock() - start, sentences, tokens


@torch.inference_mode()
def decode_rate(tagger: BiLstmCrfTagger, batches: Iterable[dict[str, Any]]) -> float:
    """Sentences/s of Viterbi decoding over ``batches``."""
    tagger.eval()
    sentences, start = 0, clock()
    for batch in batches:
        with autocast():
            tagger.decode(to_device(batch)).cpu()
        sentences += len(batch["tokens"])
    return sentences / (clock() - start)


def prepare_bilm(name: str, work: Path) -> tuple[Path, Path]:
    """options.json and weights.hdf5 of the benchmark's biLM (generated sizes are written under ``work``)."""
    if name not in SIZES:
        folder = Path(name)
        return folder / "options.json", folder / "weights.hdf5"
    torch.manual_seed(0)
    bilm = SIZES[name].build()
    init_weights(bilm)
    return save_bilm(bilm, work / f"bilm-{name}")


def fill(cache: LayerCache, sentences: list[list[str]], bilm: BidirectionalLM) -> tuple[float, int, int]:
    """(seconds, distinct sentences computed, their tokens) of filling the cache with ``sentences``."""
    distinct = {tuple(s): None for s in sentences if s not in cache}
    start = clock()
    computed = cache.fill(sentences, bilm, batch_size=64, device=DEVICE)
    return clock() - start, computed, sum(len(s) for s in distinct)


def trim_rows(
    bilm: BidirectionalLM,
    sentences: list[list[str]],
    predictor: Predictor,
    lines: list[str],
    work: Path,
    repeats: int,
) -> list[tuple[str, float, float]]:
    """(what, median s with 50 ids, median s trimmed): fill and predict, the two code paths alternated."""
    seconds: dict[tuple[str, bool], list[float]] = {}
    predictions: dict[bool, list[dict[str, Any]]] = {}
    for r in range(repeats):
        for trim in (False, True):
            CharCNN.trim_tail = trim  # a class attribute: the cache's biLM and the predictor's alike
            try:
                cache = LayerCache.for_bilm(work / f"trim_{r}_{trim}", bilm)
                start = clock()
                cache.fill(sentences, bilm, batch_size=64, device=DEVICE)
                seconds.setdefault(("fill", trim), []).append(clock() - start)
                start = clock()
                predictions[trim] = list(predictor.predict_texts(lines))
                seconds.setdefault(("predict", trim), []).append(clock() - start)
            finally:
                CharCNN.trim_tail = True
            shutil.rmtree(work / f"trim_{r}_{trim}")
    # The trim is exact: the same entities and scores, bit for bit.
    if predictions[False] != predictions[True]:
        raise RuntimeError("predictions differ between the char CNN over 50 ids and the trimmed one")
    median = statistics.median
    return [
        (what, median(seconds[(what, False)]), median(seconds[(what, True)])) for what in ("fill", "predict")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--bilm", default="original", help="original, small, tiny or a biLM folder (default original)")
    add("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    add("--no-cache-batches", type=int, default=20, help="batches trained without the cache (default 20)")
    add("--predict-sentences", type=int, default=500, help="test sentences to predict (default 500)")
    add("--work-dir", help="keep the biLM, cache and export here (default: a temp dir, deleted)")
    add("--max-sentences", type=int, help="first N sentences of each split only (smoke runs)")
    add(
        "--trim-repeats", type=int, default=0, help="time fill and predict with and without the char-CNN trim"
    )
    add(
        "--trim-sentences", type=int, default=2000, help="train sentences the trim table fills (default 2000)"
    )
    args = parser.parse_args()
    if args.bilm not in SIZES and not (Path(args.bilm) / "options.json").is_file():
        parser.error(f"--bilm {args.bilm}: not one of {', '.join(SIZES)} nor a folder with options.json")
    torch.set_num_threads(args.threads)
    cfg = load_config(ROOT / "configs/conll2003_elmo.yaml")
    if not (Path(cfg.data.dir) / "train.txt").is_file():
        print(f"skipped: no CoNLL-2003 at {cfg.data.dir} (set NER_SHARED to the folder with data/conll2003)")
        return
    keep = args.work_dir is not None
    work = Path(args.work_dir) if keep else Path(tempfile.mkdtemp(prefix="cache_speed_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> None:
    """Build everything under ``work``, measure, print the header and the two tables."""
    cache_dir = work / "elmo_cache"
    shutil.rmtree(cache_dir, ignore_errors=True)  # a previous run's cache would make the fill free
    one_time: list[tuple[str, str]] = []
    start = clock()
    options, weights = prepare_bilm(args.bilm, work)
    if args.bilm in SIZES:
        one_time.append((f"write random '{args.bilm}' biLM to hdf5, s", f"{clock() - start:.1f}"))
    overrides = [f"elmo.options={options}", f"elmo.weights={weights}", "model.glove=null",
                 f"elmo.cache_dir={cache_dir}"]  # fmt: skip
    if args.max_sentences:
        overrides.append(f"data.max_sentences={args.max_sentences}")
    cfg = load_config(ROOT / "configs/conll2003_elmo.yaml", overrides)
    d = cfg.data
    corpus = load_corpus(d.dir, d.hub_name, d.scheme, d.max_sentences)
    torch.manual_seed(cfg.seed)
    start = clock()
    bilm_, elmo_ref = load_elmo(cfg)
    spec = build_spec(cfg, corpus, elmo_ref, None)
    dm = ConllDataModule(
        corpus, spec, batch_size=d.batch_size, eval_batch_size=d.eval_batch_size, seed=cfg.seed
    )
    tagger = build_tagger(cfg, spec, bilm_, corpus, None)
    one_time.append(("build tagger (biLM read from hdf5), s", f"{clock() - start:.1f}"))
    assert tagger.elmo is not None
    tagger.to(DEVICE)
    bilm = tagger.elmo.bilm
    n_params = sum(p.numel() for p in bilm.parameters())
    if args.bilm == "original" and n_params != ORIGINAL_PARAMS:
        raise RuntimeError(f"original biLM has {n_params:,} parameters, expected {ORIGINAL_PARAMS:,}")
    train = dm.splits["train"].tokens
    train_tokens = sum(map(len, train))
    gpu = f", GPU {torch.cuda.get_device_name()} (bf16 autocast)" if CUDA else ", fp32 CPU"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU {cpu_model()}{gpu}")
    print(f"biLM '{args.bilm}' {n_params:,} parameters; tagger {sum(p.numel() for p in tagger.parameters()) - n_params:,}"
          f" parameters besides it; train {len(train):,} sentences, {train_tokens:,} tokens; batch "
          f"{cfg.data.batch_size} (eval {cfg.data.eval_batch_size})\n")  # fmt: skip

    # -- one-time cost: the cache (fingerprint of the biLM, then train, then valid + test) --
    start = clock()
    cache = LayerCache.for_bilm(cache_dir, bilm)
    one_time.append(("open cache (fingerprint the biLM), s", f"{clock() - start:.1f}"))
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
    opt = torch.optim.Adam([p for p in tagger.parameters() if p.requires_grad], lr=cfg.optim.lr)
    step = {"opt": opt, "l2": cfg.elmo.l2_coef, "clip": cfg.optim.grad_clip}
    timed: dict[bool, tuple[float, int, int]] = {}
    for cached in (True, False):
        dm.layer_cache = cache if cached else None  # the collator takes it when the loader is made
        train_steps(tagger, itertools.islice(dm.dataloader("train", shuffle=True), 1), **step)  # warm-up
        batches = itertools.islice(dm.dataloader("train", shuffle=True), args.no_cache_batches)
        timed[cached] = train_steps(tagger, batches, **step)
    dm.layer_cache = cache
    epoch, _, _ = train_steps(tagger, dm.dataloader("train", shuffle=True), **step)
    (with_s, n, n_tokens), (without_s, _, _) = timed[True], timed[False]
    without_epoch = without_s / n * len(train)

    # -- evaluation (decode on valid) --
    rates = {}
    for cached in (True, False):
        dm.layer_cache = cache if cached else None
        rates[cached] = decode_rate(tagger, dm.dataloader("dev"))

    # -- predict: export, load, predict_texts on detokenised test sentences (the biLM runs; no cache) --
    start = clock()
    export_dir = export_model(tagger, spec, work / "export")
    predictor = Predictor.from_export(export_dir, device=DEVICE)
    one_time.append(("export + Predictor.from_export, s", f"{clock() - start:.1f}"))
    lines = [" ".join(s) for s in dm.splits["test"].tokens[: args.predict_sentences]]
    list(predictor.predict_texts(lines[:8]))  # warm-up
    start = clock()
    list(predictor.predict_texts(lines))
    predict_rate = len(lines) / (clock() - start)

    saved = without_epoch - epoch
    one_time.append(("train fill / epoch time saved (epochs to break even)",
                     f"{fill_train / saved:.2f}" if saved > 0 else "never"))  # fmt: skip
    valid = len(dm.splits["dev"])
    rows = [
        (f"train first {args.no_cache_batches} batches ({n:,} sentences), s", f"{with_s:.1f}", f"{without_s:.1f}",
         without_s / with_s),
        ("train sentences/s (those batches)", f"{n / with_s:,.0f}", f"{n / without_s:,.0f}", without_s / with_s),
        (f"train full epoch ({len(train):,} sentences), s", f"{epoch:.1f}", f"{without_epoch:.1f} (extrapolated)",
         without_epoch / epoch),
        ("train full epoch, sentences/s", f"{len(train) / epoch:,.0f}",
         f"{len(train) / without_epoch:,.0f} (extrapolated)", without_epoch / epoch),
        (f"decode valid ({valid:,} sentences), sentences/s", f"{rates[True]:,.0f}", f"{rates[False]:,.0f}",
         rates[True] / rates[False]),
        (f"predict_texts test[:{len(lines)}] (biLM live), sentences/s", "n/a (no cache)", f"{predict_rate:,.0f}", None),
    ]  # fmt: skip
    print("| measurement | with cache | without cache | ratio |\n|---|---:|---:|---:|")
    for label, a, b, ratio in rows:
        print(f"| {label} | {a} | {b} | {'' if ratio is None else f'{ratio:.1f}x'} |")
    print(f"\nratio = speed-up from the cache (time without / time with). Extrapolated = per-sentence rate of the"
          f" timed batches ({n_tokens / n:.1f} tokens/sentence; train {train_tokens / len(train):.1f}) x train size.\n")  # fmt: skip
    print("| one-time cost | value |\n|---|---:|")
    for label, value in one_time:
        print(f"| {label} | {value} |")
    if args.trim_repeats:
        sample = train[: args.trim_sentences]
        rows_ = trim_rows(bilm, sample, predictor, lines, work, args.trim_repeats)
        tokens = {
            "fill": sum(map(len, sample)),
            "predict": sum(len(s) for s in dm.splits["test"].tokens[: len(lines)]),
        }
        print(
            f"\nchar CNN over all 50 ids against the tail trim, median of {args.trim_repeats}, alternated "
            f"(fill: {len(sample):,} train sentences into a fresh cache; predict: the lines above)\n"
        )
        print("| path | 50 ids, tokens/s | trimmed, tokens/s | speed-up |\n|---|---:|---:|---:|")
        for what, untrimmed, trimmed in rows_:
            print(
                f"| {what} | {tokens[what] / untrimmed:,.0f} | {tokens[what] / trimmed:,.0f} | "
                f"{untrimmed / trimmed:.2f}x |"
            )


if __name__ == "__main__":
    main()
