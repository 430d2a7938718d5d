"""Time ner_app's biLM against a straightforward per-timestep implementation of the same model.

    python -m benchmarks.bilm_speed [--size original|small|tiny] [--threads 2] [--repeats 5] [--batch 64]
                                    [--gpu-batches 64,512]

Random weights are written with ``save_bilm`` and read back by both sides: ours with ``load_bilm``, the
baseline (``common.Baseline``) with its own h5py loader (TF layout). The baseline has the reference
implementation's structure: char CNN on every padded position, then z = [x_t; h_{t-1}] W_0 + B per step over
the whole padded batch with masked state updates. Data: seeded sentences of 20-30 tokens drawn Zipf-like from
~2000 made-up words. Every implementation is warmed up once, then timed one forward pass at a time, the
implementations in turn (``common.interleaved``). Prints a markdown table of median tokens/s (real tokens,
without <S>/</S>), and the matmul and convolution FLOPs of one forward of each on the timed batch.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from functools import partial

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import SIZES, Baseline, interleaved, machine, make_sentences, print_table, random_bilm
from ner_app.bilm import batch_to_ids, load_bilm, save_bilm
from ner_app.bilm.bilm import set_code_paths

Row = tuple[str, str, str, int, float]  # implementation, device, dtype, batch, tokens/s


def cpu_rows(ours: torch.nn.Module, baseline: Baseline, batch: int, repeats: int) -> list[Row]:
    """The baseline, ours with the char CNN over all 50 ids, ours, ours under bf16 autocast, on the CPU."""
    sentences = make_sentences(batch)
    ids = batch_to_ids(sentences)
    tokens = sum(len(s) for s in sentences)

    def untrimmed() -> object:  # the char CNN over all 50 ids (the code path before the tail trim)
        set_code_paths(ours, trim_tail=False)
        try:
            return ours(ids)
        finally:
            set_code_paths(ours, trim_tail=True)

    def bf16() -> object:  # opt-in: bf16 autocast on CPUs with AVX512-BF16 / AMX
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return ours(ids)

    timed: dict[str, Callable[[], object]] = {
        "baseline": lambda: baseline(ids),
        "ours, char CNN over 50 ids": untrimmed,
        "ours": lambda: ours(ids),
        "ours, bf16 autocast": bf16,
    }
    medians = {name: m.median for name, m in interleaved(timed, repeats).items()}
    return [
        (name, "cpu", "bf16" if "bf16" in name else "fp32", batch, tokens / medians[name]) for name in timed
    ]


def count_flops(model: Callable[[torch.Tensor], object], ids: torch.Tensor) -> float:
    """Matmul and convolution FLOPs of one forward (``torch.utils.flop_counter.FlopCounterMode``)."""
    with FlopCounterMode(display=False) as counter:
        model(ids)
    return float(counter.get_total_flops())


def on_gpu(model: torch.nn.Module, ids: torch.Tensor, dtype: torch.dtype) -> object:
    with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
        return model(ids)


def gpu_rows(ours: torch.nn.Module, batches: list[int], repeats: int) -> list[Row]:
    """Ours on the GPU in fp32 and under bf16 autocast, at each batch size."""
    ours = ours.cuda()
    rows = []
    for batch in batches:
        sentences = make_sentences(batch)
        ids = batch_to_ids(sentences).cuda()
        tokens = sum(len(s) for s in sentences)

        timed = {
            "fp32": partial(on_gpu, ours, ids, torch.float32),
            "bf16": partial(on_gpu, ours, ids, torch.bfloat16),
        }
        for dtype, m in interleaved(timed, repeats).items():
            rows.append(("ours", "cuda", dtype, batch, tokens / m.median))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--size", choices=sorted(SIZES), default="original", help="model size (default original)")
    add("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    add("--repeats", type=int, default=5, help="timed forward passes per implementation (default 5)")
    add("--batch", type=int, default=64, help="CPU batch size in sentences (default 64)")
    add("--gpu-batches", default="64,512", help="GPU batch sizes, comma-separated (default 64,512)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    n_params = SIZES[args.size].num_parameters()

    with tempfile.TemporaryDirectory(prefix="bilm_speed_") as tmp, torch.inference_mode():
        options_path, weights_path = save_bilm(random_bilm(args.size), tmp)
        ours, baseline = load_bilm(options_path, weights_path).eval(), Baseline(options_path, weights_path)

        check = batch_to_ids([s[:n] for s, n in zip(make_sentences(3, seed=1), (30, 21, 7), strict=True)])
        expected, got = baseline(check), ours(check).layers[-1]
        diff = (expected - got).abs().max().item()
        if not torch.allclose(expected, got, atol=1e-4):
            raise RuntimeError(f"baseline and ner_app biLM disagree: max abs diff {diff:.2e}")

        timed = batch_to_ids(make_sentences(args.batch))  # the batch cpu_rows times
        flops = {name: count_flops(model, timed) for name, model in (("ours", ours), ("baseline", baseline))}
        rows = cpu_rows(ours, baseline, args.batch, args.repeats)
        if torch.cuda.is_available():
            rows += gpu_rows(ours, [int(b) for b in args.gpu_batches.split(",")], args.repeats)

    print(
        f"{machine()}; biLM '{args.size}' {n_params:,} parameters; median of {args.repeats}; "
        f"check vs baseline: max abs diff {diff:.1e}; matmul and convolution GFLOP per CPU forward: ours "
        f"{flops['ours'] / 1e9:.2f}, baseline {flops['baseline'] / 1e9:.2f} ({flops['baseline'] / flops['ours']:.2f}x)\n"
    )
    base = rows[0][4]
    header = ["implementation", "device", "dtype", "batch", "tokens/s", "speedup vs baseline"]
    print_table(header, [(*row[:4], f"{row[4]:,.0f}", f"{row[4] / base:.2f}x") for row in rows], left=3)


if __name__ == "__main__":
    main()
