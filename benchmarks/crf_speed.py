"""Time ner_app's CRF against pytorch-crf on the same random data (CPU).

    python -m benchmarks.crf_speed [--threads N] [--repeats R]

Ops: (a) log-likelihood forward + backward, (b) Viterbi decode; batch 64 and 512, 9 and 17 tags, T = 30
with seeded variable lengths. Each op is timed by ``Timer.blocked_autorange`` in R rounds, the two
implementations in turn (``common.interleaved``). Prints a markdown table of medians.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import torch
import torchcrf

from benchmarks.common import interleaved, machine, print_table
from ner_app.tagger.crf.crf import CRF

MAX_LEN = 30
MIN_RUN_TIME = 0.05  # seconds of one blocked_autorange round


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

    @torch.no_grad()
    def decode_ref() -> list[list[int]]:
        return ref.decode(emissions, mask)

    @torch.no_grad()
    def decode_ours() -> tuple[torch.Tensor, torch.Tensor]:
        return ours.decode(emissions, mask)

    lengths = mask.sum(1).tolist()
    our_paths = [row[:n] for row, n in zip(decode_ours()[0].tolist(), lengths, strict=True)]
    if our_paths != decode_ref():
        raise RuntimeError(f"decoded paths differ from pytorch-crf (batch {batch}, tags {num_tags})")
    rows = []
    for op, ref_fn, our_fn in (
        ("llh fwd+bwd", train_ref, train_ours),
        ("viterbi decode", decode_ref, decode_ours),
    ):
        timed = interleaved({"ref": ref_fn, "ours": our_fn}, repeats, warmup=2, min_run_time=MIN_RUN_TIME)
        rows.append((op, 1000 * timed["ref"].median, 1000 * timed["ours"].median))
    return rows


def table_rows(repeats: int) -> Iterator[tuple[object, ...]]:
    for batch in (64, 512):
        for num_tags in (9, 17):
            for op, ref_ms, our_ms in bench(batch, num_tags, repeats):
                yield op, batch, num_tags, f"{ref_ms:.2f}", f"{our_ms:.2f}", f"{ref_ms / our_ms:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds per measurement (default 7)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"{machine()}; T <= {MAX_LEN}, median of {args.repeats} rounds of blocked_autorange\n")
    print_table(["op", "batch", "tags", "pytorch-crf ms", "ours ms", "speedup"], table_rows(args.repeats))


if __name__ == "__main__":
    main()
