"""int8 ONNX (``export --onnx --quantize int8``) against fp32 ONNX and torch, side by side, on CoNLL-2003.

    nice python -m benchmarks.onnx_int8 [--model EXPORT] [--threads 1] [--repeats 3] [--sentences N]

Exports ``--model`` (default: the shipped tagger) to fp32 and int8 ONNX folders (timed), loads both with
``OnnxPredictor`` and the export with ``Predictor``, then prints:
- agreement: the share of CoNLL-2003 dev tokens whose int8 tag (IOB1, as evaluate writes it) equals the fp32
  ONNX one, and of whole sentences (goal >= 99.5% of tokens);
- F1: entity F1 on dev and test (conlleval's counting) of torch, fp32 and int8, and int8 - fp32 (goal within 0.2);
- speed: words/s tagging the dev sentences, the three at their default batch (64 sentences) and int8 at 16 too,
  in turn ``--repeats`` times (``common.interleaved``), and the ratios against fp32 ONNX and against torch, with
  the machine and its load.
Without ../shared the tiny corpus stands in (the figures then mean little).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import ROOT, SHARED, interleaved, machine, print_table
from ner_app.onnx.export import export_onnx_from
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.predictor import Predictor
from ner_app.text.conll import Sentence, read_conll
from ner_app.text.scores import entity_scores

SHIPPED = ROOT / "data" / "models" / "conll2003"


def agreement(first: Sequence[Sequence[str]], second: Sequence[Sequence[str]]) -> tuple[float, float]:
    """The share of tokens, and of whole sentences, whose tags are the same in both (each in [0, 1])."""
    tokens = sum(len(a) for a in first)
    same = sum(x == y for a, b in zip(first, second, strict=True) for x, y in zip(a, b, strict=True))
    sentences = sum(list(a) == list(b) for a, b in zip(first, second, strict=True))
    return same / max(tokens, 1), sentences / max(len(first), 1)


def source_tags(predictor: Any, sentences: Sequence[Sentence]) -> list[list[str]]:
    """Each sentence's predicted tags in the training files' scheme (what ``evaluate`` scores)."""
    return [predictor.to_source(tags) for tags, _ in predictor.tag([s.tokens for s in sentences])]


def load_average() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=str(SHIPPED), help="an export folder (default: the shipped tagger)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, help="only the first N dev and test sentences")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = SHARED / "data" / "conll2003"
    if not (data / "valid.txt").is_file():
        data = ROOT / "tests" / "data" / "tiny_conll"
    dev, test = read_conll(data / "valid.txt"), read_conll(data / "test.txt")
    if args.sentences:
        dev, test = dev[: args.sentences], test[: args.sentences]
    print(f"# int8 ONNX against fp32 ONNX and torch: {args.model}, {data}")
    print(f"{machine()}; onnxruntime threads {args.threads}; {load_average()} at the start\n")
    with tempfile.TemporaryDirectory(prefix="onnx_int8.") as tmp:
        folders = {}
        for name, quantize in (("fp32", None), ("int8", "int8")):
            start = time.perf_counter()
            folders[name] = export_onnx_from(args.model, Path(tmp) / name, quantize)
            size = sum(p.stat().st_size for p in folders[name].iterdir()) / 2**20
            print(f"export {name}: {time.perf_counter() - start:.1f} s, {size:.1f} MiB")
        predictors: dict[str, Any] = {
            "torch": Predictor.from_export(args.model),
            "onnx fp32": OnnxPredictor(folders["fp32"], threads=args.threads),
            "onnx int8": OnnxPredictor(folders["int8"], threads=args.threads),
        }
        dev_tags = {name: source_tags(p, dev) for name, p in predictors.items()}
        test_tags = {name: source_tags(p, test) for name, p in predictors.items()}
        tokens, whole = agreement(dev_tags["onnx int8"], dev_tags["onnx fp32"])
        same_fp32 = agreement(dev_tags["onnx fp32"], dev_tags["torch"])[0]
        print(f"\n## Agreement on dev ({len(dev):,} sentences, {sum(len(s.tokens) for s in dev):,} tokens)\n")
        print_table(
            ["pair", "tokens with the same tag", "sentences with the same tags"],
            [
                ["int8 vs fp32 ONNX", f"{100 * tokens:.3f}%", f"{100 * whole:.2f}%"],
                ["fp32 ONNX vs torch", f"{100 * same_fp32:.3f}%", ""],
            ],
        )
        print("\n## Entity F1 (conlleval's counting)\n")
        f1 = {
            split: {name: entity_scores([s.tags for s in sents], tags[name])["f1"] for name in predictors}
            for split, sents, tags in (("dev", dev, dev_tags), ("test", test, test_tags))
        }
        print_table(
            ["split", *predictors, "int8 - fp32"],
            [
                [split, *(f"{v:.2f}" for v in row.values()), f"{row['onnx int8'] - row['onnx fp32']:+.2f}"]
                for split, row in f1.items()
            ],
        )
        words = sum(len(s.tokens) for s in dev)
        sentences = [s.tokens for s in dev]
        timed = {f"{name}, batch {p.batch_size}": p for name, p in predictors.items()}
        # smaller batches pad less (each holds sentences of closer lengths): int8 at 16 is its fastest setting
        timed["onnx int8, batch 16"] = OnnxPredictor(folders["int8"], threads=args.threads, batch_size=16)
        fns = {name: (lambda p=p: p.tag(sentences)) for name, p in timed.items()}
        found = interleaved(fns, args.repeats)
        print(
            f"\n## Speed: tagging dev, median of {args.repeats} rounds in turn ({load_average()} at the end)\n"
        )
        fp32 = found[f"onnx fp32, batch {predictors['onnx fp32'].batch_size}"].median
        torch64 = found[f"torch, batch {predictors['torch'].batch_size}"].median
        print_table(
            ["path", "seconds", "words/s", "speed vs fp32 ONNX", "speed vs torch"],
            [
                [
                    name,
                    f"{m.median:.2f}",
                    f"{words / m.median:,.0f}",
                    f"{fp32 / m.median:.2f}x",
                    f"{torch64 / m.median:.2f}x",
                ]
                for name, m in found.items()
            ],
        )


if __name__ == "__main__":
    main()
