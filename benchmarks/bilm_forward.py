"""One biLM forward of whichever ``ner_app`` is importable: a 'small'-like biLM with 1024-cell LSTMs, seeded
weights, 64 sentences of 20-30 tokens, one thread; the median of ``--repeats`` after ``--warmup`` calls.

Self-contained (it imports only ``ner_app``), so that ``benchmarks/before_after.sh`` can time two checkouts
with the same script: ``PYTHONPATH=TREE python benchmarks/bilm_forward.py``. Every checkout gives
bit-identical layers for the same seed; the line printed names the checkout timed.

    python -m benchmarks.bilm_forward --repeats 8
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch

import ner_app
from ner_app.bilm import BilmOptions, batch_to_ids

OPTIONS = BilmOptions(
    char_dim=16,
    filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
    n_highway=1,
    activation="relu",
    lstm_dim=1024,
    projection_dim=128,
    n_layers=2,
    cell_clip=3.0,
    proj_clip=3.0,
    use_skip_connections=True,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    bilm = OPTIONS.build().eval()
    rng = random.Random(0)
    words = [f"w{i}x" * rng.randint(1, 3) for i in range(2000)]
    ids = batch_to_ids([[rng.choice(words) for _ in range(rng.randint(20, 30))] for _ in range(64)])
    with torch.inference_mode():
        for _ in range(args.warmup):
            bilm(ids)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            bilm(ids)
            times.append(time.perf_counter() - start)
    checkout = Path(ner_app.__file__).resolve().parents[1]
    print(f"{checkout} {statistics.median(times) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
