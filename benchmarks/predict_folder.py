"""``predict --input FOLDER`` against the same text as one file: whole processes, the shipped tagger.

    nice python -m benchmarks.predict_folder [--files 1000] [--rounds 2] [--workers 2]

The text is the CoNLL-2003 test sentences as raw text lines (their tokens joined by spaces; the tiny corpus,
repeated, without ../shared), dealt in order into ``--files`` small files in 10 subfolders, and the same lines
in the same order as one file. Timed, in turn, ``--rounds`` times, each with ``--threads 1``: ``predict
--input one.txt --output one.jsonl``, ``predict --input FOLDER --output OUT`` (into a fresh folder), the same
again into the full folder (a re-run: every file skipped), and with ``--workers N`` when given. Prints the
median wall seconds, files/s and words/s with start-up included, the start-up alone (``predict`` of one line),
and whether the entities (file, line, offsets, type) of the folder run are those of the one file. Also the
machine, and the load average at the start and the end (a busy machine is slower for every row alike).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, SHARED, machine, print_table
from ner_app.text.conll import read_conll


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def entities(lines: list[str]) -> list[list[tuple[int, int, str]]]:
    return [[(e["start"], e["end"], e["type"]) for e in json.loads(line)["entities"]] for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0, help="also time --workers N (0: not)")
    args = parser.parse_args()
    data = SHARED / "data" / "conll2003" / "test.txt"
    if not data.is_file():
        data = ROOT / "tests" / "data" / "tiny_conll" / "test.txt"
    lines = [" ".join(s.tokens) for s in read_conll(data)]
    while len(lines) < 2 * args.files:
        lines += lines
    words = sum(len(line.split()) for line in lines)
    per_file = [
        lines[i * len(lines) // args.files : (i + 1) * len(lines) // args.files] for i in range(args.files)
    ]
    names = [f"d{i % 10}/f{i:05d}.txt" for i in range(args.files)]
    print(
        f"# predict over a folder: {args.files:,} files, {len(lines):,} lines, {words:,} words ({data}); "
        f"{machine()}; load average at the start: {load()}\n"
    )
    base = [sys.executable, "-m", "ner_app", "predict", "--threads", "1"]
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder, one, first = Path(tmp) / "in", Path(tmp) / "one.txt", Path(tmp) / "first.txt"
        order = sorted(range(args.files), key=lambda i: names[i])  # the folder's order: its sorted names
        for name, chunk in zip(names, per_file, strict=True):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text("".join(line + "\n" for line in chunk), encoding="utf-8")
        one.write_text("".join(line + "\n" for i in order for line in per_file[i]), encoding="utf-8")
        first.write_text(lines[0] + "\n", encoding="utf-8")
        runs = {
            "start-up (1 line)": ["--input", str(first), "--output", f"{tmp}/first.jsonl"],
            "one file": ["--input", str(one), "--output", f"{tmp}/one.jsonl"],
            "folder": ["--input", str(folder), "--output", f"{tmp}/out"],
            "folder again (all done)": ["--input", str(folder), "--output", f"{tmp}/out"],
        }
        if args.workers:
            runs[f"folder, --workers {args.workers}"] = [
                *["--input", str(folder), "--output", f"{tmp}/out_w", "--workers", str(args.workers)]
            ]
        for _ in range(args.rounds):
            for name, extra in runs.items():
                if name in ("folder", f"folder, --workers {args.workers}"):
                    shutil.rmtree(extra[3], ignore_errors=True)
                start = time.perf_counter()
                done = subprocess.run([*base, *extra], capture_output=True, cwd=ROOT)
                times.setdefault(name, []).append(time.perf_counter() - start)
                if done.returncode != 0:
                    raise SystemExit(f"{name}: {done.stderr.decode()[-500:]}")
        whole = (Path(tmp) / "one.jsonl").read_text(encoding="utf-8").splitlines()
        parts = [
            line for i in order for line in (Path(tmp) / "out" / f"{names[i]}.jsonl").read_text().splitlines()
        ]
        same = entities(whole) == entities(parts)
    up = statistics.median(times["start-up (1 line)"])
    rows = []
    for name, t in times.items():
        wall = statistics.median(t)
        tagged = name in ("one file", "folder") or name.startswith("folder, --workers")
        rate = (
            [
                f"{args.files / wall:,.1f}",
                f"{words / wall:,.0f}",
                f"{words / (wall - up):,.0f}" if wall > up else "",
            ]
            if tagged
            else ["", "", ""]
        )
        rows.append([name, f"{wall:.2f}", *rate, len(t)])
    print_table(["run", "median wall s", "files/s", "words/s", "words/s, start-up taken off", "runs"], rows)
    print(f"\nthe folder's entities are the one file's: {same}; load average at the end: {load()}")


if __name__ == "__main__":
    main()
