"""The wall time of ``--help``: ``python -m ner_app --help`` and ``python -m ner_app COMMAND --help`` for every
registered command, each a fresh process, the median of ``--repeats`` runs (after one warm-up run each), beside
the interpreter's start-up alone (``python -c pass``), the floor of every row.

    nice python -m benchmarks.cli_help [--repeats 5]

``--help`` imports the command modules and the torch-free owners of their defaults, never torch, Lightning or
LitServe (``tests/cli/test_help.py``), so each should take little more than the start-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.5  # seconds


def wall_seconds(command: list[str], repeats: int) -> list[float]:
    """Wall seconds of ``command``, ``repeats`` times after one warm-up run."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    times = []
    for round_ in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run(command, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        if round_:  # the first run fills the file cache and the bytecode
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per command (default 5)")
    options = parser.parse_args()
    from ner_app.cli.registry import command_names

    python = sys.executable
    rows = [
        ("python -c pass", [python, "-c", "pass"]),
        ("ner-app --help", [python, "-m", "ner_app", "--help"]),
    ]
    rows += [(f"ner-app {n} --help", [python, "-m", "ner_app", n, "--help"]) for n in command_names()]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"median of {options.repeats} runs; goal: under {GOAL} s\n")
    print("| command | median s | min s | max s | under goal |")
    print("|---|---:|---:|---:|---|")
    for name, command in rows:
        times = wall_seconds(command, options.repeats)
        median = statistics.median(times)
        print(
            f"| {name} | {median:.3f} | {min(times):.3f} | {max(times):.3f} | {'yes' if median < GOAL else 'no'} |",
            flush=True,
        )
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
