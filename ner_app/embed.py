"""``python -m ner_app embed``: every biLM layer of every sentence of a text file, into an hdf5 file."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import torch
from tqdm import tqdm

from ner_app.bilm.bilm import BidirectionalLM, remove_sentence_boundaries
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.weights import atomic_path
from ner_app.errors import NerAppError


def read_sentences(path: str | Path) -> list[list[str]]:
    """One sentence per line, tokens separated by single spaces; an empty line is an empty sentence."""
    path = Path(path)
    sentences = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                raise NerAppError(f"{path}:{number}: not UTF-8 text (byte {err.start} of the line)") from None
            sentences.append(line.split(" ") if line else [])
    return sentences


def length_batches(lengths: list[int], batch_size: int, keep_order: bool) -> list[list[int]]:
    """Indices grouped into batches of similar length (or in input order, which stateful mode needs)."""
    order = list(range(len(lengths))) if keep_order else sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


@torch.inference_mode()
def embed_file(
    bilm: BidirectionalLM,
    input_path: str | Path,
    output_path: str | Path,
    batch_size: int = 64,
    device: str = "cpu",
    progress: bool = True,
) -> int:
    """Write one float32 dataset per input line, named by its 0-based line number, shape (L+1, n_tokens, 2P).

    Sentence boundaries are removed. A stateful biLM sees the sentences in file order. Returns the count.
    """
    sentences = read_sentences(input_path)
    bilm = bilm.to(device).eval()
    batches = length_batches([len(s) for s in sentences], batch_size, keep_order=bilm.stateful)
    with atomic_path(output_path) as tmp, h5py.File(tmp, "w") as out:
        bar = tqdm(total=len(sentences), unit="sent", disable=not progress or len(sentences) < 2 * batch_size)
        for batch in batches:
            result = bilm(batch_to_ids([sentences[i] for i in batch]).to(device))
            layers = []
            for layer in result.layers:
                stripped, mask = remove_sentence_boundaries(layer, result.mask)
                layers.append(stripped.float().cpu().numpy())
            stacked = np.stack(layers, axis=1)  # (B, L+1, T, 2P)
            for row, index in enumerate(batch):
                out.create_dataset(str(index), data=stacked[row, :, : len(sentences[index])])
            bar.update(len(batch))
        bar.close()
    return len(sentences)
