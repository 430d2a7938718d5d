"""Steps per second of a tagger so small that its compute is negligible, two checkouts side by side.

This is the regime an accelerator lives in: a step costs what the Python around the math costs (Lightning's
loop and logging, the callbacks, collate, host-device waits). Each checkout runs in its own process
(``PYTHONPATH`` set to it), this same file as the worker, alternated round by round so that a busy machine
slows both alike:

- ``train``: optimiser steps of the real training loop (the trainer of ``build_trainer`` with the callbacks a
  training run has: checkpoints, early stopping, throughput, the finite-loss guard; gradient clipping on);
- ``validate``: evaluation steps of the dev pass every epoch runs (decode, tags back to strings, scoring);
- ``predict``: batches of ``Predictor.tag``, the path of ``predict`` and the server.

    git worktree add --detach /tmp/before 2f27fcc
    python -m benchmarks.step_overhead --before /tmp/before --rounds 3

``--before .`` compares this checkout with itself (a smoke run; the ratios are then about 1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("train", "validate", "predict")
# a tagger whose every layer is a few numbers wide: the time of a step is its overhead
TINY = {"word_dim": 4, "char_dim": 2, "char_filters": 4, "char_width": 3, "lstm_hidden": 4, "lstm_layers": 1}


# ------------------------------------------------------------------------------------------- the worker
def now() -> tuple[float, float]:
    """(wall-clock seconds, this process's CPU seconds): on a machine whose cores other jobs share, the CPU
    time of a one-thread process is the steadier measure of the work a step does."""
    return time.perf_counter(), time.process_time()


def worker(args: argparse.Namespace) -> dict[str, float]:
    """Time ``args.steps`` steps of each kind after ``args.warmup``, in this process's checkout."""
    import torch
    from pytorch_lightning.callbacks import Callback, EarlyStopping, ModelCheckpoint

    from ner_app.config.schema import RuntimeConfig
    from ner_app.predict.predictor import Predictor
    from ner_app.runtime.finite import FiniteGuard
    from ner_app.runtime.trainer import build_trainer
    from ner_app.tagger.model import BiLstmCrfTagger
    from ner_app.tagger.spec import TaggerSizes, TaggerSpec
    from ner_app.train.callbacks import train_throughput
    from ner_app.train.corpus import load_corpus
    from ner_app.train.datamodule import ConllDataModule
    from ner_app.train.module import TaggerModule

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    corpus = load_corpus(str(args.data), None, "BIOES")
    train = corpus.splits["train"]
    spec = TaggerSpec.from_training_data(
        TaggerSizes(**TINY, dropout=0.0), train.tokens, train.tags, corpus.scheme, corpus.source_scheme
    )
    tagger = BiLstmCrfTagger.from_spec(spec, None)
    gold = {split: corpus.splits[split].source_tags for split in ("dev", "test")}
    module = TaggerModule(tagger, spec, gold, lr=1e-3, l2_coef=0.1)
    dm = ConllDataModule(corpus, spec, batch_size=args.batch, eval_batch_size=args.batch)
    clock: dict[str, list[tuple[float, float]]] = {"train": [], "validate": []}  # after the warm-up

    class Clock(Callback):
        def on_train_batch_start(self, trainer: object, pl_module: object, batch: object, i: int) -> None:
            if i == args.warmup:
                clock["train"].append(now())

        def on_train_batch_end(
            self, trainer: object, pl_module: object, out: object, batch: object, i: int
        ) -> None:
            if i >= args.warmup:
                clock["train"].append(now())

        def on_validation_batch_start(
            self, trainer: object, pl_module: object, batch: object, i: int
        ) -> None:
            if i == args.warmup:
                clock["validate"].append(now())

        def on_validation_epoch_end(self, trainer: object, pl_module: object) -> None:
            clock["validate"].append(now())  # the pass's scoring included

    runtime = RuntimeConfig(accelerator="cpu", precision="32-true", enable_progress_bar=False)
    with tempfile.TemporaryDirectory() as tmp:
        callbacks = [
            ModelCheckpoint(tmp, "best", "val_f1", mode="max", save_on_train_epoch_end=False),
            ModelCheckpoint(tmp, "last", save_on_train_epoch_end=False),
            EarlyStopping("val_f1", mode="max", patience=10, check_on_train_epoch_end=False),
            train_throughput(),
            FiniteGuard(),
            Clock(),
        ]
        steps = args.warmup + args.steps
        trainer = build_trainer(
            runtime,
            callbacks,
            Path(tmp),
            grad_clip=5.0,
            max_epochs=1,
            limit_train_batches=steps,
            limit_val_batches=0,  # the fit times training steps only
        )
        trainer.fit(module, datamodule=dm)
        trainer.limit_val_batches = 1.0
        trainer.validate(module, datamodule=dm, verbose=False)
    dev = corpus.splits["dev"].tokens
    predictor = Predictor(tagger, spec, batch_size=args.batch)
    predictor.tag(dev[: args.warmup * args.batch])
    start = now()
    predictor.tag(dev[: args.steps * args.batch])
    clock["predict"] = [start, now()]
    batches = {
        "train": len(clock["train"]) - 1,
        "validate": len(dm.val_dataloader()) - args.warmup,
        "predict": args.steps,
    }
    rates = {}
    for kind, count in batches.items():
        times = clock[kind]
        if count < 1 or len(times) < 2:
            raise SystemExit(f"{kind}: fewer than {args.warmup + 1} steps ran; use a larger corpus")
        rates[kind] = count / (times[-1][0] - times[0][0])
        rates[f"{kind} cpu"] = count / (times[-1][1] - times[0][1])
    return rates


# ------------------------------------------------------------------------------------------- the driver
def write_corpus(folder: Path, train_copies: int, dev_copies: int) -> Path:
    """tests/data/tiny_conll with its train.txt repeated ``train_copies`` times and valid.txt ``dev_copies``."""
    tiny = ROOT / "tests" / "data" / "tiny_conll"
    for name, copies in (("train.txt", train_copies), ("valid.txt", dev_copies), ("test.txt", 1)):
        text = (tiny / name).read_text(encoding="utf-8").strip("\n")
        (folder / name).write_text("\n\n".join([text] * copies) + "\n", encoding="utf-8")
    return folder


def run_side(tree: Path, args: argparse.Namespace, data: Path) -> dict[str, float]:
    """One worker process on the checkout ``tree``; its rates."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--data", str(data)]
    for key in ("threads", "steps", "warmup", "batch"):
        command += [f"--{key}", str(getattr(args, key))]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"{tree}: the worker failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, help="the checkout to compare with (git worktree add ...)")
    parser.add_argument("--rounds", type=int, default=3, help="before/after pairs, alternated")
    parser.add_argument("--steps", type=int, default=150, help="timed steps of each kind per run")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--batch", type=int, default=8, help="sentences a batch")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    if args.before is None or not (args.before / "ner_app").is_dir():
        parser.error("--before must name a checkout of this project (a folder holding ner_app/)")
    from benchmarks.common import cpu_name, print_table

    trees = {"before": args.before.resolve(), "after": ROOT}
    start_load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rates: dict[str, dict[str, list[float]]] = {side: {} for side in trees}
    with tempfile.TemporaryDirectory() as tmp:
        # enough sentences (7 a copy, 5 counted) for every timed step of both loops at this batch size
        blocks = (args.warmup + args.steps) * args.batch // 5 + 1
        data = write_corpus(Path(tmp), blocks, blocks)
        for _ in range(args.rounds):
            for side, tree in trees.items():
                for kind, rate in run_side(tree, args, data).items():
                    rates[side].setdefault(kind, []).append(rate)
    load = f"{start_load} at the start, " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + " at the end"
    print(
        f"\n{cpu_name()}, {os.cpu_count()} cores, load average {load}; {args.threads} thread(s), batch "
        f"{args.batch}, {args.steps} timed steps after {args.warmup}, {args.rounds} rounds alternated"
    )
    print(f"before: {trees['before']}  after: {trees['after']}\n")

    def rows() -> object:
        for kind in KINDS:
            cells: list[object] = [kind]
            for key in (kind, f"{kind} cpu"):
                before, after = (statistics.median(rates[s][key]) for s in trees)
                cells += [f"{before:.1f}", f"{after:.1f}", f"{after / before:.2f}x"]
            yield cells

    print("Steps per second of wall-clock time, and per second of the process's CPU time (medians):\n")
    header = [
        "steps",
        "before /s",
        "after /s",
        "after/before",
        "before /CPU s",
        "after /CPU s",
        "after/before",
    ]
    print_table(header, rows())
    print(
        "\nEach round, after/before per CPU second: "
        + ", ".join(
            f"{kind} "
            + " ".join(
                f"{a / b:.2f}"
                for a, b in zip(rates["after"][f"{kind} cpu"], rates["before"][f"{kind} cpu"], strict=True)
            )
            for kind in KINDS
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
