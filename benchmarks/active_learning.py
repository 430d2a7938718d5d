"""Active learning on CoNLL-2003: does choosing the sentences to annotate beat choosing them at random?

    python -m benchmarks.active_learning --out runs/active_learning  # long job: 78 trainings, about 6 CPU hours
    python -m benchmarks.active_learning --smoke --out runs/active_learning_smoke  # about a minute: tiny corpus

For each seed, 500 training sentences drawn at random are the labelled set of round 0. Each strategy
(least-confidence, margin, entropy, mnlp; ``ner-app select``'s, ``tagger/crf/uncertainty.py``) and random selection then
run 5 rounds: the model of the previous round scores the rest of the training set (the pool) and the 500 it
ranks first join the labelled set with their gold tags. Every round trains from scratch, with
``ner-app train --config configs/conll2003_baseline.yaml`` and the same epoch budget (``--epochs``,
``trainer.threads=1``); round 0 is shared by all strategies of a seed. Writes ``OUT/results.json`` (every run's
dev and test F1, labelled sentences and tokens), ``OUT/results.md`` (a markdown table of mean +/- sample std over
the seeds, also printed) and ``OUT/active_learning.png`` (test F1 against labelled sentences), and states the
share of random's round-5 labels at which the best strategy reaches random's round-5 test F1 (linear between
rounds). A run folder with its metrics.json is reused, so an interrupted benchmark continues where it stopped.

Cost, measured with trainer.threads=1 on the 2-core development machine while other jobs shared it (so wall
time ran about 5 times the CPU time): the round-0 training (500 sentences, 10 epochs, then dev and test
evaluated) used 111 s of CPU (9.5 min of wall time) and reached dev F1 49.40, test F1 51.04; scoring the
13,541-sentence pool with margin used 19 s of CPU (75 s wall). An epoch is about a quarter training steps, which
grow with the labelled tokens, and three quarters dev validation, which does not. Margin's 500 sentences had 32.4
tokens on average against the pool's 14.5 (least confidence and margin, as probabilities of whole paths, favour
long sentences), which makes its later rounds costlier (entropy and mnlp pick short ones: the 6-epoch mnlp arm took
22 minutes of wall time for 3 seeds side by side, least confidence's about 1.5 hours). Estimate at the default 10 epochs: about 2 hours of CPU per seed (26 trainings, 20 pool
scorings), about 6 hours for 3 seeds on free cores; about 5 times that on a
shared machine. Seeds run in separate processes side by side (``--seeds 1``, ``--seeds 2``, ``--seeds 3`` with
one ``--out``); a last ``--seeds 1 2 3`` then reuses every run and writes the results of all three. The recorded
runs (docs/results.md, ``--epochs 6 ... -- data.batch_size=16``, the three seeds side by side): random and margin
took 1 hour 52 minutes of wall time on the 2 cores, shared with other jobs. ``--collect`` trains nothing and
reports the rounds already finished under ``--out``.

``--smoke`` runs the same loop on tests/data/tiny_conll (train.txt 24 times over) with the tiny config, one
epoch, one seed, 10 initial sentences and 2 rounds of 10.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, SHARED, SPLIT_FILES, spread, tiny_corpus_copy
from ner_app.cli.commands import main as cli_main
from ner_app.files import write_bytes, write_text
from ner_app.text.conll import Sentence, read_conll

STRATEGIES = ("random", "least-confidence", "margin", "entropy", "mnlp")


def write_labelled(source: Path, target: Path, sentences: list[Sentence], chosen: list[int]) -> None:
    """A data folder whose train.txt holds the ``chosen`` training sentences (gold tags, token and tag columns)
    and whose dev and test files are the source's."""
    target.mkdir(parents=True, exist_ok=True)
    blocks = [
        "\n".join(f"{t} {g}" for t, g in zip(sentences[i].tokens, sentences[i].tags, strict=True))
        for i in chosen
    ]
    write_text(target / "train.txt", "\n\n".join(blocks) + "\n")
    for name in SPLIT_FILES[1:]:
        if not (target / name).exists():
            write_bytes(target / name, (source / name).read_bytes())


