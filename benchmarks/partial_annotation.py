"""Partial annotation on CoNLL-2003: hide a share of the training tags at random and compare three arms.

    python -m benchmarks.partial_annotation --out runs/partial  # long job: 9 full trainings
    python -m benchmarks.partial_annotation --smoke --out runs/partial_smoke  # seconds: the tiny corpus

For each seed, the same random ``--hide`` share of the training tokens (tokens, not sentences; seeded by the
seed) loses its tag, and three runs train on the result:

- ``partial``: the hidden tags are written ``-`` and the CRF trains on the partial likelihood
  (docs/partial_annotation.md);
- ``as O``: the hidden tags are written ``O`` (what a tool without partial annotation does);
- ``dropped``: every sentence with a hidden tag is left out.

Every file is rewritten in the training scheme (``--scheme``, BIOES as the shipped configs) before the tags are
hidden, so that the hidden share is the unknown share (a known tag converted beside a hidden one could become
unknown too, docs/partial_annotation.md); dev and test stay complete. Every run is ``ner-app train`` with
``--config`` and ``seed``, ``data.dir``, ``data.scheme`` and ``output_dir`` set, so its folder holds the usual
metrics.json and reports. Prints one markdown table of dev and test F1 (mean and sample standard deviation over
the seeds) and the share of ``-`` training tags per arm, and writes it with every run's scores to
``OUT/results.json``.

``--smoke`` trains on tests/data/tiny_conll (train.txt 24 times over) with the tiny config and biLM, one epoch
and one seed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

from benchmarks.common import ROOT, SHARED, SPLIT_FILES, print_table, spread, tiny_corpus_copy
from ner_app.cli.commands import main as cli_main
from ner_app.files import write_text
from ner_app.text.conll import read_conll
from ner_app.text.tags import UNKNOWN, convert, detect_scheme

ARMS = ("partial", "as O", "dropped")


def hidden_tokens(train: Path, share: float, seed: int) -> set[int]:
    """Line numbers (1-based) of the training tokens whose tag is hidden: ``share`` of them, by seed."""
    lines = [s.line + i for s in read_conll(train) for i in range(len(s.tokens))]
    return set(random.Random(seed).sample(lines, round(share * len(lines))))


def write_arm(source: Path, target: Path, arm: str, hidden: set[int], scheme: str) -> None:
    """The data folder of one arm, every file rewritten in the training ``scheme`` (so that no known tag has to
    be converted beside a hidden one, docs/partial_annotation.md): dev and test whole, train with the hidden
    tags as the arm wants them."""
    target.mkdir(parents=True, exist_ok=True)
    file_scheme = detect_scheme(s.tags for s in read_conll(source / "train.txt"))
    for name in SPLIT_FILES:
        lines = (source / name).read_text(encoding="utf-8").split("\n")
        drop: set[int] = set()
        for sentence in read_conll(source / name):
            rows = range(sentence.line, sentence.line + len(sentence.tokens))  # 1-based line numbers
            if name == "train.txt" and arm == "dropped" and any(row in hidden for row in rows):
                drop.update(rows)
                continue
            for row, tag in zip(rows, convert(sentence.tags, file_scheme, scheme), strict=True):
                if name == "train.txt" and row in hidden:
                    tag = UNKNOWN if arm == "partial" else "O"
                lines[row - 1] = " ".join([*lines[row - 1].split()[:-1], tag])
        kept = [line for number, line in enumerate(lines, start=1) if number not in drop]
        write_text(target / name, "\n".join(kept))


def unknown_share(train: Path) -> float:
    """Share of the training tags that are ``-``."""
    tags = [s.tags for s in read_conll(train)]
    return sum(t.count(UNKNOWN) for t in tags) / max(1, sum(len(t) for t in tags))


def train_run(config: Path, data: Path, out: Path, seed: int, extra: list[str]) -> dict[str, float] | None:
    """One training run; its dev and test F1, or None when it refused its data (the error is printed: a
    ``dropped`` arm can lose every sentence of a type, or all of them)."""
    args = ["train", "--config", str(config), f"seed={seed}", f"data.dir={data}", f"output_dir={out}", *extra]
    if cli_main(args) != 0:
        return None
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    return {"dev": metrics["dev"]["f1"], "test": metrics["test"]["f1"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the data copies, runs and results"
    )
    parser.add_argument("--data", type=Path, default=SHARED / "data" / "conll2003", help="CoNLL-2003 folder")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "conll2003_elmo.yaml")
    parser.add_argument("--hide", type=float, default=0.3, help="share of the training tokens hidden")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--scheme", choices=["BIO", "BIOES"], default="BIOES", help="the training scheme")
    parser.add_argument("--smoke", action="store_true", help="tiny corpus, tiny config, one epoch, one seed")
    parser.add_argument("overrides", nargs="*", help="config overrides for every run (key=value)")
    args = parser.parse_args()
    data, config, seeds, extra = args.data, args.config, args.seeds, list(args.overrides)
    if args.smoke:
        data, config, seeds = (
            tiny_corpus_copy(args.out / "tiny_conll"),
            ROOT / "configs" / "tiny.yaml",
            seeds[:1],
        )
        extra = ["trainer.max_epochs=1", "trainer.threads=1", *extra]
    if not (data / "train.txt").is_file():
        raise SystemExit(
            f"{data / 'train.txt'}: not found (set NER_SHARED or --data to the CoNLL-2003 folder)"
        )
    extra = [f"data.scheme={args.scheme}", *extra]
    results: dict[str, dict[str, list[float]]] = {arm: {"dev": [], "test": [], "unknown": []} for arm in ARMS}
    for seed in seeds:
        hidden = hidden_tokens(data / "train.txt", args.hide, seed)
        for arm in ARMS:
            folder = args.out / f"seed{seed}" / arm.replace(" ", "_")
            write_arm(data, folder / "data", arm, hidden, args.scheme)
            scores = train_run(config, folder / "data", folder / "run", seed, extra)
            if scores is None:
                continue
            results[arm]["dev"].append(scores["dev"])
            results[arm]["test"].append(scores["test"])
            results[arm]["unknown"].append(unknown_share(folder / "data" / "train.txt"))
    write_text(
        args.out / "results.json", json.dumps({"hide": args.hide, "seeds": seeds, "arms": results}, indent=1)
    )
    print(f"\ndata: {data}; {args.hide:.0%} of the training tokens hidden; seeds {seeds}\n")
    print_table(
        ["arm", "training tags -", "dev F1", "test F1"],
        (
            [arm, f"{statistics.fmean(r['unknown']):.1%}", spread(r["dev"]), spread(r["test"])]
            if r["dev"]
            else [arm, "-", "no run trained (see the errors above)", "-"]
            for arm, r in results.items()
        ),
    )


if __name__ == "__main__":
    main()
