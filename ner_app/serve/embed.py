"""``python -m ner_app embed``: every biLM layer of every sentence of a text file, into an hdf5 file."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal

import h5py
import numpy as np
import torch

from ner_app.bilm.bilm import BidirectionalLM, remove_sentence_boundaries
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.document import (
    MAX_POSITIONS,
    ContextMode,
    Stream,
    document_contexts,
    stream_batches,
    stream_layers,
)
from ner_app.errors import NerAppError
from ner_app.files import atomic_path, check_free_space
from ner_app.progress import progress_bar, track
from ner_app.text.batching import budget_batches
from ner_app.text.tokenizer import Token, tokenize

Precision = Literal["fp32", "bf16"]
# padded positions a biLM call reads at most (sentences x longest, or streams x longest in document context);
# 64 CoNLL-2003 sentences (at most 124 tokens) fit, so their batches are never split (--max-tokens)
EMBED_MAX_TOKENS = 8192


def inference_autocast(device: str, precision: Precision) -> AbstractContextManager[object]:
    """bf16: matmuls and convolutions in bfloat16 (AMX / AVX512-BF16 CPUs, GPUs), state and outputs float32."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=precision == "bf16")


def read_sentences(
    path: str | Path, tokenize_lines: bool = False
) -> tuple[list[list[str]], list[list[Token]]]:
    """One sentence per line, tokens separated by single spaces (or, ``tokenize_lines``, raw text tokenised
    like ``predict``, with its tokens' offsets as the second list); an empty line is an empty sentence."""
    path = Path(path)
    sentences, offsets = [], []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise NerAppError(f"{path}:{number}: not UTF-8 text (byte {err.start} of the line)") from None
            if tokenize_lines:
                offsets.append(tokenize(line))
                sentences.append([t.text for t in offsets[-1]])
            else:
                sentences.append(line.split(" ") if line else [])
    return sentences, offsets


def length_batches(
    lengths: list[int], batch_size: int, keep_order: bool, max_tokens: int | None = EMBED_MAX_TOKENS
) -> list[list[int]]:
    """Indices grouped into batches of similar length (or in input order, which stateful mode needs), at most
    ``batch_size`` sentences and ``max_tokens`` padded tokens each (``budget_batches``: the batches
    ``LengthBucketSampler`` gives evaluation)."""
    return budget_batches(lengths, batch_size, max_tokens, keep_order)


def line_documents(sentences: list[list[str]]) -> list[range]:
    """Documents of an ``embed`` input: runs of consecutive non-empty lines (an empty line ends one)."""
    documents, start = [], None
    for i, sentence in enumerate([*sentences, []]):
        if sentence and start is None:
            start = i
        elif not sentence and start is not None:
            documents.append(range(start, i))
            start = None
    return documents


def hdf5_size(floats_per_dataset: list[int]) -> int:
    """An upper bound of an hdf5 file's bytes for these float32 datasets (HDF5 adds under 1 KB each)."""
    return sum(4 * n + 1024 for n in floats_per_dataset) + (1 << 16)


@torch.inference_mode()
def embed_file(
    bilm: BidirectionalLM,
    input_path: str | Path,
    output_path: str | Path,
    batch_size: int = 64,
    device: str = "cpu",
    progress: bool = True,
    context: ContextMode = "sentence",
    max_stream_positions: int = MAX_POSITIONS,
    precision: Precision = "fp32",
    tokenize_lines: bool = False,
    max_tokens: int | None = EMBED_MAX_TOKENS,
) -> int:
    """Write one float32 dataset per input line, named by its 0-based line number, shape (L+1, n_tokens, 2P).

    Sentence boundaries are removed. A stateful biLM sees the sentences in file order. With ``context``
    "document" every run of non-empty lines is one document read as a stream (docs/document_context.md);
    an empty line ends it and still gets its own empty dataset. ``precision`` "bf16" runs the biLM under bf16
    autocast (faster on CPUs with AMX, not bit-exact; the file stays float32). ``tokenize_lines`` reads raw
    text, tokenised like ``predict``; each dataset then has ``tokens`` and ``offsets`` attributes (JSON).
    A biLM call reads at most ``batch_size`` sentences and ``max_tokens`` padded positions (a longer sentence
    or stream alone; with a stateful biLM the rows' state follows the batches, so a batch the budget cuts
    short changes which state the next lines continue). Returns the count.
    """
    sentences, offsets = read_sentences(input_path, tokenize_lines)
    check_free_space(output_path, hdf5_size([bilm.num_layers * len(s) * bilm.output_dim for s in sentences]))
    bilm = bilm.to(device).eval()
    if context == "document":
        if bilm.stateful:
            raise NerAppError(
                "--stateful and --context document cannot be combined (a stream starts at zero state)"
            )
        with inference_autocast(device, precision):
            return _embed_documents(
                bilm, sentences, offsets, output_path, max_stream_positions, progress, max_tokens
            )
    with atomic_path(output_path) as tmp, h5py.File(tmp, "w") as out:
        bar = progress_bar(
            len(sentences), "embed", unit="sent", enabled=progress and len(sentences) >= 2 * batch_size
        )
        with inference_autocast(device, precision):
            for index, layers in embed_sentences(bilm, sentences, batch_size, device, max_tokens):
                out.create_dataset(str(index), data=layers)
                bar.update(1)
        bar.close()
        add_token_attributes(out, offsets)
    return len(sentences)


