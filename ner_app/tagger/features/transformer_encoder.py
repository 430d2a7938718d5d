"""A frozen Hugging Face encoder read word by word: the L+1 hidden states of every word of a sentence.

Each word is cut into the tokenizer's pieces (a word the tokenizer maps to no piece, an empty or a zero-width
one, reads as the unknown piece: every word keeps a vector). A sentence's pieces are read in windows of at most
``window`` pieces, each wrapped in the encoder's own special pieces ([CLS] ... [SEP], <s> ... </s>); a longer
sentence is read in windows overlapping by half, and each piece takes its vectors from the window where it sits
most centrally (the nearest window centre; the earlier window on a tie). A word's vector in every layer is its
first piece's or the mean of its pieces' (``pooling``). Layer 0 is the embedding layer's output.

The layers come in the biLM's layout (``BiLMOutput``): L+1 tensors (B, T+2, D) with a zero row each side of the
sentence and mask (B, T+2), so that the layer cache and the document-context streams take them as they are.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

import torch
from torch import nn

from ner_app.errors import NerAppError
from ner_app.records import sha256_file

Pooling = Literal["first", "mean"]
POOLINGS: tuple[str, ...] = ("first", "mean")
# The files of a Hugging Face folder this encoder reads: its config, safetensors weights (never a pickle) and
# a tokenizer's files. They are copied into an export, so that it predicts without the original folder.
WEIGHTS = "model.safetensors"
FILES = frozenset(
    {
        "config.json",
        WEIGHTS,
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "sentencepiece.bpe.model",
        "spiece.model",
    }
)
READ_POSITIONS = 8192  # padded piece positions one encoder call reads at most (bounds memory)


class TransformerError(NerAppError):
    """A Hugging Face encoder that cannot be loaded or read (a one-line error, exit code 2)."""


def require_transformers() -> Any:
    """The ``transformers`` module, or one line saying how to install it."""
    try:
        import transformers
    except ImportError as err:
        raise TransformerError(
            "the transformer feature needs Hugging Face transformers: pip install 'ner_app[transformer]'"
        ) from err
    return transformers


def encoder_files(folder: Path) -> dict[str, Path]:
    """The files of ``folder`` this encoder reads (``FILES``), by name; ``TransformerError`` naming the folder
    when it is not one, or lacks the config, the safetensors weights or a tokenizer."""
    if not folder.is_dir():
        raise TransformerError(
            f"{folder}: not a folder (expected a Hugging Face model folder: config.json, {WEIGHTS}, tokenizer.json)"
        )
    found = {name: folder / name for name in sorted(FILES) if (folder / name).is_file()}
    for name in ("config.json", WEIGHTS):
        if name not in found:
            extra = (
                " (a pytorch_model.bin is a pickle: it is never loaded; save the model with safe_serialization)"
                if name == WEIGHTS and (folder / "pytorch_model.bin").exists()
                else ""
            )
            raise TransformerError(f"{folder}: no {name} (expected a Hugging Face model folder){extra}")
    if not found.keys() & {
        "tokenizer.json",
        "vocab.txt",
        "vocab.json",
        "sentencepiece.bpe.model",
        "spiece.model",
    }:
        raise TransformerError(f"{folder}: no tokenizer files (expected tokenizer.json beside config.json)")
    return found


def files_fingerprint(files: dict[str, Path]) -> str:
    """sha256 over the encoder's files (each file's name and sha256): names its exact weights and tokenizer."""
    digest = hashlib.sha256(b"ner_app.transformer/1\x00")
    for name in sorted(files):
        digest.update(f"{name}\x00{sha256_file(files[name])}\n".encode())
    return digest.hexdigest()


def window_starts(pieces: int, window: int) -> list[int]:
    """Where the windows of a sequence of ``pieces`` pieces start: one window when it fits, else windows of
    ``window`` pieces every ``window // 2``, the last one ending at the sequence's end."""
    if pieces <= window:
        return [0]
    step = max(1, window // 2)
    starts = list(range(0, pieces - window, step))
    return [*starts, pieces - window]


def central_windows(pieces: int, window: int, starts: Sequence[int]) -> list[int]:
    """For every piece, the index of the window (of ``starts``) whose centre is nearest to it."""
    owner, w = [], 0
    for i in range(pieces):
        # windows start in increasing order: the nearest centre moves forward only
        while (
            w + 1 < len(starts)
            and starts[w + 1] <= i
            and _distance(i, starts[w + 1], pieces, window) < _distance(i, starts[w], pieces, window)
        ):
            w += 1
        owner.append(w)
    return owner


def _distance(i: int, start: int, pieces: int, window: int) -> float:
    end = min(start + window, pieces)
    return abs(i + 0.5 - (start + end) / 2) if start <= i < end else float("inf")


class WordPieceEncoder(nn.Module):
    """A frozen Hugging Face encoder and its tokenizer, read per word (see the module doc). Never trained, always
    in eval mode; ``files`` are the folder's files it was loaded from (what an export copies)."""

    def __init__(
        self, model: nn.Module, tokenizer: Any, pooling: str, window: int | None, files: dict[str, Path]
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.model = model
        model.requires_grad_(False)
        model.eval()
        self.tokenizer, self.pooling, self.files = tokenizer, pooling, files
        config = cast(Any, model).config  # a Hugging Face PretrainedConfig
        self.num_layers = int(config.num_hidden_layers) + 1  # the embedding layer and every block's output
        self.output_dim = int(config.hidden_size)
        self.prefix, self.suffix = _special_pieces(tokenizer)
        longest = _longest_input(tokenizer, config) - len(self.prefix) - len(self.suffix)
        if window is not None and not 1 <= window <= longest:
            raise TransformerError(
                f"transformer.window: expected 1 to {longest} pieces (the encoder's longest input less its special pieces), found {window}"
            )
        self.window = window if window is not None else longest
        self.unk = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else tokenizer.pad_token_id
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.stateful = False

    def train(self, mode: bool = True) -> WordPieceEncoder:
        super().train(mode)
        self.model.eval()  # frozen: its dropout never runs
        return self

    def word_pieces(self, words: Sequence[str]) -> list[list[int]]:
        """Every word's piece ids (the unknown piece for a word that has none)."""
        if not words:
            return []
        encoded = self.tokenizer([list(words)], is_split_into_words=True, add_special_tokens=False)
        pieces: list[list[int]] = [[] for _ in words]
        for piece, word in zip(encoded["input_ids"][0], encoded.word_ids(0), strict=True):
            if word is not None:
                pieces[word].append(int(piece))
        return [p or [self.unk] for p in pieces]

    @torch.no_grad()
    def read(self, sequences: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """Per word sequence, its words' vectors (L+1, n, D) in every layer (float32, on the encoder's device)."""
        device = next(self.model.parameters()).device
        words = [self.word_pieces(s) for s in sequences]
        flat = [[p for w in ws for p in w] for ws in words]
        windows: list[tuple[int, int]] = []  # (sequence, start)
        for s, pieces in enumerate(flat):
            windows.extend((s, start) for start in window_starts(len(pieces), self.window))
        states: dict[tuple[int, int], torch.Tensor] = {}  # (sequence, start) -> (L+1, pieces of it, D)
        lengths = [
            min(self.window, len(flat[s]) - start) + len(self.prefix) + len(self.suffix)
            for s, start in windows
        ]
        order = sorted(range(len(windows)), key=lambda i: lengths[i])
        group: list[int] = []
        for i in [*order, -1]:
            if i >= 0 and (not group or (len(group) + 1) * lengths[i] <= READ_POSITIONS):
                group.append(i)
                continue
            if group:
                self._run([windows[j] for j in group], flat, states, device)
            group = [i]
        out = []
        for s, ws in enumerate(words):
            n_pieces = len(flat[s])
            if not ws:
                out.append(torch.zeros(self.num_layers, 0, self.output_dim, device=device))
                continue
            starts = window_starts(n_pieces, self.window)
            owner = central_windows(n_pieces, self.window, starts)
            rows = (
                torch.cat(
                    [states[(s, starts[w])][:, i - starts[w]][:, None] for i, w in enumerate(owner)], dim=1
                )
                if len(starts) > 1
                else states[(s, 0)]
            )  # (L+1, pieces, D)
            out.append(self._pool(rows, [len(w) for w in ws]))
        return out

    def _run(
        self,
        chosen: list[tuple[int, int]],
        flat: list[list[int]],
        states: dict[tuple[int, int], torch.Tensor],
        device: torch.device,
    ) -> None:
        """Encode windows in one call; store each one's piece states (L+1, pieces, D) without the specials."""
        rows = [self.prefix + flat[s][start : start + self.window] + self.suffix for s, start in chosen]
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)  # (N, W)
        attention = torch.zeros(len(rows), width, dtype=torch.long)  # (N, W)
        for b, row in enumerate(rows):
            ids[b, : len(row)] = torch.tensor(row, dtype=torch.long)
            attention[b, : len(row)] = 1
        hidden = self.model(
            input_ids=ids.to(device), attention_mask=attention.to(device), output_hidden_states=True
        ).hidden_states  # L+1 x (N, W, D)
        stacked = torch.stack(hidden, dim=0).float()  # (L+1, N, W, D)
        first = len(self.prefix)
        for b, key in enumerate(chosen):
            n = len(rows[b]) - first - len(self.suffix)
            states[key] = stacked[:, b, first : first + n]

    def _pool(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Piece rows (L+1, P, D) -> word rows (L+1, n, D): each word's first piece, or its pieces' mean."""
        sizes = torch.tensor(counts, device=rows.device)  # (n,)
        starts = torch.cumsum(sizes, 0) - sizes  # (n,)
        if self.pooling == "first":
            return rows[:, starts]
        word_of = torch.repeat_interleave(torch.arange(len(counts), device=rows.device), sizes)  # (P,)
        sums = rows.new_zeros(rows.shape[0], len(counts), rows.shape[2]).index_add_(1, word_of, rows)
        return sums / sizes[None, :, None].to(rows.dtype)

    def sentence_layers(
        self, sentences: Sequence[Sequence[str]], device: torch.device | None = None
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """L+1 tensors (B, T+2, D) with a zero row each side of every sentence and zero padding, and the mask
        (B, T+2): the biLM's layout."""
        return boundary_layout(self.read(sentences), self.num_layers, self.output_dim)

    def stream_layers(self, streams: Sequence[Sequence[Sequence[str]]]) -> list[list[torch.Tensor]]:
        """Per stream, per sentence: its layers (L+1, n+2, D) read with the whole stream as context, a zero row
        each side (the layout of ``bilm.document.stream_layers``)."""
        read = self.read([[w for sentence in stream for w in sentence] for stream in streams])
        out = []
        for stream, rows in zip(streams, read, strict=True):
            offset, sentences = 0, []
            for sentence in stream:
                inner = rows[:, offset : offset + len(sentence)]
                zero = inner.new_zeros(inner.shape[0], 1, inner.shape[2])
                sentences.append(torch.cat([zero, inner, zero], dim=1))  # (L+1, n+2, D)
                offset += len(sentence)
            out.append(sentences)
        return out


def boundary_layout(
    rows: Sequence[torch.Tensor], num_layers: int, dim: int
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Word rows (L+1, n_b, D) per sentence -> L+1 tensors (B, T+2, D), a zero row each side, and mask (B, T+2)."""
    width = max((r.shape[1] for r in rows), default=0) + 2
    device = rows[0].device if rows else torch.device("cpu")
    out = torch.zeros(num_layers, len(rows), width, dim, device=device)  # (L+1, B, T+2, D)
    lengths = torch.tensor([r.shape[1] + 2 for r in rows], dtype=torch.long, device=device)  # (B,)
    for b, r in enumerate(rows):
        out[:, b, 1 : 1 + r.shape[1]] = r
    mask = torch.arange(width, device=device)[None, :] < lengths[:, None]  # (B, T+2)
    return list(out.unbind(0)), mask


def load_encoder(folder: Path, pooling: str, window: int | None) -> WordPieceEncoder:
    """The encoder of a local Hugging Face folder (``encoder_files``), loaded offline from its safetensors."""
    files = encoder_files(folder)
    transformers = require_transformers()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # forked predict workers: no tokenizer threads
    transformers.utils.logging.set_verbosity_error()  # its load bars and notes are not ours to print
    transformers.utils.logging.disable_progress_bar()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        model = transformers.AutoModel.from_pretrained(
            str(folder), local_files_only=True, use_safetensors=True, trust_remote_code=False
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise TransformerError(f"{folder}: cannot load the Hugging Face model ({_first_line(err)})") from err
    if not getattr(tokenizer, "is_fast", False):
        raise TransformerError(
            f"{folder}: the tokenizer is not a fast (tokenizers) one; save tokenizer.json with it"
        )
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    if vocab and len(tokenizer) > vocab:
        raise TransformerError(
            f"{folder}: the tokenizer has {len(tokenizer)} pieces but the model's embedding has {vocab} rows: "
            "they are not one model's"
        )
    if not hasattr(model.config, "num_hidden_layers") or not hasattr(model.config, "hidden_size"):
        raise TransformerError(
            f"{folder}: not an encoder with hidden layers (config.json has no num_hidden_layers)"
        )
    return WordPieceEncoder(model.float(), tokenizer, pooling, window, files)


def download(name: str) -> Path:
    """The local folder of hub model ``name`` (downloaded into Hugging Face's cache where the network allows)."""
    require_transformers()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, allow_patterns=sorted(FILES)))
    except Exception as err:  # the hub client raises many kinds, offline, unknown name or refused
        raise TransformerError(
            f"transformer.hub={name}: cannot download it ({_first_line(err)}); without a network, download the "
            "model elsewhere (its config.json, model.safetensors and tokenizer files) and set "
            "transformer.folder=PATH to that folder"
        ) from err


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


def _special_pieces(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special piece ids the tokenizer puts before and after a sequence ([CLS] / [SEP], <s> / </s>)."""
    probe = ["a"]
    bare = list(tokenizer([probe], is_split_into_words=True, add_special_tokens=False)["input_ids"][0])
    full = list(tokenizer([probe], is_split_into_words=True, add_special_tokens=True)["input_ids"][0])
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    raise TransformerError("the tokenizer's special pieces could not be told apart from a word's")


def _longest_input(tokenizer: Any, config: Any) -> int:
    """The most pieces the encoder reads at once: its position table (less RoBERTa's padding offset), capped
    by the tokenizer's ``model_max_length`` where that is set."""
    positions = int(getattr(config, "max_position_embeddings", 512) or 512)
    if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        positions -= int(getattr(config, "pad_token_id", 1) or 1) + 1  # positions start after the padding id
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < positions:
        positions = limit
    return positions
