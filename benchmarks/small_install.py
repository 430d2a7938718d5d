"""The torch-free install (``pip install ner_app``) beside the full one, and an ONNX folder beside the export.

    python -m benchmarks.small_install --small /tmp/onnxvenv --full /tmp/fullvenv [--repeats 5] [--out DIR]

``--small`` and ``--full`` are virtual environments made beforehand (docs/deploying.md#the-small-install):

    python -m venv /tmp/onnxvenv && /tmp/onnxvenv/bin/pip install ".[serve]"
    python -m venv /tmp/fullvenv && /tmp/fullvenv/bin/pip install torch==2.13.0 ".[train,serve]"

Measured, and written to ``--out`` (default ``results/deploy``) as ``DATE_small_install.{json,md}``:

- size: ``du`` of each environment's site-packages, and the largest packages of the small one;
- start-up: a one-line ``echo ... | ner-app predict --model M --input -``, ``--repeats`` times each, its wall time
  and peak RSS (``/usr/bin/time -v``), median: the ONNX folder in the small environment (no torch there), and the
  torch export and the ONNX folder in this environment (torch installed; the ONNX folder never imports it);
- int8 or fp32: ``evaluate --json --predictions`` of the fp32 and int8 ONNX folders (and the export) on
  CoNLL-2003 dev and test (``NER_SHARED`` or ../shared; the tiny corpus without it), their F1 and the share of
  tokens whose int8 tag equals the fp32 one.

The ONNX folders are exported from ``--model`` (default: the shipped tagger) into a temporary folder first.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NER_SHARED") or ROOT.parent / "shared")
SHIPPED = ROOT / "data" / "models" / "conll2003"
LINE = "Angela Merkel met Emmanuel Macron in Berlin.\n"


def site_packages(venv: Path) -> Path:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def disk_mib(path: Path) -> float:
    done = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0]) / 1024


def largest(path: Path, count: int = 8) -> list[tuple[str, float]]:
    sizes = [(p.name, disk_mib(p)) for p in path.iterdir() if p.is_dir() and not p.name.endswith("-info")]
    return sorted(sizes, key=lambda s: -s[1])[:count]


def timed_predict(python: str, model: Path, cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, peak RSS MiB, output) of one ``predict`` of ``LINE`` under ``/usr/bin/time -v``."""
    done = subprocess.run(
        ["/usr/bin/time", "-v", python, "-m", "ner_app", "predict", "--model", str(model), "--input", "-"],
        input=LINE,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"predict failed ({python}, {model}): {done.stderr[-2000:]}")
    wall = re.search(
        r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr
    )
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert wall and rss, done.stderr[-1000:]
    hours, minutes, seconds = int(wall.group(1) or 0), int(wall.group(2)), float(wall.group(3))
    return hours * 3600 + minutes * 60 + seconds, int(rss.group(1)) / 1024, done.stdout


