"""Peak memory (RSS) of training, evaluation, predict, embed and the layer-cache fill against the longest
sentence: no budget (the batching and char CNNs before the token budget) and the token budget, side by side.

    python -m benchmarks.memory [--lengths 50,500,3000,20000] [--tasks train,evaluate,predict,embed,cache]
                                [--train-sentences 1000] [--eval-sentences 1000] [--limit-gb 6] [--threads 1]
                                [--out results/memory]

Data: CoNLL-2003 from ../shared (skipped without it). Train holds the first ``--train-sentences`` train
sentences of at most 50 tokens, valid and test the first ``--eval-sentences`` dev sentences of at most 50;
then one more sentence of exactly N tokens (dev sentences concatenated and cut) goes into every split, so the
longest sentence is N. Every cell is a fresh process (``--cell``) under an address-space limit
(RLIMIT_AS, ``--limit-gb``): a cell that needs more fails inside its own allocation and shows as "> N GB".
Its peak RSS is the kernel's ``ru_maxrss`` of that process (``os.wait4``), start-up and imports included.

- train: one epoch of the baseline tagger (no GloVe, no ELMo) through a Lightning ``Trainer``, no validation.
- evaluate: ``trainer.validate`` (dev) and ``trainer.test`` (test) of the same freshly built tagger.
- predict: ``predict_conll`` over valid.txt with an exported ELMo tagger (the shipped biLM in data/bilm).
- embed: ``embed_file`` of the valid sentences with the shipped biLM; cache: ``LayerCache.fill`` of them.

"no budget" is ``max_tokens=None`` everywhere and both char CNNs unchunked (``chunk_words`` and
``chunk_tokens`` None): the code before the budget. "budget" is every default. Writes ``cells.json`` (every
cell's numbers, a failed cell's last stderr lines) and ``table.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, SHARED, cpu_name, print_table
from ner_app.files import write_text

CONLL = SHARED / "data" / "conll2003"
BILM = ROOT / "data" / "bilm"
TASKS = ("train", "evaluate", "predict", "embed", "cache")
MODES = ("none", "budget")
MEMORY_ERRORS = (
    "MemoryError",
    "can't allocate memory",
    "Cannot allocate memory",
    "std::bad_alloc",
    "out of memory",
)


# ------------------------------------------------------------------------------------------- the data
def write_data(folder: Path, train_n: int, eval_n: int, longest: int) -> None:
    """train.txt, valid.txt, test.txt (CoNLL) and sentences.txt (one sentence a line) with one sentence of
    exactly ``longest`` tokens in every split."""
    from ner_app.text.conll import read_conll

    train = [s for s in read_conll(CONLL / "train.txt") if len(s.tokens) <= 50][:train_n]
    dev = [s for s in read_conll(CONLL / "valid.txt") if len(s.tokens) <= 50]
    long_tokens: list[str] = []
    long_tags: list[str] = []
    for sentence in dev[eval_n:] + dev:  # the held-back dev sentences first, then again from the start
        long_tokens += sentence.tokens
        long_tags += sentence.tags
        if len(long_tokens) >= longest:
            break
    long = (long_tokens[:longest], long_tags[:longest])
    splits = {
        "train": [(s.tokens, s.tags) for s in train],
        "valid": [(s.tokens, s.tags) for s in dev[:eval_n]],
    }
    splits["test"] = splits["valid"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, sentences in splits.items():
        blocks = ["\n".join(f"{t} X X {g}" for t, g in zip(*s, strict=True)) for s in [*sentences, long]]
        write_text(folder / f"{name}.txt", "-DOCSTART- -X- -X- O\n\n" + "\n\n".join(blocks) + "\n")
    write_text(folder / "sentences.txt", "\n".join(" ".join(t) for t, _ in [*splits["valid"], long]) + "\n")


def write_export(folder: Path, data: Path) -> Path:
    """A freshly initialised ELMo tagger of the data's train split with the shipped biLM, exported."""
    from ner_app.config.load import load_config
    from ner_app.tagger.export import export_model
    from ner_app.train.corpus import load_corpus
    from ner_app.train.run import build_spec, build_tagger, load_features

    cfg = load_config(
        ROOT / "configs/conll2003_elmo.yaml",
        [
            f"data.dir={data}",
            "model.glove=null",
            f"elmo.options={BILM / 'options.json'}",
            f"elmo.weights={BILM / 'weights.hdf5'}",
        ],
    )
    corpus = load_corpus(cfg.data.dir, None, cfg.data.scheme)
    features, resources = load_features(cfg)
    spec = build_spec(cfg, corpus, features, None)
    return export_model(build_tagger(cfg, spec, resources, corpus, None), spec, folder)


