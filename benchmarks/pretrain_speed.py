"""Pretraining throughput of one biLM architecture under several code paths, side by side in one run.

    python -m benchmarks.pretrain_speed [--config configs/bilm_news.yaml] [--threads 2] [--repeats 7]
                                        [--variants today,trim-bf16,trim-b256,...] [--tokens 400000]

Every variant trains the SAME model (the config's architecture, vocabulary and negatives) on the same corpus
prefix: one step is the work of a Lightning step (``BilmLanguageModel.training_step`` under autocast where the
variant asks for bf16, backward, gradient-norm clipping, the optimiser). Steps of all variants are interleaved
round-robin, so a busy machine slows them alike; each step is timed by ``torch.utils.benchmark.timer`` and the
table gives the median step. FLOPs per step are counted with ``torch.utils.flop_counter.FlopCounterMode``
(matmuls and convolutions, forward and backward) and compared with the cores' peak; ``peak`` lines measure a
large fp32 and bf16 matmul on the same cores (``Timer.blocked_autorange``). A second table splits one step of
the baseline and of the fastest variant into its parts, and a third times the sampled softmax against
``torch.nn.AdaptiveLogSoftmaxWithLoss`` on the same hidden states. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from torch.utils.benchmark import timer
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import autorange, cpu_info, interleaved, machine, measurement, print_table
from ner_app.bilm.bilm import set_code_paths
from ner_app.config.load import BilmPretrainConfig, load_config
from ner_app.pretrain.batches import IGNORE
from ner_app.pretrain.data import read_corpus
from ner_app.pretrain.module import BilmLanguageModel
from ner_app.pretrain.run import bilm_options
from ner_app.pretrain.softmax import SampledSoftmaxLoss
from ner_app.pretrain.streams import StreamBatches
from ner_app.pretrain.vocab import SoftmaxVocab

# name: (batch size, bf16 autocast, char CNN without the padding tail, the char CNN's max passing its gradient
# to one window); "today" is the original code path, "...-argmax" the default one
VARIANTS = {
    "today": (64, False, False, False),
    "trim": (64, False, True, False),
    "trim-argmax": (64, False, True, True),
    "trim-bf16": (64, True, True, False),
    "trim-bf16-argmax": (64, True, True, True),
    "trim-b128": (128, False, True, False),
    "trim-b128-bf16": (128, True, True, False),
    "trim-b256": (256, False, True, False),
    "trim-b256-bf16": (256, True, True, False),
    "trim-b512-bf16": (512, True, True, False),
}


def lstm_direction(
    module: BilmLanguageModel, direction: str, x: torch.Tensor, resets: torch.Tensor | None
) -> torch.Tensor:
    """One direction's LSTM stack over a window, its state carried: the one place this benchmark reaches into
    pretraining's per-direction stack (follow ``training_step`` here when that moves)."""
    return module.direction_top(direction, x, resets)


