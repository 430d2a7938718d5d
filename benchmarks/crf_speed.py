"""Time ner_app's CRF against pytorch-crf on the same random data (CPU).

    python benchmarks/crf_speed.py [--threads N] [--repeats R]

Ops: (a) log-likelihood forward + backward, (b) Viterbi decode; batch 64 and 512, 9 and 17 tags, T = 30
with seeded variable lengths. Prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torchcrf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from ner_app.tagger.crf import CRF  # noqa: E402

MAX_LEN = 30


def median_ms(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
    return 1000 * statistics.median(times)


def make_data(batch: int, num_tags: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Emissions (B, T, K), tags (B, T), left-aligned mask (B, T) with lengths in [5, 30], longest = 30."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(5, MAX_LEN + 1, (batch,), generator=gen)
    lengths[0] = MAX_LEN
    emissions = torch.randn(batch, MAX_LEN, num_tags, generator=gen)
    tags = torch.randint(num_tags, (batch, MAX_LEN), generator=gen)
    mask = torch.arange(MAX_LEN)[None, :] < lengths[:, None]
    return emissions, tags, mask


def bench(batch: int, num_tags: int, repeats: int) -> list[tuple[str, float, float]]:
    """(op, pytorch-crf ms, ours ms) for one configuration, both CRFs with the same parameters."""
    torch.manual_seed(0)
    ours = CRF(num_tags)
    ref = torchcrf.CRF(num_tags, batch_first=True)
    with torch.no_grad():
        for name in ("start_transitions", "transitions", "end_transitions"):
            getattr(ref, name).copy_(getattr(ours, name))
    emissions, tags, mask = make_data(batch, num_tags, seed=batch * 100 + num_tags)
    leaf = emissions.clone().requires_grad_()

    def train_ref() -> None:
        leaf.grad = None
        ref.zero_grad(set_to_none=True)
        (-ref(leaf, tags, mask, reduction="sum")).backward()

    def train_ours() -> None:
        leaf.grad = None
        ours.zero_grad(set_to_none=True)
        (-ours(leaf, tags, mask).sum()).backward()

    with torch.no_grad():
        ref_paths = ref.decode(emissions, mask)
        our_paths = ours.decode(emissions, mask)[0]
        lengths = mask.sum(1).tolist()
        same = [row[:n] for row, n in zip(our_paths.tolist(), lengths, strict=True)] == ref_paths
        if not same:
            raise RuntimeError(f"decoded paths differ from pytorch-crf (batch {batch}, tags {num_tags})")
        decode_ref = median_ms(lambda: ref.decode(emissions, mask), repeats)
        decode_ours = median_ms(lambda: ours.decode(emissions, mask), repeats)
    return [
        ("llh fwd+bwd", median_ms(train_ref, repeats), median_ms(train_ours, repeats)),
        ("viterbi decode", decode_ref, decode_ours),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats per measurement (default 7)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, {threads} threads, T <= {MAX_LEN}, median of {args.repeats} runs")
    print()
    print("| op | batch | tags | pytorch-crf ms | ours ms | speedup |")
    print("|---|---:|---:|---:|---:|---:|")
    for batch in (64, 512):
        for num_tags in (9, 17):
            for op, ref_ms, our_ms in bench(batch, num_tags, args.repeats):
                row = (
                    f"| {op} | {batch} | {num_tags} | {ref_ms:.2f} | {our_ms:.2f} | {ref_ms / our_ms:.1f}x |"
                )
                print(row, flush=True)


if __name__ == "__main__":
    main()
