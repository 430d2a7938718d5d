"""``predict`` of one line as a whole process, start-up and loading included: two checkouts side by side.

    nice python -m benchmarks.start_up --before CHECKOUT [--rounds 5] [--model EXPORT]

Runs ``python -m ner_app predict --input ONE_LINE --threads 1`` with each checkout's code (``PYTHONPATH``), on
the same export (default: this checkout's shipped tagger), one process at a time in turn, so that a busy machine
slows both alike; the first round of each is a warm-up (file cache, and the frozen-row cache of versions that
keep one) and left out. Each round also runs the same command through a small driver that times its phases in
the process: interpreter start and exit, imports (the CLI and the predictor modules: torch, and Lightning in
versions that import it), load (``Predictor.from_export``: the export read, checked and built), and the rest
(argument parsing, imports done on the way, tagging, output). Prints the median wall seconds, the median CPU
seconds (user + system: on a busy machine the closer estimate of an idle machine's wall time, since predict
runs one thread), the phases, the ratios, and the load average at the start and the end.

Both checkouts use one fresh ``XDG_CACHE_HOME``, so the first ``after`` run, reported apart, is the one that
fills the cache (a user's first ``predict`` after installing or upgrading the GloVe package). Bytecode is
written to a temporary ``PYTHONPYCACHEPREFIX`` on the warm-up round (``PYTHONDONTWRITEBYTECODE`` is dropped),
as an installed package has it, without writing into either checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, cpu_name, print_table

LINE = "Angela Merkel met Emmanuel Macron in Berlin.\n"
PHASES = ("start", "imports", "load", "rest")
# The phases of one predict, timed inside the process (the same CLI call as the plain run).
DRIVER = """
import json, sys, time
t0 = time.perf_counter()
import ner_app.cli.commands as commands
try:
    from ner_app.predict.predictor import Predictor
except ImportError:  # a checkout from before prediction had its own room
    from ner_app.serve.predictor import Predictor
t1 = time.perf_counter()
load = []
build = Predictor.from_export.__func__
def timed(cls, *args, **kwargs):
    start = time.perf_counter()
    try:
        return build(cls, *args, **kwargs)
    finally:
        load.append(time.perf_counter() - start)
Predictor.from_export = classmethod(timed)
code = commands.main(sys.argv[1:])
t2 = time.perf_counter()
sys.stdout.flush()
print("PHASES " + json.dumps({"imports": t1 - t0, "load": sum(load), "main": t2 - t1}), file=sys.stderr)
sys.exit(code)
"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_run(checkout: Path, arguments: list[str], env: dict[str, str], phases: bool) -> dict[str, float]:
    """Wall seconds of one whole process (``wall``), and with ``phases`` the phases as the driver saw them."""
    head = [sys.executable, "-c", DRIVER] if phases else [sys.executable, "-m", "ner_app"]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [*head, *arguments],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
    if done.returncode != 0 or '"Angela Merkel"' not in done.stdout:
        raise SystemExit(f"{checkout}: predict failed: {done.stderr.strip()[-500:]}")
    if not phases:
        return {"wall": seconds, "cpu": cpu}
    found = json.loads(done.stderr.rsplit("PHASES ", 1)[1].splitlines()[0])
    rest = found["main"] - found["load"]
    start_s = seconds - found["imports"] - found["main"]  # interpreter start, site, exit
    return {
        "wall": seconds,
        "start": start_s,
        "imports": found["imports"],
        "load": found["load"],
        "rest": rest,
    }


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
    plain: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}  # user + system seconds: less hit by load
    phased: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "one.txt"
        text.write_text(LINE, encoding="utf-8")
        # bytecode kept as an installed package keeps it (written on the warm-up round), in a folder of its own:
        # no checkout is written to, and PYTHONDONTWRITEBYTECODE would compile every module at every start
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
            "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pyc"),
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        arguments = ["predict", "--model", str(args.model.resolve()), "--input", str(text), "--threads", "1"]
        first = 0.0
        for round_ in range(args.rounds + 1):
            for name, checkout in sides.items():
                run = one_run(checkout, arguments, env, phases=False)
                if not round_:  # round 0 warms the file cache (and fills the frozen-row cache)
                    first = run["wall"] if name == "after" else first
                    continue
                plain[name].append(run["wall"])
                cpu[name].append(run["cpu"])
                phased[name].append(one_run(checkout, arguments, env, phases=True))
    print_table(
        ["checkout", "median s", "min s", "max s", "median CPU s", "runs"],
        [
            [
                f"{name} ({sides[name]})",
                f"{statistics.median(t):.2f}",
                f"{min(t):.2f}",
                f"{max(t):.2f}",
                f"{statistics.median(cpu[name]):.2f}",
                len(t),
            ]
            for name, t in plain.items()
        ],
    )
    print(f"\nfirst run of after, the frozen-row cache still empty: {first:.2f} s")
    print(
        "\nphases, median s of the driver runs (start: interpreter start and exit; rest: parsing, tagging, output):\n"
    )
    medians = {
        name: {k: statistics.median(r[k] for r in runs) for k in ("wall", *PHASES)}
        for name, runs in phased.items()
    }
    print_table(
        ["checkout", *PHASES, "wall"],
        [[name, *(f"{m[k]:.2f}" for k in PHASES), f"{m['wall']:.2f}"] for name, m in medians.items()],
    )
    print(
        "| after / before | "
        + " | ".join(f"{medians['after'][k] / medians['before'][k]:.2f}" for k in (*PHASES, "wall"))
        + " |"
    )
    before, after = (statistics.median(plain[name]) for name in sides)
    print(f"\nafter / before: {after / before:.2f} of the time ({before / after:.2f}x faster)")
    cpu_before, cpu_after = (statistics.median(cpu[name]) for name in sides)
    print(f"CPU seconds, after / before: {cpu_after / cpu_before:.2f} ({cpu_before / cpu_after:.2f}x fewer)")
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
