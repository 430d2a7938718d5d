"""Pretraining throughput of one biLM architecture under several code paths, side by side in one run.

    python benchmarks/pretrain_speed.py [--config configs/bilm_news.yaml] [--threads 2] [--repeats 7]
                                        [--variants today,bf16,b256,b256-bf16,...] [--tokens 400000]

Every variant trains the SAME model (the config's architecture, vocabulary and negatives) on the same corpus
prefix: one step is the work of a Lightning step (training_step under autocast where the variant asks for
bf16, backward, gradient-norm clipping, the optimiser). Steps of all variants are interleaved round-robin, so
a busy machine slows them alike; the table gives the median step. FLOPs per step are counted with
``torch.utils.flop_counter.FlopCounterMode`` (matmuls and convolutions, forward and backward) and compared
with the cores' peak; ``peak`` lines measure a large fp32 and bf16 matmul on the same cores. A second table
splits one step of the baseline and of the fastest variant into its parts, and times the sampled softmax
against ``torch.nn.AdaptiveLogSoftmaxWithLoss`` on the same hidden states. See docs/pretraining_speed.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from ner_app.bilm.char_cnn import CharCNN  # noqa: E402
from ner_app.bilm.lstm import LstmCellWithProjection  # noqa: E402
from ner_app.config import BilmPretrainConfig, load_config  # noqa: E402
from ner_app.pretrain.data import IGNORE, StreamBatches, read_corpus  # noqa: E402
from ner_app.pretrain.module import BilmLanguageModel  # noqa: E402
from ner_app.pretrain.run import bilm_options  # noqa: E402
from ner_app.pretrain.vocab import SoftmaxVocab  # noqa: E402

# name: (batch size, bf16 autocast, fused recurrence, char CNN without the padding tail)
VARIANTS = {
    "today": (64, False, False, False),
    "trim": (64, False, False, True),
    "fused": (64, False, True, False),
    "trim-bf16": (64, True, False, True),
    "trim-b128": (128, False, False, True),
    "trim-b128-bf16": (128, True, False, True),
    "trim-b256": (256, False, False, True),
    "trim-b256-bf16": (256, True, False, True),
    "trim-b256-bf16-fused": (256, True, True, True),
    "trim-b512-bf16": (512, True, False, True),
}


class Variant:
    """One model + optimiser + batch stream; ``step()`` trains one window and returns its seconds."""

    def __init__(self, name: str, cfg: BilmPretrainConfig, corpus: Any, vocab: SoftmaxVocab) -> None:
        self.name = name
        self.batch, self.bf16, self.fused, self.trim = VARIANTS[name]
        t = cfg.train
        torch.manual_seed(cfg.seed)
        self.module = BilmLanguageModel(
            bilm_options(cfg).to_dict(), len(vocab), t.n_negative_samples, cfg.model.dropout, t.optimizer,
            t.lr, cfg.seed, sentence_reset=t.sentence_reset,
        )  # fmt: skip
        self.module.log = self.module.log_dict = lambda *a, **k: None  # no Trainer attached
        self.module.train()
        self.optimizer = self.module.configure_optimizers()
        self.grad_clip = t.grad_clip
        self.batches = StreamBatches(corpus, vocab, self.batch, t.unroll_steps, cfg.data.shuffle, cfg.seed)
        self.iterator = iter(self.batches)
        self.tokens = self.batch * t.unroll_steps

    def next_batch(self) -> dict[str, Any]:
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.batches)
            return next(self.iterator)

    def autocast(self) -> Any:
        return torch.autocast("cpu", dtype=torch.bfloat16) if self.bf16 else nullcontext()

    def select(self) -> None:
        """Switch the code paths this variant uses (class-level switches of the biLM modules)."""
        LstmCellWithProjection.fused = self.fused
        CharCNN.trim_tail = self.trim

    def step(self) -> float:
        self.select()
        batch = self.next_batch()
        start = time.perf_counter()
        with self.autocast():
            loss = self.module.training_step(batch, 0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return time.perf_counter() - start

    def flops(self) -> float:
        """FLOPs of one step (matmuls and convolutions, forward + backward)."""
        with FlopCounterMode(display=False) as counter:
            self.step()
        return float(counter.get_total_flops())

    def parts(self) -> dict[str, float]:
        """Seconds of one step's parts: token encoder, LSTM stacks, softmax, backward, clip + optimiser."""
        self.select()
        m, batch = self.module, self.next_batch()
        if batch["window"] == 0:
            m.states = {"forward": None, "backward": None}
        clock = [time.perf_counter()]
        times: dict[str, float] = {}

        def lap(name: str) -> None:
            now = time.perf_counter()
            times[name] = times.get(name, 0.0) + now - clock[0]
            clock[0] = now

        with self.autocast():
            fwd, bwd = batch["forward"], batch["backward"]
            chars, mask = torch.cat([fwd["char_ids"], bwd["char_ids"]]), torch.cat([fwd["mask"], bwd["mask"]])
            embedded = m.embed(chars, mask).split(len(fwd["mask"]))
            lap("char CNN fwd")
            losses = []
            for direction, x in zip(("forward", "backward"), embedded, strict=True):
                resets = batch[direction]["resets"] if m.hparams.sentence_reset else None
                top = m.output_dropout(m.direction_top(direction, x, resets))
                lap("LSTM fwd")
                targets = batch[direction]["targets"]
                valid = targets != IGNORE
                losses.append(m.softmax.sampled_loss(top[valid], targets[valid]))
                lap("softmax fwd")
        ((losses[0] + losses[1]) / 2).backward()
        lap("backward (all)")
        torch.nn.utils.clip_grad_norm_(m.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()
        lap("clip + optimiser")
        return times


def softmax_costs(cfg: BilmPretrainConfig, vocab_size: int, rows: int, repeats: int) -> dict[str, float]:
    """Median seconds of fwd + bwd of the sampled softmax and of an adaptive softmax on (rows, P) hidden states."""
    from ner_app.pretrain.softmax import SampledSoftmaxLoss

    dim = cfg.model.projection_dim
    sampled = SampledSoftmaxLoss(vocab_size, dim, cfg.train.n_negative_samples)
    # torch needs at least one cutoff in [1, V - 1]: a small vocabulary (smoke runs) gets one at V / 2
    cutoffs = [c for c in (2000, 10000) if c < vocab_size - 1] or [max(1, vocab_size // 2)]
    adaptive = torch.nn.AdaptiveLogSoftmaxWithLoss(dim, vocab_size, cutoffs, div_value=4.0)
    full = SampledSoftmaxLoss(vocab_size, dim, vocab_size)  # every class a candidate: the exact softmax
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(rows, dim, generator=gen, requires_grad=True)
    labels = torch.minimum(
        torch.rand(rows, generator=gen).pow(4).mul(vocab_size).long(), torch.tensor(vocab_size - 1)
    )
    runs: dict[str, Callable[[], torch.Tensor]] = {
        f"sampled ({cfg.train.n_negative_samples} negatives)": lambda: sampled.sampled_loss(hidden, labels),
        f"adaptive (cutoffs {cutoffs}, div 4)": lambda: adaptive(hidden, labels).loss,
        "full softmax": lambda: full.sampled_loss(hidden, labels),
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run().backward()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of a (size x size) @ (size x size) matmul in ``dtype``, best of ``repeats``."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_mhz() -> float | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1])
    except OSError:
        pass
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/bilm_news.yaml")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=400_000, help="corpus prefix read")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--unroll", type=int, default=None, help="override train.unroll_steps")
    parser.add_argument("--no-flops", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    overrides = [f"train.unroll_steps={args.unroll}"] if args.unroll else []
    cfg = load_config(args.config, overrides, schema=BilmPretrainConfig)
    corpus = read_corpus(cfg.data.train, args.tokens)
    vocab = SoftmaxVocab.from_counts(corpus.counts(), cfg.data.vocab_size)
    names = args.variants.split(",")
    variants = [Variant(name, cfg, corpus, vocab) for name in names]
    print(f"config {args.config}: biLM {bilm_options(cfg).num_parameters():,} parameters, softmax "
          f"{len(vocab):,} x {cfg.model.projection_dim}, {cfg.train.n_negative_samples} negatives, "
          f"unroll {cfg.train.unroll_steps}; torch {torch.__version__}, {args.threads} threads")  # fmt: skip
    for v in variants:
        for _ in range(args.warmup):
            v.step()
    times: dict[str, list[float]] = {v.name: [] for v in variants}
    for _ in range(args.repeats):
        for v in variants:
            times[v.name].append(v.step())
    mhz = cpu_mhz() or 0.0
    # Peak: 2 AVX-512 FMA units x 16 fp32 lanes x 2 flops per core and cycle; AMX: 1024 bf16 flops per core
    # and cycle (Intel's figure for one TMUL). Both at the nominal clock of /proc/cpuinfo.
    peak32 = args.threads * 2 * 16 * 2 * mhz / 1e3
    peak16 = args.threads * 1024 * mhz / 1e3
    print(f"\npeak (nominal {mhz:.0f} MHz, {args.threads} cores): fp32 FMA {peak32:.0f} GFLOP/s, "
          f"AMX bf16 {peak16:.0f} GFLOP/s; measured 2048^3 matmul: fp32 {matmul_peak(torch.float32):.0f} "
          f"GFLOP/s, bf16 {matmul_peak(torch.bfloat16):.0f} GFLOP/s\n")  # fmt: skip
    base = statistics.median(times[names[0]])
    base_speed = variants[0].tokens / base
    print(
        "| variant | batch x unroll | precision | recurrence | char CNN | ms/step | tokens/s | vs today | GFLOP/step | GFLOP/s | % of peak |"
    )
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for v in variants:
        step = statistics.median(times[v.name])
        speed = v.tokens / step
        gflop = 0.0 if args.no_flops else v.flops() / 1e9
        peak = peak16 if v.bf16 else peak32
        print(f"| {v.name} | {v.batch}x{cfg.train.unroll_steps} | {'bf16-mixed' if v.bf16 else '32-true'} | "
              f"{'fused' if v.fused else 'loop'} | {'trimmed' if v.trim else '50 ids'} | {step * 1e3:.0f} | {speed:,.0f} | {speed / base_speed:.2f}x | "
              f"{gflop:.1f} | {gflop / step:.0f} | {100 * gflop / step / peak:.1f}% |")  # fmt: skip
    fastest = max(variants, key=lambda v: v.tokens / statistics.median(times[v.name]))
    shown = [variants[0]] + ([fastest] if fastest is not variants[0] else [])
    parts = {v.name: [v.parts() for _ in range(3)] for v in shown}
    keys = list(parts[shown[0].name][0])
    print("\nOne step in parts (median of 3, ms):\n")
    print("| part | " + " | ".join(v.name for v in shown) + " |")
    print("|---|" + "---:|" * len(shown))
    for key in keys:
        cells = [f"{statistics.median(p[key] for p in parts[v.name]) * 1e3:.0f}" for v in shown]
        print(f"| {key} | " + " | ".join(cells) + " |")
    rows = 2 * fastest.batch * cfg.train.unroll_steps
    print(
        f"\nSoftmax loss fwd + bwd on {rows} hidden rows (both directions of a {fastest.batch}-row step), fp32:\n"
    )
    print("| softmax | ms |")
    print("|---|---:|")
    for name, seconds in softmax_costs(cfg, len(vocab), rows, args.repeats).items():
        print(f"| {name} | {seconds * 1e3:.0f} |")


if __name__ == "__main__":
    main()
