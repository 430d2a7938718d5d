"""``python -m ner_app embed --outputs``: TF-Hub ELMo's named outputs of every input line, into an hdf5 file.

Layout (docs/serving.md): one group per input line, named by its 0-based line number, holding one
float32 dataset per chosen output: ``word_emb`` (n, P), ``lstm_outputs{j}`` (n, 2P), ``elmo`` (n, 2P),
``default`` (2P,). The file's attributes record the outputs, the mix and the context mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import h5py
import torch
from tqdm import tqdm

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.char_mapper import batch_to_ids
from ner_app.bilm.document import MAX_POSITIONS, ContextMode, document_contexts, stream_batches, stream_layers
from ner_app.bilm.scalar_mix import ScalarMix
from ner_app.errors import NerAppError
from ner_app.files import atomic_path, check_free_space
from ner_app.serve.embed import (
    EMBED_MAX_TOKENS,
    add_token_attributes,
    hdf5_size,
    length_batches,
    line_documents,
    read_sentences,
)
from ner_app.serve.hub_outputs import HubOutputs, hub_outputs_from_layers, output_names


def parse_outputs(text: str, n_lstm_layers: int) -> list[str]:
    """``--outputs``: "all" or a comma-separated subset of the output names, kept in TF-Hub's order."""
    known = output_names(n_lstm_layers)
    if text.strip() == "all":
        return list(known)
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in known]
    if unknown or not chosen:
        raise NerAppError(
            f"--outputs {text!r}: expected 'all' or a comma-separated subset of {','.join(known)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    return [name for name in known if name in chosen]


def parse_mix(weights: str | None, gamma: float | None, n_layers: int) -> ScalarMix:
    """``--scalar-mix`` (n_layers pre-softmax weights, comma-separated; uniform when absent) and ``--gamma``
    (1 when absent)."""
    values, gamma = [0.0] * n_layers, 1.0 if gamma is None else gamma
    if weights is not None:
        try:
            values = [float(w) for w in weights.split(",")]
        except ValueError:
            raise NerAppError(
                f"--scalar-mix {weights!r}: expected {n_layers} comma-separated numbers"
            ) from None
        if len(values) != n_layers or not all(torch.isfinite(torch.tensor(values))):
            raise NerAppError(
                f"--scalar-mix {weights!r}: expected {n_layers} finite numbers (one per biLM layer), "
                f"found {len(values)}"
            )
    if not torch.isfinite(torch.tensor(gamma)):
        raise NerAppError(f"--gamma: expected a finite number, found {gamma}")
    mix = ScalarMix(n_layers, initial_scalar_parameters=values, trainable=False)
    mix.gamma.fill_(gamma)
    return mix


def _write(group: h5py.Group, outputs: HubOutputs, row: int, names: Sequence[str]) -> None:
    """One sentence's chosen outputs, cut to its length (the default vector is one per sentence)."""
    n = int(outputs.sequence_len[row])
    for name in names:
        value = outputs[name][row]
        group.create_dataset(name, data=(value if name == "default" else value[:n]).float().cpu().numpy())


@torch.inference_mode()
def embed_outputs_file(
    bilm: BidirectionalLM,
    input_path: str | Path,
    output_path: str | Path,
    names: Sequence[str],
    mix: ScalarMix,
    batch_size: int = 64,
    device: str = "cpu",
    progress: bool = True,
    context: ContextMode = "sentence",
    max_stream_positions: int = MAX_POSITIONS,
    tokenize_lines: bool = False,
    max_tokens: int | None = EMBED_MAX_TOKENS,
) -> int:
    """Write ``names`` of every input line (one per line, tokens split on single spaces, or raw text with
    ``tokenize_lines``, as ``embed`` reads them) to ``output_path``; a biLM call reads at most ``batch_size``
    sentences and ``max_tokens`` padded positions, as ``embed_file``'s. Returns the number of lines."""
    sentences, offsets = read_sentences(input_path, tokenize_lines)
    widest = (bilm.num_layers + 1) * bilm.output_dim  # every named output of a token, at most
    check_free_space(output_path, hdf5_size([len(names) * widest * max(len(s), 1) for s in sentences]))
    bilm = bilm.to(device).eval()
    mix = mix.to(device)
    if context == "document" and bilm.stateful:
        raise NerAppError(
            "--stateful and --context document cannot be combined (a stream starts at zero state)"
        )
    with atomic_path(output_path) as tmp, h5py.File(tmp, "w") as out:
        out.attrs["outputs"] = ",".join(names)
        out.attrs["scalar_mix_parameters"] = mix.scalar_parameters.detach().cpu().numpy()
        out.attrs["gamma"] = float(mix.gamma)
        out.attrs["context"] = context
        if context == "document":
            _write_documents(bilm, sentences, out, names, mix, max_stream_positions, progress, max_tokens)
        else:
            lengths = [len(s) for s in sentences]
            batches = length_batches(lengths, batch_size, keep_order=bilm.stateful, max_tokens=max_tokens)
            for batch in tqdm(batches, unit="batch", disable=not progress or len(batches) < 2):
                result = bilm(batch_to_ids([sentences[i] for i in batch]).to(device))
                outputs = hub_outputs_from_layers(result.layers, result.mask, mix)
                for row, index in enumerate(batch):
                    _write(out.create_group(str(index)), outputs, row, names)
        add_token_attributes(out, offsets)
    return len(sentences)


def _write_documents(
    bilm: BidirectionalLM,
    sentences: list[list[str]],
    out: h5py.File,
    names: Sequence[str],
    mix: ScalarMix,
    max_positions: int,
    progress: bool,
    max_tokens: int | None = EMBED_MAX_TOKENS,
) -> None:
    """Document context (docs/document_context.md): each sentence's rows of its stream, mixed on their own."""
    streams = []  # (input line of a stream's first sentence, the stream)
    for doc in line_documents(sentences):
        contexts = document_contexts([sentences[i] for i in doc], max_positions)
        streams += [(line, stream) for line, (stream, k) in zip(doc, contexts, strict=True) if k == 0]
    groups = list(stream_batches([sum(len(s) + 2 for s in stream) for _, stream in streams], max_tokens))
    for group in tqdm(groups, unit="batch", disable=not progress or len(groups) < 2):
        chosen = [streams[g] for g in group]
        for (line, _), layers in zip(chosen, stream_layers(bilm, [s for _, s in chosen]), strict=True):
            for k, rows in enumerate(layers):  # (L+1, n+2, 2P): one sentence with its <S> and </S>
                mask = torch.ones(1, rows.shape[1], dtype=torch.bool, device=rows.device)  # (1, n+2)
                outputs = hub_outputs_from_layers(list(rows[:, None].unbind(0)), mask, mix)
                _write(out.create_group(str(line + k)), outputs, 0, names)
    if any(not sentence for sentence in sentences):  # an empty line is no document: it is an empty sentence
        result = bilm(batch_to_ids([[]]).to(next(bilm.parameters()).device))
        empty = hub_outputs_from_layers(result.layers, result.mask, mix)
        for i, sentence in enumerate(sentences):
            if not sentence:
                _write(out.create_group(str(i)), empty, 0, names)