def train_round(config: Path, data: Path, out: Path, seed: int, extra: list[str]) -> dict[str, float]:
    """One training (reused when ``out`` already holds its metrics.json): dev and test F1."""
    if not (out / "metrics.json").is_file():
        args = [
            "train",
            "--config",
            str(config),
            f"seed={seed}",
            f"data.dir={data}",
            f"output_dir={out}",
            *extra,
        ]
        if cli_main(args) != 0:
            raise SystemExit(f"training {out} failed (see above)")
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    return {"dev": metrics["dev"]["f1"], "test": metrics["test"]["f1"]}


def choose(
    export: Path, sentences: list[Sentence], pool: list[int], k: int, strategy: str, seed: int
) -> list[int]:
    """The ``k`` pool sentences (indices into ``sentences``) that ``ner-app select`` would pick."""
    from ner_app.decisions.selection import Candidate, select
    from ner_app.predict.predictor import Predictor

    candidates = [
        Candidate(
            n,
            sentences[i].line,
            " ".join(sentences[i].tokens),
            (tuple(sentences[i].tokens),),
            (),
            sentences[i].doc,
        )
        for n, i in enumerate(pool)
    ]
    predictor = None if strategy == "random" else Predictor.from_export(export)
    return [pool[s.candidate.index] for s in select(predictor, candidates, k, strategy, seed)]