class Variant:
    """One model + optimiser + batch stream; ``step()`` trains one window and returns its seconds."""

    def __init__(self, name: str, cfg: BilmPretrainConfig, corpus: Any, vocab: SoftmaxVocab) -> None:
        self.name = name
        self.batch, self.bf16, self.trim, self.argmax = VARIANTS[name]
        t = cfg.train
        torch.manual_seed(cfg.seed)
        self.module = BilmLanguageModel(
            bilm_options(cfg).to_dict(),
            len(vocab),
            t.n_negative_samples,
            cfg.model.dropout,
            t.optimizer,
            t.lr,
            cfg.seed,
            sentence_reset=t.sentence_reset,
        )
        for hook in ("log", "log_dict"):  # no Trainer to log to
            setattr(self.module, hook, lambda *a, **k: None)
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

    def step(self) -> float:
        """Seconds of one training step (the batch is made before the clock starts)."""
        set_code_paths(self.module, trim_tail=self.trim, argmax_grad=self.argmax)
        batch = self.next_batch()
        start = timer()
        with self.autocast():
            loss = self.module.training_step(batch, 0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return timer() - start

    def flops(self) -> float:
        """FLOPs of one step (matmuls and convolutions, forward + backward)."""
        with FlopCounterMode(display=False) as counter:
            self.step()
        return float(counter.get_total_flops())

    def parts(self) -> dict[str, float]:
        """Seconds of one step's parts: token encoder, LSTM stacks, softmax, backward, clip + optimiser."""
        set_code_paths(self.module, trim_tail=self.trim, argmax_grad=self.argmax)
        m, batch = self.module, self.next_batch()
        if batch["window"] == 0:
            m.states = {"forward": None, "backward": None}
        clock = [timer()]
        times: dict[str, float] = {}

        def lap(name: str) -> None:
            now = timer()
            times[name] = times.get(name, 0.0) + now - clock[0]
            clock[0] = now

        with self.autocast():
            fwd, bwd = batch["forward"], batch["backward"]
            chars, mask = torch.cat([fwd["char_ids"], bwd["char_ids"]]), torch.cat([fwd["mask"], bwd["mask"]])
            embedded = m.embed(chars, mask).split(len(fwd["mask"]))
            lap("char CNN fwd")
            losses = []
            for direction, x in zip(("forward", "backward"), embedded, strict=True):
                # as training_step: sentence starts, or without sentence resets the document starts
                resets = batch[direction].get("resets" if m.hparams["sentence_reset"] else "document_resets")
                top = m.output_dropout(lstm_direction(m, direction, x, resets))
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
    losses: dict[str, Callable[[], torch.Tensor]] = {
        f"sampled ({cfg.train.n_negative_samples} negatives)": lambda: sampled.sampled_loss(hidden, labels),
        f"adaptive (cutoffs {cutoffs}, div 4)": lambda: adaptive(hidden, labels).loss,
        "full softmax": lambda: full.sampled_loss(hidden, labels),
    }
    runs = {name: (lambda loss=loss: loss().backward()) for name, loss in losses.items()}
    return {name: m.median for name, m in interleaved(runs, repeats, warmup=0).items()}


def matmul_peak(dtype: torch.dtype, size: int = 2048) -> float:
    """GFLOP/s of a (size x size) @ (size x size) matmul in ``dtype`` (``Timer.blocked_autorange``, median)."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    return 2 * size**3 / autorange(lambda: torch.mm(a, b), f"mm {dtype}").median / 1e9


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
    unknown = [name for name in args.variants.split(",") if name not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    overrides = [f"train.unroll_steps={args.unroll}"] if args.unroll else []
    cfg = load_config(args.config, overrides, schema=BilmPretrainConfig)
    corpus = read_corpus(cfg.data.train, args.tokens)
    vocab = SoftmaxVocab.from_counts(corpus.counts(), cfg.data.vocab_size)
    variants = [Variant(name, cfg, corpus, vocab) for name in args.variants.split(",")]
    print(
        f"config {args.config}: biLM {bilm_options(cfg).num_parameters():,} parameters, softmax "
        f"{len(vocab):,} x {cfg.model.projection_dim}, {cfg.train.n_negative_samples} negatives, "
        f"unroll {cfg.train.unroll_steps}; {machine()}"
    )
    for v in variants:
        for _ in range(args.warmup):
            v.step()
    seconds: dict[str, list[float]] = {v.name: [] for v in variants}
    for _ in range(args.repeats):
        for v in variants:
            seconds[v.name].append(v.step())
    median = {name: measurement(name, times).median for name, times in seconds.items()}
    mhz = float(cpu_info("cpu MHz") or 0.0)
    # Peak: 2 AVX-512 FMA units x 16 fp32 lanes x 2 flops per core and cycle; AMX: 1024 bf16 flops per core
    # and cycle (Intel's figure for one TMUL). Both at the nominal clock of /proc/cpuinfo.
    peak32 = args.threads * 2 * 16 * 2 * mhz / 1e3
    peak16 = args.threads * 1024 * mhz / 1e3
    print(
        f"\npeak (nominal {mhz:.0f} MHz, {args.threads} cores): fp32 FMA {peak32:.0f} GFLOP/s, "
        f"AMX bf16 {peak16:.0f} GFLOP/s; measured 2048^3 matmul: fp32 {matmul_peak(torch.float32):.0f} "
        f"GFLOP/s, bf16 {matmul_peak(torch.bfloat16):.0f} GFLOP/s\n"
    )
    base_speed = variants[0].tokens / median[variants[0].name]
    rows = []
    for v in variants:
        step = median[v.name]
        speed = v.tokens / step
        gflop = 0.0 if args.no_flops else v.flops() / 1e9
        peak = peak16 if v.bf16 else peak32
        rows.append(
            (
                v.name,
                f"{v.batch}x{cfg.train.unroll_steps}",
                "bf16-mixed" if v.bf16 else "32-true",
                ("trimmed" if v.trim else "50 ids") + (", argmax" if v.argmax else ""),
                f"{step * 1e3:.0f}",
                f"{speed:,.0f}",
                f"{speed / base_speed:.2f}x",
                f"{gflop:.1f}",
                f"{gflop / step:.0f}",
                f"{100 * gflop / step / peak:.1f}%" if peak else "n/a",
            )
        )
    header = [
        "variant",
        "batch x unroll",
        "precision",
        "char CNN",
        "ms/step",
        "tokens/s",
        f"vs {variants[0].name}",
        "GFLOP/step",
        "GFLOP/s",
        "% of peak",
    ]
    print_table(header, rows, left=4)
    fastest = max(variants, key=lambda v: v.tokens / median[v.name])
    shown = [variants[0]] + ([fastest] if fastest is not variants[0] else [])
    parts = {v.name: [v.parts() for _ in range(3)] for v in shown}
    print("\nOne step in parts (median of 3, ms):\n")
    keys = list(parts[shown[0].name][0])
    print_table(
        ["part", *(v.name for v in shown)],
        [
            (key, *(f"{statistics.median(p[key] for p in parts[v.name]) * 1e3:.0f}" for v in shown))
            for key in keys
        ],
    )
    hidden_rows = 2 * fastest.batch * cfg.train.unroll_steps
    print(
        f"\nSoftmax loss fwd + bwd on {hidden_rows} hidden rows (both directions of a {fastest.batch}-row step), fp32:\n"
    )
    costs = softmax_costs(cfg, len(vocab), hidden_rows, args.repeats)
    print_table(["softmax", "ms"], [(name, f"{seconds * 1e3:.0f}") for name, seconds in costs.items()])


if __name__ == "__main__":
    main()