# ------------------------------------------------------------------------------------------- one cell
def run_cell(task: str, mode: str, data: Path, export: Path, threads: int) -> None:
    """One measurement, in this process (started by ``measure``)."""
    import torch

    from ner_app.bilm.char_cnn import TokenEncoder
    from ner_app.tagger.char_features import WordCharCNN

    torch.set_num_threads(threads)
    budget = mode == "budget"
    if not budget:  # the code before the token budget: no cap, char CNNs all at once
        WordCharCNN.chunk_words, TokenEncoder.chunk_tokens = None, None
    if task in ("train", "evaluate"):
        tagger_cell(task, budget, data)
    elif task == "predict":
        from ner_app.predict.predictor import PREDICT_MAX_TOKENS, Predictor, predict_conll

        predictor = Predictor.from_export(export, max_tokens=PREDICT_MAX_TOKENS if budget else None)
        with open(data / "valid.txt", encoding="utf-8") as lines:
            for _ in predict_conll(predictor, (line.rstrip("\n") for line in lines)):
                pass
    else:
        from ner_app.bilm.weights import load_bilm

        bilm = load_bilm(BILM / "options.json", BILM / "weights.hdf5")
        with tempfile.TemporaryDirectory(prefix="memory_cell_") as tmp:
            if task == "embed":
                from ner_app.bilm.embed import EMBED_MAX_TOKENS, embed_file

                limit = EMBED_MAX_TOKENS if budget else None
                embed_file(
                    bilm, data / "sentences.txt", Path(tmp) / "out.hdf5", progress=False, max_tokens=limit
                )
            else:
                from ner_app.train.layer_cache import FILL_MAX_TOKENS, LayerCache

                lines = (data / "sentences.txt").read_text(encoding="utf-8").splitlines()
                cache = LayerCache.for_bilm(Path(tmp) / "cache", bilm)
                cache.fill(
                    [s.split(" ") for s in lines], bilm, max_tokens=FILL_MAX_TOKENS if budget else None
                )


def tagger_cell(task: str, budget: bool, data: Path) -> None:
    """A training epoch, or dev and test evaluation, of the baseline tagger as ``train.py`` builds it."""
    from benchmarks.cache_speed import quiet_lightning
    from ner_app.config.load import load_config
    from ner_app.config.schema import RuntimeConfig
    from ner_app.runtime.trainer import build_trainer
    from ner_app.train.corpus import load_corpus
    from ner_app.train.datamodule import ConllDataModule
    from ner_app.train.module import TaggerModule
    from ner_app.train.run import build_spec, build_tagger

    quiet_lightning()
    cfg = load_config(ROOT / "configs/conll2003_baseline.yaml", [f"data.dir={data}", "model.glove=null"])
    d = cfg.data
    corpus = load_corpus(d.dir, None, d.scheme)
    spec = build_spec(cfg, corpus, None, None)
    dm = ConllDataModule(
        corpus,
        spec,
        batch_size=d.batch_size,
        eval_batch_size=d.eval_batch_size,
        seed=cfg.seed,
        max_tokens=d.max_tokens_per_batch if budget else None,
        eval_max_tokens=d.eval_max_tokens_per_batch if budget else None,
    )
    gold = {split: corpus.splits[split].source_tags for split in ("dev", "test")}
    module = TaggerModule(build_tagger(cfg, spec, None, corpus, None), spec, gold, lr=cfg.optim.lr)
    quiet = RuntimeConfig(accelerator="cpu", precision="32-true", enable_progress_bar=False)
    trainer = build_trainer(quiet, [], max_epochs=1, limit_val_batches=0, enable_checkpointing=False)
    if task == "train":
        trainer.fit(module, datamodule=dm)
    else:
        trainer.validate(module, datamodule=dm, verbose=False)
        trainer.test(module, datamodule=dm, verbose=False)


