"""How long ``train`` takes to refuse a run it can refuse without torch, as a whole process.

    python -m benchmarks.early_errors [--repeats 5]

Each case is a real ``python -m ner_app train`` on ``configs/tiny.yaml`` with one mistake (a data folder that
does not exist, a hub name offline and not cached, a batch size of 0, a biLM file that does not exist); it must
end with exit code 2 and one ``error:`` line. Beside them, in the same rounds (``common.interleaved``: one after
another, so that a busy machine slows all alike), the floor of the old order, where torch and Lightning were
imported before these checks: ``python -c "import torch, pytorch_lightning"``, and the interpreter alone.
Prints a markdown table of wall seconds (median and slowest), each case's share of the Lightning import and its
CPU seconds (user + system: about the wall time of an idle machine), with the load average before and after:
the target (under 3 s) is for an idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, cpu_name, print_table

TARGET_S = 3.0


def cases(tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (arguments after ``python``, extra environment)."""
    train = ["-m", "ner_app", "train", "--config", "configs/tiny.yaml", f"output_dir={tmp / 'run'}"]
    return {
        "data.dir does not exist": ([*train, f"data.dir={tmp / 'nowhere'}"], {}),
        "data.hub_name offline, not cached": (
            [*train, "data.dir=null", "data.hub_name=someone/not_cached"],
            {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf")},
        ),
        "data.batch_size=0": ([*train, "data.batch_size=0"], {}),
        "elmo.options does not exist": ([*train, f"elmo.options={tmp / 'none.json'}"], {}),
    }


def timed(argv: list[str], env: dict[str, str], expect_error: bool) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process; an error case must print exactly one ``error:``
    line and exit 2. The CPU time is what a busy machine does not stretch: near the wall time when idle."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if expect_error:
        lines = done.stderr.strip().splitlines()
        if done.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
            raise RuntimeError(
                f"{argv}: expected exit 2 and one error line, got {done.returncode}: {done.stderr}"
            )
    elif done.returncode != 0:
        raise RuntimeError(f"{argv}: exit {done.returncode}: {done.stderr}")
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="rounds (each runs every row once)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        rows: dict[str, tuple[list[str], dict[str, str], bool]] = {
            name: (argv, env, True) for name, (argv, env) in cases(tmp).items()
        }
        rows["(floor of the old order) import torch, pytorch_lightning"] = (
            ["-c", "import torch, pytorch_lightning"],
            {},
            False,
        )
        rows["(interpreter) python -c pass"] = (["-c", "pass"], {}, False)
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.repeats):
            for name, (argv, env, error) in rows.items():
                wall, used = timed(argv, env, error)
                times[name].append(wall)
                cpu[name].append(used)
        load_after = os.getloadavg()
        if (tmp / "run").exists():
            raise RuntimeError("a refused run created its output_dir")
    floor = sorted(times["(floor of the old order) import torch, pytorch_lightning"])
    floor_median = floor[len(floor) // 2]
    print(
        f"CPU {cpu_name()}, {os.cpu_count()} cores; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {args.repeats} rounds\n"
    )
    header = [
        "case",
        "median s",
        "slowest s",
        f"under {TARGET_S:g} s",
        "of the torch+Lightning import",
        "CPU s (median)",
    ]

    def row(name: str) -> list[object]:
        values, used = sorted(times[name]), sorted(cpu[name])
        median = values[len(values) // 2]
        under = "yes" if values[-1] < TARGET_S else "no"
        return [
            name,
            f"{median:.2f}",
            f"{values[-1]:.2f}",
            under,
            f"{median / floor_median:.0%}",
            f"{used[len(used) // 2]:.2f}",
        ]

    print_table(header, (row(name) for name in rows))


if __name__ == "__main__":
    main()
