"""``predict`` of one line as a whole process, start-up and loading included: two checkouts side by side.

    nice python -m benchmarks.start_up --before CHECKOUT [--rounds 5] [--model EXPORT]

Runs ``python -m ner_app predict --input ONE_LINE --threads 1`` with each checkout's code (``PYTHONPATH``), on
the same export (default: this checkout's shipped tagger), one process at a time in turn, so that a busy machine
slows both alike; the first round of each is a warm-up (file cache) and left out. Prints the median wall
seconds, the ratio, and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, cpu_name, print_table

LINE = "Angela Merkel met Emmanuel Macron in Berlin.\n"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_run(checkout: Path, model: Path, text: Path) -> float:
    command = [sys.executable, "-m", "ner_app", "predict", "--model", str(model), "--input", str(text)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    done = subprocess.run([*command, "--threads", "1"], cwd=checkout, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or '"Angela Merkel"' not in done.stdout:
        raise SystemExit(f"{checkout}: predict failed: {done.stderr.strip()[-500:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, type=Path, help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", type=Path, default=ROOT / "data" / "models" / "conll2003")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": ROOT}
    print(
        f"# predict of one line, whole process: CPU {cpu_name()}, {os.cpu_count()} cores; model {args.model}"
    )
    print(f"load average at the start: {load()}\n")
    times: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "one.txt"
        text.write_text(LINE, encoding="utf-8")
        for round_ in range(args.rounds + 1):
            for name, checkout in sides.items():
                seconds = one_run(checkout, args.model, text)
                if round_:  # round 0 warms the file cache
                    times[name].append(seconds)
    before, after = (statistics.median(times[name]) for name in sides)
    print_table(
        ["checkout", "median s", "min s", "max s", "runs"],
        [
            [
                f"{name} ({sides[name]})",
                f"{statistics.median(t):.2f}",
                f"{min(t):.2f}",
                f"{max(t):.2f}",
                len(t),
            ]
            for name, t in times.items()
        ],
    )
    print(f"\nafter / before: {after / before:.2f} of the time ({before / after:.2f}x faster)")
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
