"""The public AllenNLP ELMo biLMs ``download-elmo`` fetches: where their files live, the architecture the
allennlp.org/elmo table gives each, and the checks that a downloaded file is that model (``download.py`` moves
the bytes).

No size or checksum of these four models is published that we found: ``PublishedFile.size`` and ``sha256`` stay
``None`` until a source exists; none is made up here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ner_app.errors import NerAppError
from ner_app.limits import MAX_OPTIONS_BYTES

WEIGHTS_MARGIN = 1.10  # hdf5's own bytes on top of 4 per float32 parameter (the files hold about 1.00)


@dataclass(frozen=True)
class PublishedFile:
    """One file as published: its name, and its size and SHA-256 where a public source gives them."""

    name: str
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class ElmoModel:
    """A public ELMo biLM: where its files live and the architecture the allennlp.org/elmo table gives."""

    folder: str  # the folder under the base URL, also the files' name stem
    lstm_dim: int  # "LSTM hidden size"
    projection_dim: int  # "output size"
    n_highway: int  # "# highway layers"
    parameters_millions: float  # "# parameters (millions)", one decimal
    options: PublishedFile
    weights: PublishedFile

    def url(self, base_url: str, file: PublishedFile) -> str:
        return f"{base_url.rstrip('/')}/{self.folder}/{file.name}"

    def max_bytes(self, file: PublishedFile) -> int:
        """The most bytes ``file`` can legitimately be: options.json is a few hundred bytes; the weights are
        the architecture's float32 parameters plus hdf5's overhead."""
        if file is self.options:
            return MAX_OPTIONS_BYTES
        return int(self.parameters_millions * 1e6 * 4 * WEIGHTS_MARGIN) + (1 << 20)


def _model(folder: str, lstm_dim: int, projection_dim: int, n_highway: int, millions: float) -> ElmoModel:
    # Every name reads LAYERSxCELL_PROJECTION_CNNcnn_HIGHWAYxhighway: 2 LSTM layers, 2048 char-CNN filters.
    return ElmoModel(
        folder,
        lstm_dim,
        projection_dim,
        n_highway,
        millions,
        PublishedFile(f"elmo_{folder}_options.json"),
        PublishedFile(f"elmo_{folder}_weights.hdf5"),
    )


MODELS = {
    "small": _model("2x1024_128_2048cnn_1xhighway", 1024, 128, 1, 13.6),
    "medium": _model("2x2048_256_2048cnn_1xhighway", 2048, 256, 1, 28.0),
    "original": _model("2x4096_512_2048cnn_2xhighway", 4096, 512, 2, 93.6),
    "5.5B": _model("2x4096_512_2048cnn_2xhighway_5.5B", 4096, 512, 2, 93.6),  # original's shape, 5.5B tokens
}
N_LAYERS, N_FILTERS = 2, 2048


def check_options(path: Path, model: ElmoModel, name: str) -> None:
    """options.json parses and describes the published architecture of ``model``."""
    from ner_app.bilm.options import read_options  # torch: imported once a file is there to check

    options = read_options(path)
    found = (
        options.n_layers,
        options.lstm_dim,
        options.projection_dim,
        options.n_highway,
        sum(count for _, count in options.filters),
    )
    expected = (N_LAYERS, model.lstm_dim, model.projection_dim, model.n_highway, N_FILTERS)
    if found != expected:
        raise NerAppError(
            f"{path}: not the {name} ELMo: (layers, LSTM size, projection, highway layers, char-CNN filters) "
            f"is {found}, expected {expected}"
        )


def check_weights(options_path: Path, weights_path: Path, model: ElmoModel, name: str) -> None:
    """The weights fill the biLM of the options (every dataset) and have the published parameter count."""
    from ner_app.bilm.weights import load_bilm

    bilm = load_bilm(options_path, weights_path)
    millions = round(sum(p.numel() for p in bilm.parameters()) / 1e6, 1)
    if millions != model.parameters_millions:
        raise NerAppError(
            f"{weights_path}: {millions}M parameters, the {name} ELMo has {model.parameters_millions}M"
        )