@torch.inference_mode()
def embed_sentences(
    bilm: BidirectionalLM,
    sentences: Sequence[Sequence[str]],
    batch_size: int,
    device: str,
    max_tokens: int | None = EMBED_MAX_TOKENS,
) -> Iterator[tuple[int, np.ndarray]]:
    """(index, layers (L+1, n_tokens, 2P) float32 without <S>/</S>) for every sentence, batched by length
    (in input order for a stateful biLM, ``length_batches``); the caller sets autocast."""
    lengths = [len(s) for s in sentences]
    for batch in length_batches(lengths, batch_size, keep_order=bilm.stateful, max_tokens=max_tokens):
        result = bilm(batch_to_ids([list(sentences[i]) for i in batch]).to(device))
        layers = []
        for layer in result.layers:
            stripped, _ = remove_sentence_boundaries(layer, result.mask)
            layers.append(stripped.float().cpu().numpy())
        stacked = np.stack(layers, axis=1)  # (B, L+1, T, 2P)
        for row, index in enumerate(batch):
            yield index, stacked[row, :, : len(sentences[index])]


def add_token_attributes(out: h5py.File, offsets: list[list[Token]]) -> None:
    """With --tokenize: each line's tokens and their character spans in the line, as JSON attributes of
    its dataset or group (the tokens the biLM read, so that rows can be mapped back to the text)."""
    for index, tokens in enumerate(offsets):
        item = out[str(index)]
        item.attrs["tokens"] = json.dumps([t.text for t in tokens], ensure_ascii=False)
        item.attrs["offsets"] = json.dumps([[t.start, t.end] for t in tokens])


def _embed_documents(
    bilm: BidirectionalLM,
    sentences: list[list[str]],
    offsets: list[list[Token]],
    output_path: str | Path,
    max_positions: int,
    progress: bool,
    max_tokens: int | None = EMBED_MAX_TOKENS,
) -> int:
    """``embed_file`` in document context: streams batched by length (``max_tokens`` padded positions a call),
    each sentence's rows without <S>/</S>."""
    jobs: list[tuple[int, Stream]] = []  # (input line of a stream's first sentence, the stream)
    for doc in line_documents(sentences):
        contexts = document_contexts([sentences[i] for i in doc], max_positions)
        jobs += [(line, stream) for line, (stream, k) in zip(doc, contexts, strict=True) if k == 0]
    empty = np.zeros((bilm.num_layers, 0, bilm.output_dim), dtype=np.float32)
    with atomic_path(output_path) as tmp, h5py.File(tmp, "w") as out:
        for i, sentence in enumerate(sentences):
            if not sentence:
                out.create_dataset(str(i), data=empty)
        positions = [sum(len(s) + 2 for s in stream) for _, stream in jobs]
        groups = list(stream_batches(positions, max_tokens))
        for group in track(groups, "embed", unit="batch", enabled=progress and len(groups) >= 2):
            chosen = [jobs[g] for g in group]
            for (line, _), layers in zip(chosen, stream_layers(bilm, [s for _, s in chosen]), strict=True):
                for k, rows in enumerate(layers):  # (L+1, n+2, 2P)
                    out.create_dataset(str(line + k), data=rows[:, 1:-1].float().cpu().numpy())
        add_token_attributes(out, offsets)
    return len(sentences)
