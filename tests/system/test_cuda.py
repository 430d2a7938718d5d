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
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={tmp_path / 'run'}",
        f"data.dir={TINY}",
        f"elmo.options={tiny_bilm_files[0]}",
        f"elmo.weights={tiny_bilm_files[1]}",
        f"elmo.cache_dir={tmp_path / 'cache' if cache else 'null'}",
        "trainer.accelerator=gpu",
        "trainer.precision=bf16-mixed",
    ]
    assert train.main(args) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0


@pytest.mark.filterwarnings("ignore:You are using a custom batch sampler")
@pytest.mark.parametrize("context", [None, "sentence", "document"])
def test_plain_predict_loop_on_cuda_equals_lightnings(context: str | None) -> None:
    """``Predictor`` on the GPU (its batches moved by ``batch_to``) gives bit for bit the tags and scores of
    Lightning's predict loop over ``TaggerModule.predict_step`` on the GPU, and the CPU's tags."""
    from torch.utils.data import DataLoader

    from ner_app.config.schema import RuntimeConfig
    from ner_app.predict.predictor import PREDICT_MAX_TOKENS, Predictor
    from ner_app.runtime.trainer import build_trainer
    from ner_app.tagger.batch import encode_batch
    from ner_app.train.module import TaggerModule
    from ner_app.train.sampler import LengthBucketSampler
    from tests.serve.test_predict_budget import sentences, tagger_and_spec

    tagger, spec = tagger_and_spec(context)
    tokens = [t for t in sentences()[0] if len(t) <= 250]  # no pieces: one row per sentence in both loops
    on_cpu = Predictor(tagger, spec, batch_size=6).tag(tokens)
    tagger = tagger.to("cuda")
    plain = Predictor(tagger, spec, batch_size=6).tag(tokens)
    assert [t for t, _ in plain] == [t for t, _ in on_cpu]
    if context == "document":
        return  # Lightning's loop never ran document context (its collate came from the predictor)
    loader = DataLoader(
        list(enumerate(tokens)),  # type: ignore[arg-type]
        batch_sampler=LengthBucketSampler([len(t) for t in tokens], 6, max_tokens=PREDICT_MAX_TOKENS),
        collate_fn=lambda items: encode_batch([t for _, t in items], spec, index=[i for i, _ in items]),
    )
    runtime = RuntimeConfig(accelerator="gpu", precision="32-true", enable_progress_bar=False)
    found: dict[int, tuple[list[str], list[float]]] = {}
    for index, paths, chosen in (
        build_trainer(runtime, []).predict(TaggerModule(tagger, spec, gold={}), dataloaders=loader) or []
    ):
        for row, i in enumerate(index.tolist()):
            n = len(tokens[i])
            found[i] = (spec.tag_vocab.decode(paths[row, :n].tolist()), chosen[row, :n].tolist())
    assert plain == [found[i] for i in range(len(tokens))]
