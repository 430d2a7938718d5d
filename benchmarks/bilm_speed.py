"""Time ner_app's biLM against a straightforward per-timestep implementation of the same model.

    python benchmarks/bilm_speed.py [--size original|small|tiny] [--threads 2] [--repeats 5] [--batch 64]
                                    [--gpu-batches 64,512]

Random weights are written with ``save_bilm`` and read back by both sides: ours with ``load_bilm``, the
baseline with its own h5py loader (TF layout). The baseline has the reference implementation's structure:
char CNN on every padded position, then z = [x_t; h_{t-1}] W_0 + B per step over the whole padded batch with
masked state updates. Data: seeded sentences of 20-30 tokens drawn Zipf-like from ~2000 made-up words.
Prints a markdown table of median tokens/s (real tokens, without <S>/</S>).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import h5py
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
from ner_app.bilm import BidirectionalLM, BilmOptions, batch_to_ids, load_bilm, read_options, save_bilm  # noqa: E402
from ner_app.bilm.char_cnn import CharCNN  # noqa: E402
from ner_app.bilm.char_mapper import BOS_IDS, EOS_IDS, MAX_CHARS  # noqa: E402

FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
# char_dim, filters, n_highway, activation, C, P, L, cell_clip, proj_clip, skip connections
SIZES = {
    "original": BilmOptions(16, FILTERS, 2, "relu", 4096, 512, 2, 3.0, 3.0, True),
    # small: the public 2x1024_128_2048cnn_1xhighway shape
    "small": BilmOptions(16, FILTERS, 1, "relu", 1024, 128, 2, 3.0, 3.0, True),
    "tiny": BilmOptions(16, ((1, 8), (2, 8), (3, 16), (4, 32)), 1, "relu", 64, 16, 2, 3.0, 3.0, True),
}
ORIGINAL_PARAMS = 93_600_864
Cell = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # W_0 (I+P, 4C), B + forget bias (4C,), W_P_0 (C, P)
PUNCTUATION = [".", ",", "'s", '"', "(", ")", ";", ":", "-", "?", "1999", "3.5", "%", "$"]


def init_weights(bilm: BidirectionalLM, seed: int = 0) -> None:
    """Non-saturating random weights: matrices N(0, 1/fan_in), char embeddings N(0, 1), biases U(+-0.1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in bilm.named_parameters():
            if param.dim() == 1:
                param.copy_((torch.rand(param.shape, generator=gen) * 2 - 1) * 0.1)
            elif "char_embed" in name:
                param.copy_(torch.randn(param.shape, generator=gen))
                param[0] = 0.0  # the padding row
            else:
                param.copy_(torch.randn(param.shape, generator=gen) / param[0].numel() ** 0.5)


def make_sentences(count: int, seed: int = 0) -> list[list[str]]:
    """``count`` sentences of 20-30 tokens over a fixed vocabulary of ~2000 words, Zipf-like frequencies."""
    rng = random.Random(seed)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    freqs = [13, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 0.2, 0.2, 0.2, 0.2]
    words: list[str] = []
    seen = set(PUNCTUATION)
    while len(words) < 2000 - len(PUNCTUATION):
        word = "".join(rng.choices(letters, freqs, k=min(1 + int(rng.expovariate(1 / 5)), 18)))
        word = word.capitalize() if rng.random() < 0.15 else word
        if word not in seen:
            seen.add(word)
            words.append(word)
    vocab = PUNCTUATION + words  # punctuation gets the top ranks, as in real text
    cum, total = [], 0.0
    for rank in range(len(vocab)):
        total += 1.0 / (rank + 1)
        cum.append(total)
    return [rng.choices(vocab, cum_weights=cum, k=rng.randint(20, 30)) for _ in range(count)]


class Baseline:
    """The same biLM, read straight from the weights hdf5 (TF layout), computed one time step at a time."""

    def __init__(self, options_path: Path, weights_path: Path) -> None:
        opts = read_options(options_path)
        self.opts = opts
        w: dict[str, torch.Tensor] = {}

        def read(name: str, obj: object) -> None:
            if isinstance(obj, h5py.Dataset):
                w[name] = torch.from_numpy(obj[...])

        with h5py.File(weights_path, "r") as f:
            f.visititems(read)
        emb = w["char_embed"]  # (261, d); id 0 is padding, all zeros
        self.char_embed = torch.cat([emb.new_zeros(1, emb.shape[1]), emb])
        # (1, width, d, count) -> conv1d weight (count, d, width)
        kernels = [w[f"CNN/W_cnn_{i}"][0].permute(2, 1, 0).contiguous() for i in range(len(opts.filters))]
        self.convs = [(k, w[f"CNN/b_cnn_{i}"]) for i, k in enumerate(kernels)]
        parts = ("W_transform", "b_transform", "W_carry", "b_carry")
        self.highway = [[w[f"CNN_high_{k}/{p}"] for p in parts] for k in range(opts.n_highway)]
        self.proj = w["CNN_proj/W_proj"], w["CNN_proj/b_proj"]
        self.cells: list[list[Cell]] = []  # [direction][layer]
        size = opts.lstm_dim
        for d in range(2):
            layers = []
            for layer in range(opts.n_layers):
                prefix = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
                bias = w[f"{prefix}/B"].clone()
                bias[2 * size : 3 * size] += 1.0  # TF's forget bias on the f block (gate order i, j, f, o)
                layers.append((w[f"{prefix}/W_0"], bias, w[f"{prefix}/W_P_0"]))
            self.cells.append(layers)

    def encode(self, ids: torch.Tensor) -> torch.Tensor:
        """Char ids (N, 50) -> token representations (N, P), every row computed (no dedup)."""
        x = self.char_embed[ids].transpose(1, 2)  # (N, d, 50)
        act = torch.relu if self.opts.activation == "relu" else torch.tanh
        feats = torch.cat([act(F.conv1d(x, k, b).amax(dim=-1)) for k, b in self.convs], dim=-1)  # (N, F)
        for w_t, b_t, w_c, b_c in self.highway:
            gate = torch.sigmoid(feats @ w_c + b_c)
            feats = gate * torch.relu(feats @ w_t + b_t) + (1 - gate) * feats
        return feats @ self.proj[0] + self.proj[1]

    def run_layer(self, x: torch.Tensor, mask: torch.Tensor, cell: Cell, reverse: bool) -> torch.Tensor:
        """x (B, S, I), mask (B, S) -> h (B, S, P); backward just walks the padded steps right to left."""
        w_0, bias, w_p = cell
        size, cell_clip, proj_clip = self.opts.lstm_dim, self.opts.cell_clip, self.opts.proj_clip
        h, c = x.new_zeros(x.shape[0], w_p.shape[1]), x.new_zeros(x.shape[0], size)
        out = x.new_zeros(x.shape[0], x.shape[1], w_p.shape[1])
        for t in reversed(range(x.shape[1])) if reverse else range(x.shape[1]):
            z = torch.cat([x[:, t], h], dim=1) @ w_0 + bias  # (B, 4C)
            i, j, f, o = z.split(size, dim=1)
            c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
            c_new = c_new if cell_clip is None else c_new.clamp(-cell_clip, cell_clip)
            h_new = (torch.sigmoid(o) * torch.tanh(c_new)) @ w_p
            h_new = h_new if proj_clip is None else h_new.clamp(-proj_clip, proj_clip)
            keep = mask[:, t, None]  # (B, 1): finished (or not yet started) rows keep their state
            h, c = torch.where(keep, h_new, h), torch.where(keep, c_new, c)
            out[:, t] = h_new * keep
        return out

    def __call__(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids (B, T, 50) -> top layer (B, T+2, 2P) with <S>/</S>, zero at padded positions."""
        return self.layers(char_ids)[-1]

    def layers(self, char_ids: torch.Tensor) -> list[torch.Tensor]:
        """char_ids (B, T, 50) -> L+1 layers (B, T+2, 2P): the token layer [x; x], then each LSTM layer."""
        batch, steps, _ = char_ids.shape
        lengths = (char_ids > 0).any(dim=-1).sum(dim=1)
        ids = char_ids.new_zeros(batch, steps + 2, MAX_CHARS)
        ids[:, 1:-1] = char_ids
        ids[:, 0] = torch.tensor(BOS_IDS)
        ids[torch.arange(batch), lengths + 1] = torch.tensor(EOS_IDS)
        mask = (ids > 0).any(dim=-1)  # (B, T+2)
        x = self.encode(ids.view(-1, MAX_CHARS)).view(batch, steps + 2, -1) * mask[:, :, None]
        per_direction: list[list[torch.Tensor]] = []
        for d, layers in enumerate(self.cells):
            inputs, outs = x, []
            for index, cell in enumerate(layers):
                out = self.run_layer(inputs, mask, cell, reverse=d == 1)
                inputs = out + inputs if self.opts.use_skip_connections and index > 0 else out
                outs.append(inputs)
            per_direction.append(outs)
        result = [torch.cat([x, x], dim=-1)]
        result += [torch.cat([f, b], dim=-1) * mask[:, :, None] for f, b in zip(*per_direction, strict=True)]
        return result


def seconds(fn: Callable[[], object], cuda: bool = False) -> float:
    """Wall time of one call (synchronised on GPU)."""
    if cuda:
        torch.cuda.synchronize()
    begin = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - begin


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


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
    opts = SIZES[args.size]
    n_params = opts.num_parameters()
    if args.size == "original" and n_params != ORIGINAL_PARAMS:
        raise RuntimeError(f"original model has {n_params:,} parameters, expected {ORIGINAL_PARAMS:,}")

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="bilm_speed_") as tmp, torch.inference_mode():
        built = opts.build()
        init_weights(built)
        options_path, weights_path = save_bilm(built, tmp)
        del built
        ours, baseline = load_bilm(options_path, weights_path).eval(), Baseline(options_path, weights_path)

        check = batch_to_ids([s[:n] for s, n in zip(make_sentences(3, seed=1), (30, 21, 7), strict=True)])
        expected, got = baseline(check), ours(check).layers[-1]
        diff = (expected - got).abs().max().item()
        if not torch.allclose(expected, got, atol=1e-4):
            raise RuntimeError(f"baseline and ner_app biLM disagree: max abs diff {diff:.2e}")

        sentences = make_sentences(args.batch)
        ids = batch_to_ids(sentences)
        tokens = sum(len(s) for s in sentences)

        def untrimmed() -> object:  # the char CNN over all 50 ids (the code path before the tail trim)
            CharCNN.trim_tail = False
            try:
                return ours(ids)
            finally:
                CharCNN.trim_tail = True

        def bf16() -> object:  # opt-in: bf16 autocast on CPUs with AVX512-BF16 / AMX
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return ours(ids)

        timed: dict[str, Callable[[], object]] = {
            "baseline": lambda: baseline(ids), "ours, char CNN over 50 ids": untrimmed, "ours": lambda: ours(ids),
            "ours, bf16 autocast": bf16,
        }  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in timed}
        for fn in timed.values():
            fn()  # warm-up
        for _ in range(args.repeats):  # interleaved, to share the machine's noise fairly
            for name, fn in timed.items():
                times[name].append(seconds(fn))
        rows = [
            (
                name,
                "cpu",
                "bf16" if "bf16" in name else "fp32",
                args.batch,
                tokens / statistics.median(times[name]),
            )
            for name in timed
        ]

        gpu = ""
        if torch.cuda.is_available():
            gpu = f", GPU {torch.cuda.get_device_name()}"
            ours = ours.cuda()
            for batch in (int(b) for b in args.gpu_batches.split(",")):
                batch_sentences = make_sentences(batch)
                gpu_ids = batch_to_ids(batch_sentences).cuda()
                gpu_tokens = sum(len(s) for s in batch_sentences)
                for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
                    with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                        runs = [seconds(partial(ours, gpu_ids), cuda=True) for _ in range(args.repeats + 1)]
                    rate = gpu_tokens / statistics.median(runs[1:])  # run 0 is the warm-up
                    rows.append(("ours", "cuda", name, batch, rate))

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU {cpu_model()}{gpu}; "
        f"biLM '{args.size}' {n_params:,} parameters; median of {args.repeats}; "
        f"check vs baseline: max abs diff {diff:.1e}"
    )
    print()
    print("| implementation | device | dtype | batch | tokens/s | speedup vs baseline |")
    print("|---|---|---|---:|---:|---:|")
    base = rows[0][4]
    for name, device, dtype, batch, rate in rows:
        print(f"| {name} | {device} | {dtype} | {batch} | {rate:,.0f} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
