"""Fixtures of the report room's tests: real finished tiny runs, trained once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import train
from ner_app.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
RECIPES = {"base": (["optim.lr=0.01"], [1, 2, 3]), "lr02": (["optim.lr=0.02"], [2, 3])}


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Five real tiny runs (``compare``'s tests): the tiny config with two learning rates; seeds 1-3 and 2-3,
    in folders ``base_seed1`` ... ``lr02_seed3``."""
    tmp = tmp_path_factory.mktemp("compare")
    out = {}
    for name, (overrides, seeds) in RECIPES.items():
        for seed in seeds:
            folder = tmp / f"{name}_seed{seed}"
            code = main(
                [
                    "train",
                    "--config",
                    str(ROOT / "configs/tiny.yaml"),
                    f"output_dir={folder}",
                    f"seed={seed}",
                    "trainer.max_epochs=4",
                    "trainer.threads=1",
                    "elmo.cache_dir=null",
                    f"data.dir={ROOT / 'tests/data/tiny_conll'}",
                    *overrides,
                    f"elmo.options={ROOT / 'tests/data/tiny_bilm/options.json'}",
                    f"elmo.weights={ROOT / 'tests/data/tiny_bilm/weights.hdf5'}",
                ]
            )
            assert code == 0
            out[folder.name] = folder
    return out


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """configs/tiny.yaml stopped after 6 epochs: dev/test F1 80, with missed, wrong-type and spurious entities."""
    out = tmp_path_factory.mktemp("report") / "run"
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={out}",
        f"data.dir={TINY}",
        "elmo.cache_dir=null",
        "trainer.max_epochs=6",
        "trainer.threads=1",
    ]
    threads = torch.get_num_threads()
    assert train.main(args) == 0
    torch.set_num_threads(threads)
    return out
