"""``python -m ner_app embed``: every biLM layer of every sentence of a text file, into an hdf5 file."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

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
from ner_app.errors import NerAppError, raise_if_stopped
from ner_app.files import Claim, atomic_path, check_free_space
from ner_app.progress import progress_bar
from ner_app.text.batching import EMBED_BATCH_SIZE, EMBED_MAX_TOKENS, budget_batches
from ner_app.text.lines import read_lines

if TYPE_CHECKING:
    import h5py  # imported where a file is written: predict, which imports this module, never needs it
from ner_app.text.runs import id_runs
from ner_app.text.tokenizer import Token, tokenize

Precision = Literal["fp32", "bf16"]


def inference_autocast(device: str, precision: Precision) -> AbstractContextManager[object]:
    """bf16: matmuls and convolutions in bfloat16 (AMX / AVX512-BF16 CPUs, GPUs), state and outputs float32."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=precision == "bf16")


def read_sentences(
    path: str | Path, tokenize_lines: bool = False
) -> tuple[list[list[str]], list[list[Token]]]:
    """One sentence per line (``read_lines``), tokens separated by single spaces (or, ``tokenize_lines``, raw
    text tokenised like ``predict``, with its tokens' offsets as the second list); an empty line is an empty
    sentence."""
    sentences, offsets = [], []
    for line in read_lines(path, "the input text"):
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
    ids, document = [], 0
    for sentence in sentences:
        document += not sentence
        ids.append(document if sentence else None)
    return id_runs(ids)


def hdf5_size(floats_per_dataset: list[int]) -> int:
    """An upper bound of an hdf5 file's bytes for these float32 datasets (HDF5 adds under 1 KB each)."""
    return sum(4 * n + 1024 for n in floats_per_dataset) + (1 << 16)


def check_context(bilm: BidirectionalLM, context: ContextMode) -> None:
    """A stateful biLM carries its state across calls; a document stream starts from zero state."""
    if context == "document" and bilm.stateful:
        raise NerAppError(
            "--stateful and --context document cannot be combined (a stream starts at zero state)"
        )


@dataclass(frozen=True)
class LayerBatch:
    """The biLM's layers of some input lines, as one call gave them: ``lines`` the input line of every row,
    ``layers`` L+1 x (B, T+2, 2P) with <S>/</S>, ``mask`` (B, T+2) bool."""

    lines: list[int]
    layers: list[torch.Tensor]
    mask: torch.Tensor


def layer_batches(
    bilm: BidirectionalLM,
    sentences: list[list[str]],
    batch_size: int,
    device: str,
    context: ContextMode = "sentence",
    max_positions: int = MAX_POSITIONS,
    max_tokens: int | None = EMBED_MAX_TOKENS,
) -> Iterator[LayerBatch]:
    """The one document loop of ``embed``'s writers: every input line's layers, each line exactly once.

    Sentence context: sentences batched by length (in input order for a stateful biLM, ``length_batches``).
    Document context (docs/document_context.md): every run of non-empty lines is one document read as a
    stream, streams batched by length (``max_tokens`` padded positions a call); each sentence comes as a batch
    of one, its rows of its stream, and an empty line (no document) as the biLM's empty sentence. The caller
    sets eval mode, inference mode and autocast."""
    if context != "document":
        lengths = [len(s) for s in sentences]
        for batch in length_batches(lengths, batch_size, keep_order=bilm.stateful, max_tokens=max_tokens):
            raise_if_stopped()  # between batches: a Ctrl-C or SIGTERM whose first raise Python dropped
            result = bilm(batch_to_ids([list(sentences[i]) for i in batch]).to(device))
            yield LayerBatch(batch, result.layers, result.mask)
        return
    check_context(bilm, context)
    jobs: list[tuple[int, Stream]] = []  # (input line of a stream's first sentence, the stream)
    for doc in line_documents(sentences):
        contexts = document_contexts([sentences[i] for i in doc], max_positions)
        jobs += [(line, stream) for line, (stream, k) in zip(doc, contexts, strict=True) if k == 0]
    for group in stream_batches([sum(len(s) + 2 for s in stream) for _, stream in jobs], max_tokens):
        raise_if_stopped()
        chosen = [jobs[g] for g in group]
        for (line, _), layers in zip(chosen, stream_layers(bilm, [s for _, s in chosen]), strict=True):
            for k, rows in enumerate(layers):  # (L+1, n+2, 2P): one sentence with its <S> and </S>
                mask = torch.ones(1, rows.shape[1], dtype=torch.bool, device=rows.device)  # (1, n+2)
                yield LayerBatch([line + k], list(rows[:, None].unbind(0)), mask)
    empty = [i for i, sentence in enumerate(sentences) if not sentence]
    if empty:
        result = bilm(batch_to_ids([[]]).to(device))
        for line in empty:
            yield LayerBatch([line], result.layers, result.mask)


