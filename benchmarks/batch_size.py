"""Words/s of predict's own path at several batch sizes: ``tag_lines`` (chunks of 512 raw lines, each sorted by
length and cut into batches), in process, torch and, with ``--onnx``, an ONNX export, side by side.

    nice python -m benchmarks.batch_size [--model EXPORT] [--onnx ONNX_EXPORT] [--sizes 16,32,64,128,256]
                                         [--repeats 3] [--lines N]

The input is the CoNLL-2003 dev sentences as raw lines (tokens joined by spaces; the tiny corpus without
../shared). Each (path, batch size) tags the whole input once per round, all of them in turn
(``common.interleaved``, one warm-up each); prints median seconds and words/s and the ratio to torch at
predict's default batch. A batch pads its sentences to its longest, so within a chunk of 512 lines more
batches of fewer sentences pad less; more rows per LSTM step use the core better. This measures which wins.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common import ROOT, SHARED, interleaved, machine, print_table
from ner_app.predict.predictor import Predictor
from ner_app.predict.shipped import SHIPPED_MODEL
from ner_app.text.batching import PREDICT_BATCH_SIZE
from ner_app.text.conll import read_conll


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=str(SHIPPED_MODEL), help="an export folder (default: the shipped tagger)"
    )
    parser.add_argument("--onnx", help="an export --onnx folder (fp32 or int8) to time beside torch")
    parser.add_argument("--sizes", default="16,32,64,128,256", help="batch sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lines", type=int, help="only the first N dev sentences")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = SHARED / "data" / "conll2003" / "valid.txt"
    if not data.is_file():
        data = ROOT / "tests" / "data" / "tiny_conll" / "valid.txt"
    lines = [" ".join(s.tokens) for s in read_conll(data)][: args.lines]
    words = sum(len(line.split(" ")) for line in lines)
    sizes = sorted({int(x) for x in args.sizes.split(",")} | {PREDICT_BATCH_SIZE})
    predictors: dict[str, Any] = {}
    for size in sizes:
        predictors[f"torch, batch {size}"] = Predictor.from_export(args.model, batch_size=size)
        if args.onnx:
            from ner_app.onnx.predictor import OnnxPredictor

            predictors[f"onnx, batch {size}"] = OnnxPredictor(args.onnx, threads=1, batch_size=size)

    def run(p: Any) -> Callable[[], object]:
        return lambda: list(p.tag_lines(lines))

    found = interleaved({name: run(p) for name, p in predictors.items()}, args.repeats)
    base = found[f"torch, batch {PREDICT_BATCH_SIZE}"].median
    print(f"# predict's path by batch size: {args.model}, {len(lines):,} lines of {data}, {words:,} words")
    print(f"{machine()}; median of {args.repeats} rounds in turn\n")
    print_table(
        ["path", "seconds", "words/s", f"vs torch at {PREDICT_BATCH_SIZE} (predict's default)"],
        [
            [name, f"{m.median:.2f}", f"{words / m.median:,.0f}", f"{base / m.median:.2f}x"]
            for name, m in found.items()
        ],
    )


if __name__ == "__main__":
    main()
