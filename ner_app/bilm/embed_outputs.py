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

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.document import MAX_POSITIONS, ContextMode
from ner_app.bilm.embed import EMBED_BATCH_SIZE, EMBED_MAX_TOKENS, LayerBatch, write_lines
from ner_app.bilm.hub_outputs import HubOutputs, hub_outputs_from_layers, output_names
from ner_app.bilm.scalar_mix import ScalarMix
from ner_app.errors import NerAppError
from ner_app.files import Claim


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
    batch_size: int = EMBED_BATCH_SIZE,
    device: str = "cpu",
    progress: bool = True,
    context: ContextMode = "sentence",
    max_stream_positions: int = MAX_POSITIONS,
    tokenize_lines: bool = False,
    max_tokens: int | None = EMBED_MAX_TOKENS,
    claim: Claim | None = None,
) -> int:
    """Write ``names`` of every input line (one per line, tokens split on single spaces, or raw text with
    ``tokenize_lines``, as ``embed`` reads them) to ``output_path``; a biLM call reads at most ``batch_size``
    sentences and ``max_tokens`` padded positions, as ``embed_file``'s. In document context each sentence's
    rows of its stream are mixed on their own (docs/document_context.md). Returns the number of lines."""
    mix = mix.to(device)
    widest = (bilm.num_layers + 1) * bilm.output_dim  # every named output of a token, at most

    def header(out: h5py.File) -> None:
        out.attrs["outputs"] = ",".join(names)
        out.attrs["scalar_mix_parameters"] = mix.scalar_parameters.detach().cpu().numpy()
        out.attrs["gamma"] = float(mix.gamma)
        out.attrs["context"] = context

    def write(out: h5py.File, batch: LayerBatch, sentences: list[list[str]]) -> None:
        outputs = hub_outputs_from_layers(batch.layers, batch.mask, mix)
        for row, line in enumerate(batch.lines):
            _write(out.create_group(str(line)), outputs, row, names)

    return write_lines(
        bilm,
        input_path,
        output_path,
        write,
        floats=lambda s: len(names) * widest * max(len(s), 1),
        batch_size=batch_size,
        device=device,
        progress=progress,
        context=context,
        max_stream_positions=max_stream_positions,
        tokenize_lines=tokenize_lines,
        max_tokens=max_tokens,
        header=header,
        claim=claim,
    )
