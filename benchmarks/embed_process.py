"""Whole-process ``embed`` against a per-timestep implementation of the reference, start-up and loading included.

    python benchmarks/embed_process.py [--size original|small|tiny] [--sentences 256] [--threads 2] [--repeats 3]

Writes a random biLM of the given shape and a file of seeded sentences (as ``bilm_speed.py`` does), then times
whole processes side by side, interleaved: ``python -m ner_app embed`` in fp32 and in bf16, and this script's
``--baseline`` worker, which loads the same hdf5 with h5py, runs ``bilm_speed.Baseline`` (char CNN on every padded
position, one time step at a time) over batches of 64 in file order and writes every layer to hdf5 the same way.
Prints a markdown table of median wall seconds and real tokens/s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from bilm_speed import SIZES, Baseline, cpu_model, init_weights, make_sentences  # noqa: E402

from ner_app.bilm import batch_to_ids, save_bilm  # noqa: E402


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
    add("--baseline", nargs=4, metavar=("OPTIONS", "WEIGHTS", "INPUT", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline:
        baseline_worker(*args.baseline, threads=args.threads)
        return
    with tempfile.TemporaryDirectory(prefix="embed_process_") as tmp:
        torch.manual_seed(0)
        built = SIZES[args.size].build()
        init_weights(built)
        options, weights = (str(p) for p in save_bilm(built, tmp))
        del built
        sentences = make_sentences(args.sentences)
        tokens = sum(len(s) for s in sentences)
        source = Path(tmp) / "input.txt"
        source.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
        out = str(Path(tmp) / "out.hdf5")
        embed = [sys.executable, "-m", "ner_app", "embed", "--options", options, "--weights", weights,
                 "--input", str(source), "--output", out, "--threads", str(args.threads)]  # fmt: skip
        commands = {
            "per-timestep baseline": [
                sys.executable,
                __file__,
                "--threads",
                str(args.threads),
                "--baseline",
                options,
                weights,
                str(source),
                out,
            ],  # fmt: skip
            "ner_app embed, fp32": embed,
            "ner_app embed, bf16 autocast": [*embed, "--precision", "bf16"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):  # interleaved, to share the machine's noise fairly
            for name, command in commands.items():
                begin = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True)
                times[name].append(time.perf_counter() - begin)
    print(f"torch {torch.__version__}, {args.threads} threads, CPU {cpu_model()}; biLM '{args.size}', "
          f"{args.sentences} sentences, {tokens:,} tokens; median of {args.repeats} whole processes\n")  # fmt: skip
    print("| process | seconds | tokens/s | speedup vs baseline |")
    print("|---|---:|---:|---:|")
    base = statistics.median(times["per-timestep baseline"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"| {name} | {median:.1f} | {tokens / median:,.0f} | {base / median:.2f}x |")


if __name__ == "__main__":
    main()