def write_lines(
    bilm: BidirectionalLM,
    input_path: str | Path,
    output_path: str | Path,
    write: Callable[[h5py.File, LayerBatch, list[list[str]]], None],
    floats: Callable[[list[str]], int],
    batch_size: int = EMBED_BATCH_SIZE,
    device: str = "cpu",
    progress: bool = True,
    context: ContextMode = "sentence",
    max_stream_positions: int = MAX_POSITIONS,
    tokenize_lines: bool = False,
    max_tokens: int | None = EMBED_MAX_TOKENS,
    header: Callable[[h5py.File], None] | None = None,
    claim: Claim | None = None,
) -> int:
    """The one embed reader: read the input lines (``read_sentences``), check the disk for ``floats`` float32
    numbers a line, run ``layer_batches`` and let ``write`` put each batch into the hdf5 file (``header``
    writes the file's attributes first); the file appears whole or not at all (``claim``: as
    ``files.atomic_path``). Returns the number of lines."""
    import h5py

    sentences, offsets = read_sentences(input_path, tokenize_lines)
    check_free_space(output_path, hdf5_size([floats(s) for s in sentences]))
    bilm = bilm.to(device).eval()
    check_context(bilm, context)  # before the output file is opened
    with atomic_path(output_path, claim) as tmp, h5py.File(tmp, "w") as out:
        if header is not None:
            header(out)
        bar = progress_bar(
            len(sentences), "embed", unit="sent", enabled=progress and len(sentences) >= 2 * batch_size
        )
        batches = layer_batches(
            bilm, sentences, batch_size, device, context, max_stream_positions, max_tokens
        )
        for batch in batches:
            write(out, batch, sentences)
            bar.update(len(batch.lines))
        bar.close()
        add_token_attributes(out, offsets)
    return len(sentences)


def layers_of(batch: LayerBatch, sentences: Sequence[Sequence[str]]) -> Iterator[tuple[int, np.ndarray]]:
    """(input line, its layers (L+1, n_tokens, 2P) float32 without <S>/</S>) of every row of ``batch``."""
    stripped = [
        remove_sentence_boundaries(layer, batch.mask)[0].float().cpu().numpy() for layer in batch.layers
    ]
    stacked = np.stack(stripped, axis=1)  # (B, L+1, T, 2P)
    for row, line in enumerate(batch.lines):
        yield line, stacked[row, :, : len(sentences[line])]


@torch.inference_mode()
def embed_file(
    bilm: BidirectionalLM,
    input_path: str | Path,
    output_path: str | Path,
    batch_size: int = EMBED_BATCH_SIZE,
    device: str = "cpu",
    progress: bool = True,
    context: ContextMode = "sentence",
    max_stream_positions: int = MAX_POSITIONS,
    precision: Precision = "fp32",
    tokenize_lines: bool = False,
    max_tokens: int | None = EMBED_MAX_TOKENS,
    claim: Claim | None = None,
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

    def write(out: h5py.File, batch: LayerBatch, sentences: list[list[str]]) -> None:
        for line, layers in layers_of(batch, sentences):
            out.create_dataset(str(line), data=layers)

    with inference_autocast(device, precision):
        return write_lines(
            bilm,
            input_path,
            output_path,
            write,
            floats=lambda s: bilm.num_layers * len(s) * bilm.output_dim,
            batch_size=batch_size,
            device=device,
            progress=progress,
            context=context,
            max_stream_positions=max_stream_positions,
            tokenize_lines=tokenize_lines,
            max_tokens=max_tokens,
            claim=claim,
        )


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
    listed = [list(s) for s in sentences]
    for batch in layer_batches(bilm, listed, batch_size, device, max_tokens=max_tokens):
        yield from layers_of(batch, listed)


def add_token_attributes(out: h5py.File, offsets: list[list[Token]]) -> None:
    """With --tokenize: each line's tokens and their character spans in the line, as JSON attributes of
    its dataset or group (the tokens the biLM read, so that rows can be mapped back to the text)."""
    for index, tokens in enumerate(offsets):
        item = out[str(index)]
        item.attrs["tokens"] = json.dumps([t.text for t in tokens], ensure_ascii=False)
        item.attrs["offsets"] = json.dumps([[t.start, t.end] for t in tokens])
