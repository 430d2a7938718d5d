"""Both directions of a biLM layer as one batched matmul per step, against the two cells one after the other.

    python -m benchmarks.lstm_directions [--threads N] [--repeats R] [--batch B] [--steps T]

More stream rows per matmul without a recipe change: in pretraining the forward and backward stacks read
windows of the same shape, so one layer's two recurrences could run as ``baddbmm``/``bmm`` over a (2, B, .)
state: one dispatch per operation for both directions instead of two. The baseline is the real
``LstmCellWithProjection`` loop (pretraining's code path), once per direction. The batched version is written
here only (it is not a code path of ner_app) and is checked to compute the same outputs first. Sizes are
``bilm_news.yaml``'s layer (projection 128, 512 cells, clips 3). Forward + backward, fp32 and bf16 autocast,
one warm-up round, then the two alternated one call at a time (``common.interleaved``), medians. Prints a
markdown table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial

import torch

from benchmarks.common import interleaved, machine, print_table
from ner_app.bilm.lstm import LstmCellWithProjection

Variant = Callable[[list[LstmCellWithProjection], torch.Tensor, int, int], torch.Tensor]

PROJ, CELLS, CLIP = 128, 512, 3.0


def batched_directions(
    cells: list[LstmCellWithProjection], x: torch.Tensor, steps: int, batch: int
) -> torch.Tensor:
    """x (2, T*B, P) time-major rows of each direction -> outputs (2, T*B, P): both cells, one bmm per step."""
    z_in = torch.stack([cell.input_projection(x[d]) for d, cell in enumerate(cells)])  # (2, T*B, 4C)
    recurrent = torch.stack([cell.state_linearity.weight.t() for cell in cells])  # (2, P, 4C)
    projection = torch.stack([cell.projection.weight.t() for cell in cells])  # (2, C, P)
    kind = x.device.type
    if torch.is_autocast_enabled(kind):  # cast once, as the cell's loop does
        dtype = torch.get_autocast_dtype(kind)
        recurrent, projection = recurrent.to(dtype), projection.to(dtype)
    h, c = x.new_zeros(2, batch, PROJ), x.new_zeros(2, batch, CELLS)
    outputs = []
    for step_inputs in z_in.split(batch, dim=1):  # (2, B, 4C)
        z = torch.baddbmm(step_inputs, h, recurrent)
        i, j, f, o = z.chunk(4, dim=2)
        c = (torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)).clamp(-CLIP, CLIP)  # (2, B, C)
        h = torch.bmm(torch.sigmoid(o) * torch.tanh(c), projection).clamp(-CLIP, CLIP)  # (2, B, P)
        outputs.append(h)
    return torch.cat(outputs, dim=1)


def one_by_one(cells: list[LstmCellWithProjection], x: torch.Tensor, steps: int, batch: int) -> torch.Tensor:
    """The pretraining path: each direction's cell over its own rows, one after the other."""
    state = (x.new_zeros(batch, PROJ), x.new_zeros(batch, CELLS))
    return torch.stack([cell(x[d], [batch] * steps, state)[0] for d, cell in enumerate(cells)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cells = [LstmCellWithProjection(PROJ, CELLS, PROJ, CLIP, CLIP) for _ in range(2)]
    x = torch.randn(2, args.steps * args.batch, PROJ)
    with torch.no_grad():
        same = one_by_one(cells, x, args.steps, args.batch)
        diff = (batched_directions(cells, x, args.steps, args.batch) - same).abs().max().item()
    if diff > 1e-4:
        sys.exit(f"lstm_directions: the batched cell differs from LstmCellWithProjection by {diff:.2e}")
    variants: dict[str, Variant] = {"one by one": one_by_one, "batched (bmm)": batched_directions}
    print(f"{machine()}; batch {args.batch} x {args.steps} steps, max |difference| {diff:.1e}\n")
    rows = []
    for bf16 in (False, True):
        timed = {
            name: partial(train, fn, cells, x, args.steps, args.batch, bf16) for name, fn in variants.items()
        }
        loop, batched = (1000 * m.median for m in interleaved(timed, args.repeats).values())
        precision = "bf16-mixed" if bf16 else "fp32"
        rows.append((precision, f"{loop:.1f}", f"{batched:.1f}", f"{loop / batched:.2f}x"))
    print_table(["precision", "one by one, ms", "batched, ms", "speed-up"], rows)


def train(
    fn: Variant, cells: list[LstmCellWithProjection], x: torch.Tensor, steps: int, batch: int, bf16: bool
) -> None:
    """Forward and backward of one variant, under bf16 autocast or in fp32."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        fn(cells, x, steps, batch).float().sum().backward()


if __name__ == "__main__":
    main()
