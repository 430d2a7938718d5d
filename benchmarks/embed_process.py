"""Whole-process ``embed`` against a per-timestep implementation of the reference, start-up and loading included.

    python -m benchmarks.embed_process [--size original|small|tiny] [--sentences 256] [--threads 2] [--repeats 3]
                                       [--before CHECKOUT] [--batch64]

Writes a random biLM of the given shape and a file of seeded sentences (``common.random_bilm`` and
``common.make_sentences``), then times whole processes side by side, one at a time in turn
(``common.interleaved``, no warm-up): ``python -m ner_app embed`` in fp32 and in bf16, and this module's
``--baseline`` worker, which loads the same hdf5 with h5py, runs ``common.Baseline`` (char CNN on every padded
position, one time step at a time) over batches of 64 in file order and writes every layer to hdf5 the same
way. ``--before CHECKOUT`` adds that checkout's ``embed`` (fp32 and bf16, run from its own folder) to the same
rounds, for a before/after ratio; ``--batch64`` adds ``embed --batch-size 64`` (the baseline's batch; ``embed``'s
default is 256). Prints a markdown table of median wall seconds and real tokens/s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import h5py
import torch

from benchmarks.common import (
    ROOT,
    SIZES,
    Baseline,
    cpu_name,
    interleaved,
    make_sentences,
    print_table,
    random_bilm,
)
from ner_app.bilm import batch_to_ids, save_bilm


def baseline_worker(options: str, weights: str, source: str, output: str, threads: int) -> None:
    """The reference-structured embed: every layer of every line, without <S> and </S>, into hdf5."""
    torch.set_num_threads(threads)
    model = Baseline(Path(options), Path(weights))
    lines = [line.split(" ") for line in Path(source).read_text(encoding="utf-8").splitlines()]
    with torch.inference_mode(), h5py.File(output, "w") as out:
        for start in range(0, len(lines), 64):
            batch = lines[start : start + 64]
            layers = torch.stack(model.layers(batch_to_ids(batch)), dim=1)  # (B, L+1, T+2, 2P)
            for row, tokens in enumerate(batch):
                out.create_dataset(str(start + row), data=layers[row, :, 1 : len(tokens) + 1].numpy())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--size", choices=sorted(SIZES), default="original")
    add("--sentences", type=int, default=256)
    add("--threads", type=int, default=2)
    add("--repeats", type=int, default=3)
    add("--before", type=Path, help="another checkout whose embed joins the rounds (fp32 and bf16)")
    add("--batch64", action="store_true", help="also embed with --batch-size 64 (the reference's batch)")
    add("--baseline", nargs=4, metavar=("OPTIONS", "WEIGHTS", "INPUT", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        options, weights, source, output = args.baseline
        baseline_worker(options, weights, source, output, threads=args.threads)
        return
    with tempfile.TemporaryDirectory(prefix="embed_process_") as tmp:
        options, weights = (str(p) for p in save_bilm(random_bilm(args.size), tmp))
        sentences = make_sentences(args.sentences)
        tokens = sum(len(s) for s in sentences)
        source = Path(tmp) / "input.txt"
        source.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
        # one output a command: each writes over its own earlier file only (the output policy)
        out = str(Path(tmp) / "out.hdf5")
        threads = ["--threads", str(args.threads)]
        embed = [
            sys.executable,
            "-m",
            "ner_app",
            "embed",
            "--options",
            options,
            "--weights",
            weights,
            "--input",
            str(source),
            "--output",
            out,
            *threads,
        ]
        commands = {
            "per-timestep baseline": [
                sys.executable,
                "-m",
                "benchmarks.embed_process",
                *threads,
                "--baseline",
                options,
                weights,
                str(source),
                str(Path(tmp) / "baseline.hdf5"),
            ],
            "ner_app embed, fp32": embed,
            "ner_app embed, bf16 autocast": [*embed, "--precision", "bf16"],
        }
        if args.batch64:  # the default before it became 256: what the larger batch gives, in the same rounds
            commands["ner_app embed, fp32, --batch-size 64"] = [*embed, "--batch-size", "64"]
            commands["ner_app embed, bf16, --batch-size 64"] = [
                *embed,
                "--precision",
                "bf16",
                "--batch-size",
                "64",
            ]
        folders = dict.fromkeys(commands, ROOT)
        if args.before is not None:  # ``python -m ner_app`` imports the package of its working folder
            for name in ("ner_app embed, fp32", "ner_app embed, bf16 autocast"):
                commands[f"before: {name}"] = [f"{out}.before" if a == out else a for a in commands[name]]
                folders[f"before: {name}"] = args.before.resolve()
        processes = {
            name: partial(subprocess.run, command, cwd=folders[name], check=True, capture_output=True)
            for name, command in commands.items()
        }
        medians = {name: m.median for name, m in interleaved(processes, args.repeats, warmup=0).items()}
    print(
        f"torch {torch.__version__}, {args.threads} threads, CPU {cpu_name()}; biLM '{args.size}', "
        f"{args.sentences} sentences, {tokens:,} tokens; median of {args.repeats} whole processes\n"
    )
    base = medians["per-timestep baseline"]
    rows = [(name, f"{m:.1f}", f"{tokens / m:,.0f}", f"{base / m:.2f}x") for name, m in medians.items()]
    print_table(["process", "seconds", "tokens/s", "speedup vs baseline"], rows)


if __name__ == "__main__":
    main()