def run_seed(
    args: argparse.Namespace, config: Path, data: Path, seed: int, extra: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Every strategy's rounds for one seed: labelled sentences and tokens, dev and test F1 per round."""
    sentences = read_conll(data / "train.txt")
    labelled0 = sorted(random.Random(seed).sample(range(len(sentences)), args.initial))
    folder = args.out / f"seed{seed}"
    write_labelled(data, folder / "round0" / "data", sentences, labelled0)
    first = train_round(config, folder / "round0" / "data", folder / "round0" / "run", seed, extra)
    results: dict[str, list[dict[str, Any]]] = {}
    for strategy in args.strategies:
        labelled, previous = list(labelled0), folder / "round0" / "run"
        rows = [_row(0, labelled, sentences, first)]
        for r in range(1, args.rounds + 1):
            chosen = set(labelled)
            pool = [i for i in range(len(sentences)) if i not in chosen]
            labelled += choose(previous / "export", sentences, pool, args.batch, strategy, seed * 1000 + r)
            here = folder / strategy / f"round{r}"
            write_labelled(data, here / "data", sentences, sorted(labelled))
            rows.append(
                _row(r, labelled, sentences, train_round(config, here / "data", here / "run", seed, extra))
            )
            previous = here / "run"
        results[strategy] = rows
    return results


def collected_seed(args: argparse.Namespace, seed: int) -> dict[str, list[dict[str, Any]]]:
    """``--collect``: the rounds of one seed already trained under ``--out`` (each strategy up to its first round
    without a metrics.json), read from their data folders and metrics; nothing is trained or scored."""
    folder, results = args.out / f"seed{seed}", {}
    for strategy in args.strategies:
        rows: list[dict[str, Any]] = []
        for r in range(args.rounds + 1):
            here = folder / "round0" if r == 0 else folder / strategy / f"round{r}"
            if not (here / "run" / "metrics.json").is_file():
                break
            train = read_conll(here / "data" / "train.txt")
            metrics = json.loads((here / "run" / "metrics.json").read_text(encoding="utf-8"))
            scores = {"dev": metrics["dev"]["f1"], "test": metrics["test"]["f1"]}
            rows.append(
                {"round": r, "sentences": len(train), "tokens": sum(len(x.tokens) for x in train), **scores}
            )
        results[strategy] = rows
    return results


def _row(r: int, labelled: list[int], sentences: list[Sentence], scores: dict[str, float]) -> dict[str, Any]:
    return {
        "round": r,
        "sentences": len(labelled),
        "tokens": sum(len(sentences[i].tokens) for i in labelled),
        **scores,
    }


def mean_curve(runs: dict[int, list[dict[str, Any]]], key: str) -> list[float]:
    rounds = len(next(iter(runs.values())))
    return [statistics.fmean(rows[r][key] for rows in runs.values()) for r in range(rounds)]


Runs = dict[int, list[dict[str, Any]]]  # a strategy's rows of every seed


def _shares(runs: Runs, random_runs: Runs, goal: float) -> dict[str, float | None]:
    """The shares of random's final labels, in sentences (``share``) and in tokens (``token_share``), at which
    the mean test F1 of ``runs`` first reaches ``goal``, linear between rounds; None where it never does."""
    f1 = mean_curve(runs, "test")
    shares: dict[str, float | None] = {}
    for key, unit in (("share", "sentences"), ("token_share", "tokens")):
        labels, labels_random = mean_curve(runs, unit), mean_curve(random_runs, unit)[-1]
        at = None
        for r in range(len(f1)):
            if f1[r] >= goal:
                at = labels[0]
                if r:
                    at = labels[r - 1] + (goal - f1[r - 1]) / (f1[r] - f1[r - 1]) * (
                        labels[r] - labels[r - 1]
                    )
                break
        shares[key] = None if at is None else at / labels_random
    return shares


def label_share(results: dict[str, dict[int, list[dict[str, Any]]]]) -> dict[str, Any]:
    """The strategy with the best mean final test F1, and the share of random's final labels at which its mean
    test F1 first reaches random's final one, linear between rounds (None if it never does): counted in
    sentences (``share``, what a round adds) and in tokens (``token_share``, what annotators read); and both
    shares of every strategy (``strategies``)."""
    goal = mean_curve(results["random"], "test")[-1]
    others = [s for s in results if s != "random"]
    every = {s: _shares(results[s], results["random"], goal) for s in others}
    if not others:
        return {
            "best": None,
            "random_final_test_f1": goal,
            "share": None,
            "token_share": None,
            "strategies": {},
        }
    best = max(others, key=lambda s: mean_curve(results[s], "test")[-1])
    return {"best": best, "random_final_test_f1": goal, **every[best], "strategies": every}


def table(results: dict[str, dict[int, list[dict[str, Any]]]]) -> str:
    lines = [
        "| strategy | round | labelled sentences | labelled tokens | dev F1 | test F1 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for strategy, runs in results.items():
        for r in range(len(next(iter(runs.values())))):
            rows = [seed_rows[r] for seed_rows in runs.values()]
            lines.append(
                f"| {strategy} | {r} | {rows[0]['sentences']:,} | {statistics.fmean(x['tokens'] for x in rows):,.0f} | "
                f"{spread([x['dev'] for x in rows])} | {spread([x['test'] for x in rows])} |"
            )
    return "\n".join(lines) + "\n"


def chart(results: dict[str, dict[int, list[dict[str, Any]]]], path: Path) -> None:
    """Test F1 (mean over seeds, a band of one sample std) against labelled sentences (left) and labelled tokens
    (mean over seeds, right), one line per strategy: a strategy's cost depends on which one annotators pay."""
    import io

    from matplotlib.figure import Figure

    figure = Figure(figsize=(10.0, 4.0), dpi=120)
    panels = figure.subplots(1, 2, sharey=True)
    for axes, unit in zip(panels, ("sentences", "tokens"), strict=True):
        for strategy, runs in results.items():
            x = mean_curve(runs, unit)
            mean = mean_curve(runs, "test")
            std = [
                statistics.stdev(rows[r]["test"] for rows in runs.values()) if len(runs) > 1 else 0.0
                for r in range(len(x))
            ]
            axes.plot(x, mean, marker="o", label=strategy)
            axes.fill_between(
                x,
                [m - s for m, s in zip(mean, std, strict=True)],
                [m + s for m, s in zip(mean, std, strict=True)],
                alpha=0.15,
            )
        axes.set_xlabel(f"labelled training {unit}")
        axes.grid(alpha=0.3)
    panels[0].set_ylabel("test entity F1 (%)")
    panels[1].legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    write_bytes(path, buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the data copies, runs and results"
    )
    parser.add_argument("--data", type=Path, default=SHARED / "data" / "conll2003", help="CoNLL-2003 folder")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "conll2003_baseline.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--initial", type=int, default=500, help="random labelled sentences of round 0")
    parser.add_argument("--batch", type=int, default=500, help="sentences each round adds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10, help="trainer.max_epochs of every training")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--smoke", action="store_true", help="tiny corpus, tiny config, one epoch, one seed")
    parser.add_argument(
        "--collect", action="store_true", help="report the rounds already trained under --out; train nothing"
    )
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (key=value)")
    args = parser.parse_args()
    data, config, extra = args.data, args.config, list(args.overrides)
    if args.smoke:
        data, config = tiny_corpus_copy(args.out / "tiny_conll"), ROOT / "configs" / "tiny.yaml"
        args.seeds, args.initial, args.batch, args.rounds, args.epochs = args.seeds[:1], 10, 10, 2, 1
        extra = ["elmo.cache_dir=null", *extra]
    if "random" not in args.strategies:
        args.strategies = ["random", *args.strategies]  # the baseline every strategy is measured against
    if not (data / "train.txt").is_file():
        raise SystemExit(
            f"{data / 'train.txt'}: not found (set NER_SHARED or --data to the CoNLL-2003 folder)"
        )
    extra = [f"trainer.max_epochs={args.epochs}", "trainer.threads=1", *extra]
    results: dict[str, dict[int, list[dict[str, Any]]]] = {s: {} for s in args.strategies}
    for seed in args.seeds:
        seed_rows = collected_seed(args, seed) if args.collect else run_seed(args, config, data, seed, extra)
        for strategy, rows in seed_rows.items():
            results[strategy][seed] = rows
    if args.collect:  # each strategy up to the last round that every seed has finished
        for strategy, runs in results.items():
            done = min(len(rows) for rows in runs.values())
            if not done:
                raise SystemExit(f"{args.out}: no finished round 0 for every seed of {strategy}")
            results[strategy] = {seed: rows[:done] for seed, rows in runs.items()}
    share = label_share(results)
    last = len(next(iter(results["random"].values()))) - 1
    done_rounds = ", ".join(f"{s} {len(next(iter(r.values()))) - 1}" for s, r in results.items())
    summary = (
        f"data: {data}; {args.initial} random sentences, then rounds of {args.batch} (finished: {done_rounds}); "
        f"{args.epochs} epochs per training; seeds {args.seeds}\n"
    )
    lines = []
    for name, each in share["strategies"].items():
        if each["share"] is None:
            lines.append(
                f"{name} does not reach random's round-{last} test F1 ({share['random_final_test_f1']:.2f})"
            )
        else:
            lines.append(
                f"{name} reaches random's round-{last} test F1 ({share['random_final_test_f1']:.2f}) with "
                f"{each['share']:.0%} of its labelled sentences ({each['token_share']:.0%} of its tokens)"
            )
    goal = "\n".join(lines) if lines else "no strategy but random was run"
    markdown = f"{summary}\n{table(results)}\n{goal}\n"
    write_text(
        args.out / "results.json",
        json.dumps(
            {
                **{k: v for k, v in vars(args).items() if k != "out"},
                "data": str(data),
                "config": str(config),
                "results": results,
                "label_share": share,
            },
            indent=1,
            default=str,
        ),
    )
    write_text(args.out / "results.md", markdown)
    chart(results, args.out / "active_learning.png")
    print("\n" + markdown, end="")
    print(
        f"wrote {args.out / 'results.json'}, {args.out / 'results.md'} and {args.out / 'active_learning.png'}"
    )


if __name__ == "__main__":
    main()
