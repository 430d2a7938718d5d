"""Shared fixtures: the ../shared folder (skipped when missing) and tiny biLMs written to tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from ner_app.bilm.options import BilmOptions
from ner_app.bilm.weights import save_bilm

SHARED = Path(os.environ.get("NER_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found (set NER_SHARED to the shared data folder)")
    return path


TINY_OPTIONS = BilmOptions(
    char_dim=4, filters=((1, 4), (2, 8), (3, 8)), n_highway=1, activation="relu", lstm_dim=12,
    projection_dim=6, n_layers=2, cell_clip=3.0, proj_clip=3.0, use_skip_connections=True,
)  # fmt: skip


def random_bilm(options: BilmOptions = TINY_OPTIONS, seed: int = 0, scale: float = 0.5):
    """A biLM with random weights large enough that clipping and every gate matter."""
    torch.manual_seed(seed)
    bilm = options.build()
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-scale, scale)
        bilm.token_encoder.char_cnn.char_embed.weight[0].zero_()
    return bilm.eval()


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    """Tests marked ``cuda`` skip on a machine without a CUDA GPU."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """Commands run in-process may set torch's thread count (``--threads``); no test may leak it to the next."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_bilm_files(tmp_path: Path) -> tuple[Path, Path]:
    """options.json and weights.hdf5 of a tiny random biLM in tmp_path."""
    return save_bilm(random_bilm(), tmp_path / "bilm")
