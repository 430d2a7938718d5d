"""``predict --workers N`` against one process, whole processes side by side, on a large raw-text input.

    nice python -m benchmarks.predict_workers [--workers 2] [--copies 2] [--rounds 2] [--format jsonl]

The input is the CoNLL-2003 test sentences as raw text lines (their tokens joined by spaces; the tiny corpus
without ../shared), repeated ``--copies`` times. Timed, in turn, ``--rounds`` times: ``predict --threads 1``
(one process, one thread) and ``predict --workers N`` (N processes of one thread), the shipped tagger, start-up
included, each on the input and on its first line alone (the start-up). The outputs must be byte-identical.
Prints the median wall seconds, lines/s, the CPU seconds of all the run's processes (the main process, the
fork server and the workers, which the command reaps), the start-up, and two speed-ups: whole processes, and
with each command's start-up taken off (what a larger input approaches). Also the load average and the
machine's parallel capacity (``parallel_capacity``: what two processes get done against one) at the start and
the end: on a machine whose cores other work fills, the workers share them with it, and the speed-up falls
short of what idle cores give.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, SHARED, cpu_name, print_table
from ner_app.text.conll import read_conll


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_seconds() -> float:
    """User and system seconds of this process's finished children (and theirs, as each reaps its own)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def spin(_: int) -> float:
    """A fixed amount of pure-Python work; its wall seconds."""
    start, total = time.perf_counter(), 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - start


def parallel_capacity() -> float:
    """How many times the work of one process the machine does per second with two processes at once: 2.0 on
    two idle cores, about 1.0 when other work already fills them (the share a process gets does not grow)."""
    context = multiprocessing.get_context("forkserver")
    with context.Pool(2) as pool:
        pool.map(spin, range(2))  # start-up
        one = pool.map(spin, range(1))[0]
        two = max(pool.map(spin, range(2)))
    return 2 * one / two


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--format", default="jsonl")
    args = parser.parse_args()
    data = SHARED / "data" / "conll2003" / "test.txt"
    if not data.is_file():
        data = ROOT / "tests" / "data" / "tiny_conll" / "test.txt"
    lines = [" ".join(s.tokens) for s in read_conll(data)] * args.copies
    base = [sys.executable, "-m", "ner_app", "predict", "--format", args.format]
    runs = {
        "1 process, 1 thread": ["--threads", "1"],
        f"--workers {args.workers}": ["--workers", str(args.workers)],
    }
    print(
        f"# predict --workers: {len(lines):,} lines ({data}, {args.copies} copies), CPU {cpu_name()}, "
        f"{os.cpu_count()} cores"
    )
    print(
        f"load average at the start: {load()}; parallel capacity {parallel_capacity():.2f}x of one process\n"
    )
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    start_up: dict[str, list[float]] = {name: [] for name in runs}
    with tempfile.TemporaryDirectory() as tmp:
        source, first_line = Path(tmp) / "in.txt", Path(tmp) / "one.txt"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        first_line.write_text(lines[0] + "\n", encoding="utf-8")
        outputs: dict[str, bytes] = {}
        for _ in range(args.rounds):
            for name, extra in runs.items():
                for path, wall in ((first_line, start_up[name]), (source, times[name])):
                    used = cpu_seconds()
                    start = time.perf_counter()
                    done = subprocess.run(
                        [*base, "--input", str(path), *extra], capture_output=True, cwd=ROOT
                    )
                    wall.append(time.perf_counter() - start)
                    if done.returncode != 0:
                        raise SystemExit(f"{name}: {done.stderr.decode()[-500:]}")
                cpu[name].append(cpu_seconds() - used)  # the last run's: the whole input
                outputs[name] = done.stdout
    first, second = outputs.values()
    one, many = (statistics.median(t) for t in times.values())
    one_up, many_up = (statistics.median(t) for t in start_up.values())
    print_table(
        ["run", "median wall s", "lines/s", "CPU s, all processes", "start-up wall s (1 line)", "runs"],
        [
            [
                name,
                f"{statistics.median(t):.1f}",
                f"{len(lines) / statistics.median(t):,.0f}",
                f"{statistics.median(cpu[name]):.1f}",
                f"{statistics.median(start_up[name]):.1f}",
                len(t),
            ]
            for name, t in times.items()
        ],
    )
    print(f"\nspeed-up: {one / many:.2f}x; outputs byte-identical: {first == second}")
    print(f"speed-up with each start-up taken off: {(one - one_up) / (many - many_up):.2f}x")
    print(f"load average at the end: {load()}; parallel capacity {parallel_capacity():.2f}x of one process")


if __name__ == "__main__":
    main()
