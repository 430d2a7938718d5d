"""The distillation table: teacher, student and the fast tagger on gold alone, over seeds, and their speed.

    python -m benchmarks.distillation --teacher data/models/conll2003_minilm --gold-runs runs/gold \
        --student-runs runs/student --name "MiniLM, 100k tokens" --out results/distillation/NAME

Reads each seed's ``metrics.json`` under ``--gold-runs`` and ``--student-runs`` (``train --seeds`` and
``distill --seeds`` folders), scores the teacher exports with ``evaluate``'s code on the dev and test files
(``--dev``, ``--test``; a teacher is the same on every student seed), and times words/s of the teacher, of
one student and of one gold-only export of the student's recipe (``--fast-export``, or the first gold run's
export) at ``--threads`` threads, interleaved in rounds so that a busy machine slows all alike (``benchmark
speed``'s measurement). ``--seeds`` keeps the same seed folders in every arm. Writes ``NAME.json`` and
``NAME.md``: mean +/- std of dev and test F1 per arm, each seed's epochs, the student's words/s over the
gold-only tagger's, and the share of the teacher's test-F1 gain over the gold-only tagger that the student
keeps, (student - gold) / (teacher - gold), from the seed means. Nothing here chooses anything on test.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import SHARED, machine
from ner_app.files import write_text
from ner_app.predict.evaluate import evaluate_file
from ner_app.predict.predictor import Predictor
from ner_app.predict.speed import measure_speed


def seed_scores(folder: Path, seeds: list[str] | None = None) -> list[dict[str, float]]:
    """dev and test F1 of every ``seedN/metrics.json`` under ``folder`` (only ``seeds``' folders, if given)."""
    runs = sorted(folder.glob("seed*/metrics.json"))
    if seeds is not None:
        runs = [path for path in runs if path.parent.name in seeds]
    if not runs:
        raise SystemExit(f"{folder}: no seed*/metrics.json")
    scores = []
    for path in runs:
        metrics = json.loads(path.read_text())
        score = {"seed": path.parent.name, "dev": metrics["dev"]["f1"], "test": metrics["test"]["f1"]}
        scores.append(score | epochs_of(path.parent))
    return scores


def epochs_of(run: Path) -> dict[str, int]:
    """The epochs a run validated and its best one (1-based), from its metrics log (a run folder's
    ``logs/metrics.csv``, or a record's ``metrics.csv``); nothing when it has none."""
    for log in (run / "logs" / "metrics.csv", run / "metrics.csv"):
        if log.is_file():
            with log.open(newline="") as rows:
                val = [
                    (int(r["epoch"]), int(r["step"]), float(r["val_f1"]))
                    for r in csv.DictReader(rows)
                    if r.get("val_f1")
                ]
            if len(val) > 1 and val[-1][1] == val[-2][1] + 1:
                val = val[:-1]  # the best checkpoint validated again after training, one step on
            if val:
                best = max(val, key=lambda row: row[2])  # the first epoch of the highest dev F1
                return {"epochs": val[-1][0] + 1, "best_epoch": best[0] + 1}
    return {}


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def words_per_second(
    exports: dict[str, Path], lines: list[str], threads: int, rounds: int
) -> dict[str, float]:
    """Words/s of each export, the median over ``rounds`` interleaved measurements."""
    torch.set_num_threads(threads)
    predictors = {name: Predictor.from_export(path) for name, path in exports.items()}
    rates: dict[str, list[float]] = {name: [] for name in exports}
    for _ in range(rounds):
        for name, predictor in predictors.items():
            rates[name].append(measure_speed(predictor.tag, lines, batches=10, warmup=2).mean)
    return {name: statistics.median(values) for name, values in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--teacher", action="append", required=True, help="teacher export (repeat: an ensemble)"
    )
    parser.add_argument("--teacher-name", default="teacher")
    parser.add_argument("--gold-runs", type=Path, required=True, help="the fast tagger on gold alone, seed*/")
    parser.add_argument("--student-runs", type=Path, required=True, help="the distilled students, seed*/")
    parser.add_argument("--name", required=True, help="the table's caption")
    parser.add_argument("--dev", type=Path, default=SHARED / "data/conll2003/valid.txt")
    parser.add_argument("--test", type=Path, default=SHARED / "data/conll2003/test.txt")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--rounds", type=int, default=15, help="interleaved timing rounds (single ones vary +/-10%%)"
    )
    parser.add_argument(
        "--fast-export",
        type=Path,
        help="a gold-only export of the student's recipe to time (default: the first gold run's, if it has one)",
    )
    parser.add_argument(
        "--seeds", help="comma-separated seed folders every arm keeps (seed1,seed2,seed3); default: all"
    )
    parser.add_argument("--out", type=Path, required=True, help="NAME: writes NAME.json and NAME.md")
    args = parser.parse_args()

    seeds = args.seeds.split(",") if args.seeds else None
    gold, student = seed_scores(args.gold_runs, seeds), seed_scores(args.student_runs, seeds)
    teacher_scores = {}
    for split, path in (("dev", args.dev), ("test", args.test)):
        if len(args.teacher) == 1:
            result, _ = evaluate_file(Predictor.from_export(args.teacher[0]), path)
            teacher_scores[split] = result["f1"]
        else:
            teacher_scores[split] = None  # an ensemble has no single tagger to score: its members are listed
    lines = [" ".join(line.split()[0] for line in block.splitlines()) for block in
             args.dev.read_text().split("\n\n") if block.strip() and not block.startswith("-DOCSTART-")][:1000]  # fmt: skip
    exports = {
        args.teacher_name: Path(args.teacher[0]),
        "student": args.student_runs / student[0]["seed"] / "export",
    }
    fast = args.fast_export or args.gold_runs / gold[0]["seed"] / "export"
    if (fast / "tagger.json").is_file():  # a gold-only export of the student's recipe, timed beside it
        exports["fast tagger, gold alone"] = fast
    started = time.time()
    speed = words_per_second(exports, lines, args.threads, args.rounds)
    record: dict[str, Any] = {
        "name": args.name,
        "machine": machine(),
        "teachers": args.teacher,
        "teacher": teacher_scores,
        "gold": gold,
        "student": student,
        "words_per_s": speed,
        "threads": args.threads,
        "speed_seconds": round(time.time() - started, 1),
    }
    g, s = mean_std([x["test"] for x in gold]), mean_std([x["test"] for x in student])
    rows = [
        "| arm | seeds | dev F1 | test F1 | words/s |",
        "|---|---|---:|---:|---:|",
    ]
    if teacher_scores["test"] is not None:
        rows.append(f"| teacher: {args.teacher_name} | 1 | {teacher_scores['dev']:.2f} | {teacher_scores['test']:.2f} "
                    f"| {speed[args.teacher_name]:,.0f} |")  # fmt: skip
    for label, scores, rate in (
        ("fast tagger, gold alone", gold, speed.get("fast tagger, gold alone")),
        ("student", student, speed["student"]),
    ):
        dev, test = mean_std([x["dev"] for x in scores]), mean_std([x["test"] for x in scores])
        shown = f"{rate:,.0f}" if rate is not None else "(the student's shape)"
        rows.append(f"| {label} | {len(scores)} | {dev[0]:.2f} +/- {dev[1]:.2f} | {test[0]:.2f} +/- {test[1]:.2f} "
                    f"| {shown} |")  # fmt: skip
    if "fast tagger, gold alone" in speed:
        ratio = speed["student"] / speed["fast tagger, gold alone"]
        record["student_speed_ratio"] = ratio
        rows.append(f"\nThe student predicts at {ratio:.2f}x the gold-only tagger's words/s "
                    f"({exports['fast tagger, gold alone']}).")  # fmt: skip
    if teacher_scores["test"] is not None and teacher_scores["test"] != g[0]:
        kept = (s[0] - g[0]) / (teacher_scores["test"] - g[0])
        record["gain_kept"] = kept
        rows.append("")
        rows.append(f"The student keeps {100 * kept:.0f}% of the teacher's test-F1 gain over gold alone "
                    f"({s[0] - g[0]:+.2f} of {teacher_scores['test'] - g[0]:+.2f}, 3-seed means).")  # fmt: skip
    for label, scores in (("gold alone", gold), ("student", student)):
        runs = [f"{x['seed']} {x['epochs']} ({x['best_epoch']})" for x in scores if "epochs" in x]
        if runs:
            rows.append(f"\nEpochs validated (best epoch), {label}: {', '.join(runs)}.")
    text = f"# {args.name}\n\n{machine()}, {args.threads} thread(s) for words/s.\n\n" + "\n".join(rows) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out.with_suffix(".json"), json.dumps(record, indent=2) + "\n")
    write_text(args.out.with_suffix(".md"), text)
    print(text)


if __name__ == "__main__":
    main()
