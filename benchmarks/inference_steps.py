"""The biLM's recurrence without autograd: the in-place inference loop against the out-of-place loop, one run.

    python -m benchmarks.inference_steps [--size original|small|tiny] [--threads 1] [--repeats 9] [--batch 64]

Both loops of ``ner_app.bilm.recurrence`` run inside the same biLM (``load_bilm`` of random weights written
with ``save_bilm``) under ``torch.inference_mode``, one forward at a time, in turn (``common.interleaved``), in
fp32 and under bf16 autocast, on seeded sentences of 20-30 tokens. The out-of-place loop is the code path
before the inference loop existed. Every layer of both is checked to be the same bits first. Prints a markdown
table of median seconds per forward and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch

import ner_app.bilm.lstm as lstm
from benchmarks.common import SIZES, interleaved, machine, make_sentences, print_table, random_bilm
from ner_app.bilm import batch_to_ids, load_bilm, save_bilm
from ner_app.bilm.recurrence import autograd_steps, inference_steps

LOOPS = {"out of place (before)": autograd_steps, "in place": inference_steps}


def forward(
    bilm: torch.nn.Module, ids: torch.Tensor, loop: Callable[..., object], bf16: bool
) -> list[torch.Tensor]:
    """One forward with ``loop`` as the cells' loop without autograd."""
    lstm.inference_steps = loop  # type: ignore[assignment]  # the name the cells call without autograd
    try:
        precision: AbstractContextManager[object] = torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)
        with torch.inference_mode(), precision:
            return bilm(ids).layers
    finally:
        lstm.inference_steps = inference_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--size", choices=sorted(SIZES), default="original")
    add("--threads", type=int, default=1)
    add("--repeats", type=int, default=9)
    add("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="inference_steps_") as tmp:
        bilm = load_bilm(*save_bilm(random_bilm(args.size), tmp)).eval()
    sentences = make_sentences(args.batch)
    ids, tokens = batch_to_ids(sentences), sum(len(s) for s in sentences)
    for bf16 in (False, True):
        before, after = (forward(bilm, ids, loop, bf16) for loop in LOOPS.values())
        if not all(torch.equal(a, b) for a, b in zip(before, after, strict=True)):
            raise RuntimeError(f"the two loops disagree ({'bf16' if bf16 else 'fp32'})")
    runs = {
        f"{name}, {dtype}": (lambda loop=loop, bf16=dtype == "bf16": forward(bilm, ids, loop, bf16))
        for dtype in ("fp32", "bf16")
        for name, loop in LOOPS.items()
    }
    medians = {name: m.median for name, m in interleaved(runs, args.repeats).items()}
    print(
        f"{machine()}; biLM '{args.size}', {args.batch} sentences, {tokens:,} tokens; median of {args.repeats}; "
        "layers bit-identical\n"
    )
    rows = []
    for dtype in ("fp32", "bf16"):
        base = medians[f"out of place (before), {dtype}"]
        for name in LOOPS:
            seconds = medians[f"{name}, {dtype}"]
            rows.append((name, dtype, f"{seconds:.3f}", f"{tokens / seconds:,.0f}", f"{base / seconds:.2f}x"))
    print_table(["loop without autograd", "dtype", "s/forward", "tokens/s", "vs before"], rows, left=2)


if __name__ == "__main__":
    main()
