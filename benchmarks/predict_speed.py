"""``predict`` of two checkouts side by side in one run: one-line start-up of the whole process, and words/s.

    python -m benchmarks.predict_speed --before ../main [--after .] [--model data/models/conll2003]
        [--sentences 1000] [--rounds 3] [--threads 1]

Each checkout runs in its own processes with ``PYTHONPATH`` set to it, one after the other in every round, so
that a busy machine slows both alike:

- start-up: wall seconds of ``python -m ner_app predict --model M --threads T --input -`` on one line, the
  whole process (imports, loading the model, tagging, exit);
- throughput: a worker process loads the model, tags the sentences once to warm up, then once timed
  (``Predictor.tag`` in process, ``torch`` with ``T`` threads); words/s of the timed pass.

The sentences are the first ``--sentences`` of CoNLL-2003 dev (``../shared``), else the tiny corpus. Each
worker also prints a digest of its tags and of its scores: the table says whether the checkouts agree bit for
bit. Medians over the rounds; ratio = after / before for words/s, before / after for seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = "Angela Merkel met Emmanuel Macron in Berlin on Tuesday."


def worker(model: str, sentences_file: str, threads: int) -> None:
    """Runs with the checkout under test on ``PYTHONPATH``: prints one JSON line of timings and digests."""
    import torch

    try:
        from ner_app.predict.predictor import Predictor
    except ImportError:  # a checkout from before prediction had its own room
        from ner_app.serve.predictor import Predictor  # type: ignore[no-redef]

    torch.set_num_threads(threads)
    sentences = json.loads(Path(sentences_file).read_text(encoding="utf-8"))
    start = time.perf_counter()
    predictor = Predictor.from_export(model)
    loaded = time.perf_counter() - start
    predictor.tag(sentences)  # warm-up
    start = time.perf_counter()
    tagged = predictor.tag(sentences)
    seconds = time.perf_counter() - start
    tags = hashlib.sha256(json.dumps([t for t, _ in tagged]).encode()).hexdigest()[:12]
    scores = hashlib.sha256(json.dumps([s for _, s in tagged]).encode()).hexdigest()[:12]
    words = sum(len(s) for s in sentences)
    print(json.dumps({"load": loaded, "seconds": seconds, "words": words, "tags": tags, "scores": scores}))


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def startup(tree: Path, model: Path, threads: int) -> tuple[float, str]:
    """Wall seconds of one whole ``predict`` process on one line, and its output."""
    command = [sys.executable, "-m", "ner_app", "predict", "--model", str(model), "--threads", str(threads)]
    start = time.perf_counter()
    done = subprocess.run(
        [*command, "--input", "-"],
        input=LINE + "\n",
        capture_output=True,
        text=True,
        env=_env(tree),
        cwd=tree,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{tree}: predict failed:\n{done.stderr}")
    return seconds, done.stdout


def throughput(tree: Path, model: Path, sentences_file: Path, threads: int) -> dict[str, object]:
    command = [sys.executable, __file__, "--worker", str(model), str(sentences_file), str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(tree), cwd=tree)
    if done.returncode:
        raise RuntimeError(f"{tree}: worker failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def read_sentences(count: int) -> tuple[list[list[str]], str]:
    shared = Path(os.environ.get("NER_SHARED") or ROOT.parent / "shared") / "data" / "conll2003" / "valid.txt"
    path = shared if shared.is_file() else ROOT / "tests" / "data" / "tiny_conll" / "valid.txt"
    sentences: list[list[str]] = [[]]
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if sentences[-1]:
                sentences.append([])
        else:
            sentences[-1].append(line.split()[0])
    return [s for s in sentences if s][:count], str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout to compare against")
    parser.add_argument(
        "--after", type=Path, default=ROOT, help="the checkout under test (default: this one)"
    )
    parser.add_argument("--model", type=Path, default=ROOT / "data" / "models" / "conll2003")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    sentences, source = read_sentences(args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        sentences_file = Path(tmp) / "sentences.json"
        sentences_file.write_text(json.dumps(sentences), encoding="utf-8")
        starts: dict[str, list[float]] = {name: [] for name in trees}
        outputs: dict[str, set[str]] = {name: set() for name in trees}
        runs: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                seconds, out = startup(tree, args.model.resolve(), args.threads)
                starts[name].append(seconds)
                outputs[name].add(out)
                runs[name].append(throughput(tree, args.model.resolve(), sentences_file, args.threads))
    from benchmarks.common import cpu_name, print_table

    words = int(runs["after"][0]["words"])  # type: ignore[call-overload]
    load = os.getloadavg()[0]
    print(
        f"predict, {args.model}: {len(sentences)} sentences ({words:,} words) of {source}; {args.threads} "
        f"thread(s); {args.rounds} rounds, medians; CPU {cpu_name()}, load average {load:.1f}"
    )
    for name, tree in trees.items():
        print(f"- {name}: {tree}")

    def median(name: str, key: str) -> float:
        return statistics.median(float(run[key]) for run in runs[name])  # type: ignore[arg-type]

    rate = {name: words / median(name, "seconds") for name in trees}
    rows = [
        ("predict of one line, whole process (s)", *(statistics.median(starts[n]) for n in trees)),
        ("load the model in process (s)", *(median(n, "load") for n in trees)),
        ("tag the sentences in process (words/s)", *(rate[n] for n in trees)),
    ]
    print()
    print_table(
        ["", "before", "after", "ratio"],
        [
            (label, f"{b:,.2f}", f"{a:,.2f}", f"{(a / b if 'words/s' in label else b / a):.2f}x")
            for label, b, a in rows
        ],
    )
    same = {key: len({str(run[key]) for n in trees for run in runs[n]}) == 1 for key in ("tags", "scores")}
    one_line = len(outputs["before"] | outputs["after"]) == 1
    print(
        f"\nsame tags: {same['tags']}; same scores bit for bit: {same['scores']}; same one-line output: {one_line}"
    )


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