def measure(
    task: str, mode: str, data: Path, export: Path, limit: int, threads: int, log: Path
) -> dict[str, Any]:
    """Run one cell in a child process limited to ``limit`` bytes of address space: its peak RSS and status."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.nice(5)

    command = [
        sys.executable,
        "-m",
        "benchmarks.memory",
        "--cell",
        task,
        mode,
        str(data),
        str(export),
        "--threads",
        str(threads),
    ]
    start = time.perf_counter()
    with open(log, "wb") as err:
        child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=limited)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
    ok = child.returncode == 0
    return {
        "task": task,
        "mode": mode,
        "returncode": child.returncode,
        "ok": ok,
        "over_limit": not ok and any(m in "\n".join(tail) for m in MEMORY_ERRORS),
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "seconds": round(time.perf_counter() - start, 1),
        "stderr_tail": [] if ok else tail,
    }


# ------------------------------------------------------------------------------------------- the table
def shown(cell: dict[str, Any], limit_gb: float) -> str:
    if cell["ok"]:
        return f"{cell['peak_rss_bytes'] / 2**30:.2f} GB"
    if cell["over_limit"]:
        return f"> {limit_gb:g} GB (limit)"
    return f"error (exit {cell['returncode']})"


def table(cells: list[dict[str, Any]], lengths: list[int], limit_gb: float) -> list[list[str]]:
    found = {(c["task"], c["longest"], c["mode"]): c for c in cells}
    rows = []
    for task in dict.fromkeys(c["task"] for c in cells):
        base = found.get((task, lengths[0], "budget"))
        for n in lengths:
            old, new = found[(task, n, "none")], found[(task, n, "budget")]
            ratio = (
                f"{old['peak_rss_bytes'] / new['peak_rss_bytes']:.2f}x"
                if old["ok"] and new["ok"]
                else (
                    f"> {limit_gb * 2**30 / new['peak_rss_bytes']:.1f}x"
                    if old["over_limit"] and new["ok"]
                    else ""
                )
            )
            growth = (
                f"{new['peak_rss_bytes'] / base['peak_rss_bytes']:.2f}x"
                if base and base["ok"] and new["ok"]
                else ""
            )
            rows.append([task, f"{n:,}", shown(old, limit_gb), shown(new, limit_gb), ratio, growth])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add(
        "--lengths",
        default="50,500,3000,20000",
        help="longest sentence of each data set (default 50,500,3000,20000)",
    )
    add("--tasks", default=",".join(TASKS), help=f"a comma-separated subset of {','.join(TASKS)}")
    add("--train-sentences", type=int, default=1000, help="CoNLL train sentences of at most 50 tokens")
    add("--eval-sentences", type=int, default=1000, help="CoNLL dev sentences of at most 50 tokens")
    add("--limit-gb", type=float, default=6.0, help="address-space limit of every cell, GiB (default 6)")
    add("--threads", type=int, default=1, help="torch threads of every cell (default 1)")
    add("--out", default=str(ROOT / "results" / "memory"), help="where cells.json and table.md go")
    add("--cell", nargs=4, metavar=("TASK", "MODE", "DATA", "EXPORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        task, mode, data, export = args.cell
        run_cell(task, mode, Path(data), Path(export), args.threads)
        return
    if not (CONLL / "train.txt").is_file():
        print(f"skipped: no CoNLL-2003 at {CONLL} (set NER_SHARED to the folder with data/conll2003)")
        return
    lengths = [int(n) for n in args.lengths.split(",")]
    tasks = [t for t in args.tasks.split(",") if t]
    limit = int(args.limit_gb * 2**30)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = (
        f"{cpu_name()}, {os.cpu_count()} cores, torch threads {args.threads}; train {args.train_sentences} "
        f"and dev/test {args.eval_sentences} CoNLL-2003 sentences of at most 50 tokens, plus one sentence "
        f"of the longest length in every split; address-space limit {args.limit_gb:g} GiB a cell"
    )
    print(header + "\n", flush=True)
    cells: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memory_") as tmp:
        work = Path(tmp)
        for n in lengths:
            data = work / f"data_{n}"
            write_data(data, args.train_sentences, args.eval_sentences, n)
            export = write_export(work / f"export_{n}", data) if "predict" in tasks else work
            for task in tasks:
                for mode in MODES:
                    cell = measure(task, mode, data, export, limit, args.threads, work / "stderr.txt")
                    cells.append({**cell, "longest": n})
                    print(
                        f"  {task} longest {n:,} {mode}: {shown(cell, args.limit_gb)} in {cell['seconds']} s",
                        file=sys.stderr,
                        flush=True,
                    )
    rows = table(cells, lengths, args.limit_gb)
    print_table(
        [
            "task",
            "longest sentence",
            "no budget",
            "token budget",
            "no budget / budget",
            f"budget vs longest {lengths[0]:,}",
        ],
        rows,
        left=2,
    )
    write_text(out / "cells.json", json.dumps({"machine": header, "cells": cells}, indent=1) + "\n")
    lines = [
        "| task | longest sentence | no budget | token budget | no budget / budget | growth |",
        "|---|---|---:|---:|---:|---:|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
    write_text(out / "table.md", header + "\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