def imports_torch(python: str, cwd: Path, env: dict[str, str]) -> bool:
    done = subprocess.run(
        [python, "-c", "import importlib.util; print(importlib.util.find_spec('torch') is not None)"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )
    return done.stdout.strip() == "True"


def evaluate(model: Path, gold: Path, predictions: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "ner_app", "evaluate", "--model", str(model), "--gold", str(gold)]
        + ["--json", "--threads", "1", "--predictions", str(predictions), "--overwrite"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    return json.loads(done.stdout)


def predicted_tags(path: Path) -> list[str]:
    return [line.split()[-1] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=Path, required=True, help="the torch-free environment")
    parser.add_argument("--full", type=Path, help="a full install's environment (size only)")
    parser.add_argument("--model", type=Path, default=SHIPPED)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "deploy")
    args = parser.parse_args(argv)
    from benchmarks.common import cpu_name

    record: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"CPU {cpu_name()}, {os.cpu_count()} cores",
        "load_before": load(),
    }
    small = site_packages(args.small)
    record["size_mib"] = {"small": round(disk_mib(small), 1)}
    record["small_largest_mib"] = {name: round(size, 1) for name, size in largest(small)}
    if args.full:
        record["size_mib"]["full"] = round(disk_mib(site_packages(args.full)), 1)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folders = {"fp32": tmp / "fp32", "int8": tmp / "int8"}
        for kind, folder in folders.items():
            quantize = ["--quantize", "int8"] if kind == "int8" else []
            subprocess.run(
                [sys.executable, "-m", "ner_app", "export", "--onnx", *quantize, "--model", str(args.model)]
                + ["--output", str(folder)],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                check=True,
                capture_output=True,
            )
        clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        here = {**os.environ, "PYTHONPATH": str(ROOT)}
        arms = {  # name: (python, model, working directory, environment)
            "small env, ONNX fp32": (str(args.small / "bin" / "python"), folders["fp32"], tmp, clean),
            "main env, torch export": (sys.executable, args.model, ROOT, here),
            "main env, ONNX fp32": (sys.executable, folders["fp32"], ROOT, here),
        }
        assert not imports_torch(*arms["small env, ONNX fp32"][0:1], tmp, clean), "torch is in --small"
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        outputs: dict[str, str] = {}
        for _ in range(args.repeats):  # interleaved: a busy moment of the machine falls on every arm alike
            for name, (python, model, cwd, env) in arms.items():
                wall, rss, out = timed_predict(python, model, cwd, env)
                runs[name].append((wall, rss))
                outputs[name] = out
        record["predict_one_line"] = {
            name: {
                "wall_s_median": round(statistics.median(w for w, _ in found), 2),
                "peak_rss_mib_median": round(statistics.median(r for _, r in found), 1),
                "wall_s": [round(w, 2) for w, _ in found],
            }
            for name, found in runs.items()
        }
        record["same_output"] = len(set(outputs.values())) == 1
        splits = {name: SHARED / "data" / "conll2003" / f"{name}.txt" for name in ("valid", "test")}
        if not all(p.is_file() for p in splits.values()):
            splits = {
                name: ROOT / "tests" / "data" / "tiny_conll" / f"{name}.txt" for name in ("valid", "test")
            }
        record["gold"] = {name: str(p) for name, p in splits.items()}
        quality: dict[str, Any] = {}
        for split, gold in splits.items():
            tags: dict[str, list[str]] = {}
            row: dict[str, Any] = {}
            for name, model in (("torch", args.model), ("fp32", folders["fp32"]), ("int8", folders["int8"])):
                predictions = tmp / f"{split}_{name}.txt"
                row[f"f1_{name}"] = round(evaluate(model, gold, predictions)["f1"], 2)
                tags[name] = predicted_tags(predictions)
            same = sum(a == b for a, b in zip(tags["fp32"], tags["int8"], strict=True))
            row["int8_fp32_token_agreement"] = round(same / len(tags["fp32"]), 5)
            row["fp32_torch_tags_equal"] = tags["fp32"] == tags["torch"]
            quality[split] = row
        record["int8_vs_fp32"] = quality
    record["load_after"] = load()
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"{datetime.date.today().isoformat()}_small_install"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    stem.with_suffix(".md").write_text(markdown(record), encoding="utf-8")
    print(markdown(record))
    return 0


def markdown(record: dict[str, Any]) -> str:
    size = record["size_mib"]
    lines = [
        f"# The small install, {record['date']}",
        "",
        f"{record['machine']}; {record['load_before']} before, {record['load_after']} after "
        "(other jobs ran on the machine: compare the arms, interleaved, rather than the absolute times).",
        "",
        "| install | site-packages |",
        "|---|---:|",
        f'| core + serve (`pip install ".[serve]"`, no torch) | {size["small"]:,.0f} MiB |',
    ]
    if "full" in size:
        lines.append(f'| full (`pip install torch==2.13.0 ".[train,serve]"`) | {size["full"]:,.0f} MiB |')
    big = ", ".join(f"{name} {mib:.0f}" for name, mib in record["small_largest_mib"].items())
    lines += ["", f"Largest in the small one (MiB): {big}.", ""]
    lines += [
        "| `echo ... \\| ner-app predict --model M --input -` | wall s (median) | peak RSS MiB (median) | all runs, s |",
        "|---|---:|---:|---|",
    ]
    for name, found in record["predict_one_line"].items():
        runs = ", ".join(f"{w:.2f}" for w in found["wall_s"])
        lines.append(
            f"| {name} | {found['wall_s_median']:.2f} | {found['peak_rss_mib_median']:.0f} | {runs} |"
        )
    lines += ["", f"The same output from every arm: {record['same_output']}.", ""]
    lines += [f"Gold files: {', '.join(record['gold'].values())}.", ""]
    lines += [
        "| split | F1 torch | F1 ONNX fp32 | F1 ONNX int8 | int8 tags = fp32 tags (tokens) | fp32 tags = torch tags |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for split, row in record["int8_vs_fp32"].items():
        lines.append(
            f"| {split} | {row['f1_torch']:.2f} | {row['f1_fp32']:.2f} | {row['f1_int8']:.2f} | "
            f"{100 * row['int8_fp32_token_agreement']:.2f}% | {row['fp32_torch_tags_equal']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
