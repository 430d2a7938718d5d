"""The GPU path (marked ``cuda``: skipped without a CUDA GPU; python -m benchmarks.gpu_check runs these)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import train
from ner_app.bilm.char_mapper import batch_to_ids
from tests.helpers import random_bilm

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
pytestmark = pytest.mark.cuda


def test_bilm_on_cuda_matches_cpu() -> None:
    bilm = random_bilm()
    ids = batch_to_ids([["Alice", "flew", "to", "Paris"], ["Bob"]])
    cpu = bilm(ids).layers
    gpu = bilm.to("cuda")(ids.to("cuda")).layers
    for a, b in zip(cpu, gpu, strict=True):
        torch.testing.assert_close(b.cpu(), a, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("cache", [True, False])
def test_tiny_training_on_gpu_in_bf16_mixed(tmp_path: Path, tiny_bilm_files, cache: bool) -> None:
    args = ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={tmp_path / 'run'}", f"data.dir={TINY}",
            f"elmo.options={tiny_bilm_files[0]}", f"elmo.weights={tiny_bilm_files[1]}",
            f"elmo.cache_dir={tmp_path / 'cache' if cache else 'null'}", "trainer.accelerator=gpu",
            "trainer.precision=bf16-mixed"]  # fmt: skip
    assert train.main(args) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
