"""Sentences per second of a CoNLL-2003 training epoch, two checkouts side by side, alternated in one run.

Each side is ``train.py`` itself (the config's real run, ``PYTHONPATH`` set to its checkout) stopped after the
first dev pass: a bounded number of training batches (``trainer.limit_train_batches``) and the whole dev pass
that follows them are clocked by wrapping the LightningModule's hooks, the first batch left out as warm-up.
The epoch rate is what a whole epoch would take at those rates: every training sentence, then one dev pass.

    git worktree add --detach /tmp/before 2f27fcc
    python -m benchmarks.epoch_speed --before /tmp/before --configs baseline elmo-cache   # long job

The ELMo config reads the frozen biLM's layers from a cache (filled once, by the first run, in a temporary
folder). ``--max-sentences`` keeps the first N sentences of each split (the training batches are drawn from
them, the dev pass reads them), which bounds the run; ``--before .`` compares this checkout with itself.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NER_SHARED") or ROOT.parent / "shared")
CONFIGS = {
    "baseline": "configs/conll2003_baseline.yaml",
    "elmo-cache": "configs/conll2003_elmo.yaml",
    "minilm-cache": "configs/conll2003_minilm.yaml",  # needs the MiniLM folder (docs/encoders.md)
}


def now() -> tuple[float, float]:
    """(wall-clock seconds, this process's CPU seconds): where other jobs share the cores, the CPU time of a
    one-thread run is the steadier measure of its work."""
    return time.perf_counter(), time.process_time()


class Done(BaseException):
    """Raised once the first dev pass is clocked: the rest of the run (test, export) is not measured."""


# ------------------------------------------------------------------------------------------- the worker
def worker(config: str, overrides: list[str]) -> dict[str, float]:
    """Run ``train.py`` on ``config`` with ``overrides`` in this process's checkout, clocked; stop after dev."""
    import train
    from ner_app.train.module import TaggerModule

    seen: dict[str, Any] = {"train": [], "train_sentences": 0, "dev": [], "dev_sentences": 0}

    def wrap(name: str, before: Any) -> None:
        inner = getattr(TaggerModule, name)

        def hook(self: TaggerModule, *args: Any) -> Any:
            before(self, *args)
            return inner(self, *args)

        setattr(TaggerModule, name, hook)

    def train_start(self: TaggerModule, batch: Any, i: int) -> None:
        if i == 1:  # batch 0 is the warm-up
            seen["train"].append(now())
        if i >= 1:
            seen["train_sentences"] += len(batch["tokens"])

    def train_end(self: TaggerModule, out: Any, batch: Any, i: int) -> None:
        if i >= 1:
            seen["train"].append(now())

    def dev_batch(self: TaggerModule, batch: Any, i: int) -> None:
        seen["dev_sentences"] += len(batch["tokens"])

    def dev_start(self: TaggerModule) -> None:
        seen["dev"].append(now())

    wrap("on_train_batch_start", train_start)
    wrap("on_train_batch_end", train_end)
    wrap("validation_step", dev_batch)
    wrap("on_validation_epoch_start", dev_start)
    finish = TaggerModule.on_validation_epoch_end

    def dev_end(self: TaggerModule) -> None:
        finish(self)  # the scoring is part of the pass
        seen["dev"].append(now())
        raise Done

    TaggerModule.on_validation_epoch_end = dev_end  # type: ignore[method-assign]
    try:
        train.main(["--config", config, *overrides])
    except Done:
        pass
    train_times, dev_times = seen["train"], seen["dev"]
    if len(train_times) < 2 or len(dev_times) < 2:
        raise SystemExit("the run did not reach two training batches and a dev pass")
    rates = {}
    for kind, times in (("train", train_times), ("dev", dev_times)):
        sentences = seen[f"{kind}_sentences"]
        rates[kind] = sentences / (times[-1][0] - times[0][0])
        rates[f"{kind} cpu"] = sentences / (times[-1][1] - times[0][1])
    return rates


# ------------------------------------------------------------------------------------------- the driver
def run_side(tree: Path, config: str, overrides: list[str]) -> dict[str, float]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", config, *overrides]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(
            f"{tree} {config}: the worker failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(lines[-1])


def split_sizes(data: Path) -> tuple[int, int]:
    """Sentences of the whole train and dev files (what one epoch and its dev pass read)."""
    from ner_app.text.conll import read_conll

    return len(read_conll(data / "train.txt")), len(read_conll(data / "valid.txt"))


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(sys.argv[2], sys.argv[3:])))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["baseline"])
    parser.add_argument("--rounds", type=int, default=2, help="before/after pairs, alternated")
    parser.add_argument("--train-batches", type=int, default=30, help="training batches of each run")
    parser.add_argument("--max-sentences", type=int, default=3000, help="first N sentences of each split")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--after-overrides",
        nargs="*",
        default=[],
        help="config overrides for the after side only (trainer.precision=bf16-mixed: bf16 on CPU)",
    )
    args = parser.parse_args(argv)
    if not (args.before / "ner_app").is_dir():
        parser.error("--before must name a checkout of this project (a folder holding ner_app/)")
    data = SHARED / "data" / "conll2003"
    if not (data / "train.txt").is_file():
        parser.error(f"{data}: CoNLL-2003 not found (set NER_SHARED to the shared data folder)")
    from benchmarks.common import cpu_name, print_table

    trees = {"before": args.before.resolve(), "after": ROOT}
    start_load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    full_train, full_dev = split_sizes(data)
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.configs:
            rates: dict[str, dict[str, list[float]]] = {s: {} for s in trees}
            for r in range(args.rounds):
                for side, tree in trees.items():
                    overrides = [
                        f"output_dir={tmp}/{name}-{side}-{r}",
                        f"data.dir={data}",
                        f"data.max_sentences={args.max_sentences}",
                        "trainer.max_epochs=1",
                        f"trainer.limit_train_batches={args.train_batches}",
                        f"trainer.threads={args.threads}",
                        "trainer.enable_progress_bar=false",
                    ]
                    if name == "elmo-cache":
                        overrides.append(f"elmo.cache_dir={tmp}/cache")  # filled by the first run only
                    if side == "after":
                        overrides += args.after_overrides
                    for kind, rate in run_side(tree, str(ROOT / CONFIGS[name]), overrides).items():
                        rates[side].setdefault(kind, []).append(rate)
            results[name] = rates
    load = f"{start_load} at the start, " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + " at the end"
    print(
        f"\n{cpu_name()}, {os.cpu_count()} cores, load average {load}; {args.threads} thread(s), "
        f"{args.train_batches} training batches and one dev pass a run (first {args.max_sentences} sentences "
        f"of each split), {args.rounds} rounds alternated; medians. Epoch: {full_train} training sentences "
        f"and a dev pass of {full_dev} at these rates."
    )
    extra = f" with {' '.join(args.after_overrides)}" if args.after_overrides else ""
    print(f"before: {trees['before']}  after: {trees['after']}{extra}\n")

    def rows() -> Any:
        for name, rates in results.items():
            med = {s: {k: statistics.median(v) for k, v in rates[s].items()} for s in trees}
            for label, suffix in (("wall", ""), ("CPU", " cpu")):
                t, d = f"train{suffix}", f"dev{suffix}"
                epoch = {s: full_train / (full_train / m[t] + full_dev / m[d]) for s, m in med.items()}
                for what, before, after in (
                    ("train", med["before"][t], med["after"][t]),
                    ("dev pass", med["before"][d], med["after"][d]),
                    ("epoch", epoch["before"], epoch["after"]),
                ):
                    yield (
                        name,
                        f"{what}, per {label} s",
                        f"{before:.0f}",
                        f"{after:.0f}",
                        f"{after / before:.2f}x",
                    )

    print_table(["config", "sentences", "before", "after", "after/before"], rows(), left=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
