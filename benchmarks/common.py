"""What the benchmarks share: biLM sizes with seeded weights and sentences, the per-timestep reference biLM,
the machine's name, timing through ``torch.utils.benchmark`` and markdown tables.

Timing: a function that can run many times alike is measured by ``Timer.blocked_autorange``; a slow or
stateful call is measured one call at a time by ``torch.utils.benchmark.timer`` (which waits for the
accelerator) and summarised as a ``Measurement``. ``interleaved`` does either in rounds, one implementation
after another, so that a busy machine slows all of them alike.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import h5py
import torch
import torch.nn.functional as F
from torch.utils.benchmark import Measurement, TaskSpec, Timer, timer

from ner_app.bilm import BidirectionalLM, BilmOptions, read_options
from ner_app.bilm.char_mapper import BOS_IDS, EOS_IDS, MAX_CHARS

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NER_SHARED") or ROOT.parent / "shared")

# ------------------------------------------------------------------------------------------- biLM sizes
FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
# char_dim, filters, n_highway, activation, C, P, L, cell_clip, proj_clip, skip connections
SIZES = {
    "original": BilmOptions(16, FILTERS, 2, "relu", 4096, 512, 2, 3.0, 3.0, True),
    # small: the public 2x1024_128_2048cnn_1xhighway shape
    "small": BilmOptions(16, FILTERS, 1, "relu", 1024, 128, 2, 3.0, 3.0, True),
    "tiny": BilmOptions(16, ((1, 8), (2, 8), (3, 16), (4, 32)), 1, "relu", 64, 16, 2, 3.0, 3.0, True),
}
ORIGINAL_PARAMS = 93_600_864
PUNCTUATION = [".", ",", "'s", '"', "(", ")", ";", ":", "-", "?", "1999", "3.5", "%", "$"]


def check_size(size: str, parameters: int) -> None:
    """The original size must have the paper's parameter count."""
    if size == "original" and parameters != ORIGINAL_PARAMS:
        raise RuntimeError(f"original biLM has {parameters:,} parameters, expected {ORIGINAL_PARAMS:,}")


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


def random_bilm(size: str, seed: int = 0) -> BidirectionalLM:
    """The biLM of ``SIZES[size]`` with ``init_weights`` (the original size checked by its parameter count)."""
    torch.manual_seed(seed)
    bilm = SIZES[size].build()
    init_weights(bilm, seed)
    check_size(size, sum(p.numel() for p in bilm.parameters()))
    return bilm


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


# ---------------------------------------------------------------------------- the per-timestep reference
Cell = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # W_0 (I+P, 4C), B + forget bias (4C,), W_P_0 (C, P)


class Baseline:
    """The same biLM, read straight from the weights hdf5 (TF layout), computed one time step at a time: the
    reference implementation's structure (char CNN on every padded position, then z = [x_t; h_{t-1}] W_0 + B
    per step over the whole padded batch with masked state updates)."""

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


# ---------------------------------------------------------------------------------------- the machine
def cpu_info(key: str) -> str | None:
    """The first ``key`` line of /proc/cpuinfo ("model name", "cpu MHz"), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_name() -> str:
    return cpu_info("model name") or "unknown CPU"


def gpu_name() -> str | None:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def machine() -> str:
    """torch version, intra-op threads, CPU and (where there is one) GPU, for a table's header."""
    gpu = gpu_name()
    return f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU {cpu_name()}" + (
        f", GPU {gpu}" if gpu else ""
    )


# ------------------------------------------------------------------------------------------ timing
def measurement(name: str, seconds: Sequence[float]) -> Measurement:
    """Per-call seconds as a ``Measurement`` (median, IQR, ...)."""
    spec = TaskSpec(stmt=name, setup="", num_threads=torch.get_num_threads())
    return Measurement(number_per_run=1, raw_times=list(seconds), task_spec=spec)


def clocked(fn: Callable[[], object]) -> float:
    """Seconds of one call of ``fn`` by ``torch.utils.benchmark.timer`` (it waits for the accelerator)."""
    start = timer()
    fn()
    return timer() - start


def autorange(fn: Callable[[], object], name: str, min_run_time: float = 0.2) -> Measurement:
    """``Timer.blocked_autorange`` of ``fn`` at the current thread count (Timer's own default is one thread)."""
    timed = Timer("fn()", globals={"fn": fn}, description=name, num_threads=torch.get_num_threads())
    return timed.blocked_autorange(min_run_time=min_run_time)


def interleaved(
    fns: Mapping[str, Callable[[], object]],
    repeats: int,
    warmup: int = 1,
    min_run_time: float | None = None,
) -> dict[str, Measurement]:
    """Each function ``warmup`` times, then ``repeats`` rounds of all functions in turn, so that a busy
    machine slows them alike. A round is one call (``min_run_time`` None) or one ``autorange``."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    parts: dict[str, list[Measurement]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            if min_run_time is None:
                parts[name].append(measurement(name, [clocked(fn)]))
            else:
                parts[name].append(autorange(fn, name, min_run_time))
    return {name: Measurement.merge(found)[0] for name, found in parts.items()}


# ------------------------------------------------------------------------------------------ tables
def print_table(header: Sequence[str], rows: Iterable[Sequence[object]], left: int = 1) -> None:
    """A markdown table, printed row by row as ``rows`` yields them; the first ``left`` columns are
    left-aligned, the others right-aligned (numbers)."""
    print("| " + " | ".join(header) + " |")
    print("|" + "".join("---|" if i < left else "---:|" for i in range(len(header))))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |", flush=True)


SPLIT_FILES = ("train.txt", "valid.txt", "test.txt")


def tiny_corpus_copy(target: Path, copies: int = 24) -> Path:
    """tests/data/tiny_conll with ``copies`` copies of its train.txt (a smoke run's corpus: a pool to select
    from, or enough copies that hiding a share of the tokens leaves every type known somewhere)."""
    from ner_app.files import write_text

    tiny = ROOT / "tests" / "data" / "tiny_conll"
    target.mkdir(parents=True, exist_ok=True)
    for name in SPLIT_FILES:
        text = (tiny / name).read_text(encoding="utf-8")
        write_text(target / name, "\n".join([text] * (copies if name == "train.txt" else 1)))
    return target


def spread(values: Sequence[float]) -> str:
    """``mean ± sample std`` (the mean alone for one value), 2 decimals."""
    import statistics

    mean = statistics.fmean(values)
    return f"{mean:.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{mean:.2f}"
