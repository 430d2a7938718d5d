"""``train.py`` end to end at tiny scale: every config, F1 = 1.0 on a tiny set, exact resume, reports."""

import json
from pathlib import Path

import pytest
import torch

import train
from ner_app.text.conll import read_conll

pytestmark = pytest.mark.system  # trains tiny runs: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"


def run(tmp_path: Path, config: str, *overrides: str, bilm=None, resume: bool = False) -> int:
    args = [
        "--config",
        str(ROOT / "configs" / config),
        f"output_dir={tmp_path / 'run'}",
        f"data.dir={TINY}",
        f"elmo.cache_dir={tmp_path / 'cache'}",
    ]
    if bilm is not None:
        args += [f"elmo.options={bilm[0]}", f"elmo.weights={bilm[1]}"]
    return train.main(args + (["--resume"] if resume else []) + list(overrides))


def test_tiny_config_trains_to_f1_one_and_writes_reports(tmp_path, tiny_bilm_files, capsys):
    assert run(tmp_path, "tiny.yaml", bilm=tiny_bilm_files) == 0
    out = tmp_path / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    assert set(metrics["dev"]) >= {"precision", "recall", "f1", "per_type"}
    assert set(metrics["test"]["per_type"]) == {"PER", "LOC", "ORG", "MISC"}
    files = (
        "config.yaml",
        "report_dev.txt",
        "report_test.txt",
        "checkpoints/best.ckpt",
        "logs/metrics.csv",
        "export/model.safetensors",
        "export/tagger.json",
        "export/bilm/weights.hdf5",
    )
    for name in files:
        assert (out / name).is_file(), name
    report = (out / "report_test.txt").read_text()
    assert "default mode" in report and "strict mode, BIOES" in report
    assert "Test set" in capsys.readouterr().out
    # predictions: token gold predicted, in the original IOB1 tags, blank line between sentences
    gold = read_conll(TINY / "valid.txt")
    lines = (out / "predictions_dev.conll").read_text().split("\n")
    rows = [line.split(" ") for line in lines if line]
    assert [r[0] for r in rows] == [t for s in gold for t in s.tokens]
    assert [r[1] for r in rows] == [t for s in gold for t in s.tags] == [r[2] for r in rows]
    assert "B-LOC" in [r[2] for r in rows]  # the IOB1 boundary tag survives the BIOES round trip
    assert lines.count("") == len(gold) + 1
    logged = (out / "logs" / "metrics.csv").read_text()  # Lightning's ThroughputMonitor: sentences and tokens
    assert "train/device/samples_per_sec" in logged and "train/device/items_per_sec" in logged


@pytest.mark.slow
def test_resume_finishes_like_an_uninterrupted_run(tmp_path, tiny_bilm_files):
    # Without the layer cache, so the direct biLM path trains end to end too.
    common = ["trainer.max_epochs=6", "trainer.patience=100", "model.dropout=0.3", "elmo.cache_dir=null"]
    assert run(tmp_path / "a", "tiny.yaml", *common, bilm=tiny_bilm_files) == 0
    assert run(tmp_path / "b", "tiny.yaml", *common[1:], "trainer.max_epochs=3", bilm=tiny_bilm_files) == 0
    assert run(tmp_path / "b", "tiny.yaml", *common, bilm=tiny_bilm_files, resume=True) == 0
    a = torch.load(tmp_path / "a/run/checkpoints/last.ckpt", weights_only=False)
    b = torch.load(tmp_path / "b/run/checkpoints/last.ckpt", weights_only=False)
    assert a["epoch"] == b["epoch"] == 5
    for name, tensor in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][name], tensor, atol=0, rtol=0, msg=name)
    scores = [json.loads((tmp_path / f"{x}/run/metrics.json").read_text()) for x in "ab"]
    for split in ("dev", "test"):
        for m in scores:
            m[split].pop("sentences_per_s")  # timing, not a result
        assert scores[0][split] == scores[1][split]


@pytest.mark.parametrize(
    "config",
    [
        "conll2003_baseline.yaml",
        "conll2003_elmo.yaml",
        "conll2003_elmo_doc.yaml",
        "conll2003_minilm.yaml",
        pytest.param("conll2003_minilm_elmo.yaml", marks=pytest.mark.slow),  # both encoders: CI's slow lane
    ],
)
def test_real_configs_run_at_tiny_scale(tmp_path, monkeypatch, config):
    overrides = ["trainer.max_epochs=1", "trainer.enable_progress_bar=false", "model.lstm_hidden=8"]
    if not config.startswith("conll2003_baseline"):
        overrides.append("model.glove=null")  # the baseline run covers the GloVe path
    if "minilm" in config:  # a tiny random BERT in MiniLM's place (the real one: tests/tagger/transformer)
        from tests.tagger.transformer.models import tiny_bert

        overrides.append(f"transformer.folder={tiny_bert(tmp_path / 'bert')}")
    monkeypatch.chdir(ROOT)  # the configs name the shipped biLM relative to the checkout, as users run them
    assert run(tmp_path, config, *overrides) == 0
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_bad_config_is_one_clear_error(tmp_path, capsys):
    assert run(tmp_path, "tiny.yaml", "trainer.max_epoch=3") == 2
    assert "unknown key 'trainer.max_epoch'" in capsys.readouterr().err


def test_resume_without_checkpoint_says_so(tmp_path, capsys):
    assert run(tmp_path, "tiny.yaml", resume=True) == 2
    err = capsys.readouterr().err
    assert "--resume: no checkpoint at" in err and "start afresh without --resume" in err
    # last.ckpt deleted from a finished run: the advice is one that works, not "without --resume", which a
    # folder holding a run's files refuses with "add --resume"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text("{}")
    assert run(tmp_path, "tiny.yaml", resume=True) == 2
    assert "start afresh in a new output_dir" in capsys.readouterr().err


def test_missing_bilm_says_how_to_get_one(tmp_path, capsys):
    assert run(tmp_path, "tiny.yaml", f"elmo.options={tmp_path / 'none.json'}") == 2
    err = capsys.readouterr().err
    assert f"elmo.options: {tmp_path / 'none.json'} does not exist" in err and len(err.splitlines()) == 1
    assert (
        f"the shipped biLM is {ROOT / 'data' / 'bilm'}" in err
    )  # the first thing to try, before pretraining
    assert "elmo.enabled=false" in err and "pretrain-bilm: hours" in err


def test_bf16_mixed_on_cpu_trains_to_f1_one(tmp_path, tiny_bilm_files):
    # CPU autocast in bfloat16: the closest CPU stand-in for the GPU path (bf16-mixed, layer cache on).
    overrides = [
        "trainer.accelerator=cpu",
        "trainer.precision=bf16-mixed",
        "trainer.enable_progress_bar=false",
    ]
    assert run(tmp_path, "tiny.yaml", *overrides, bilm=tiny_bilm_files) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    assert "bf16-mixed" in (tmp_path / "run" / "config.yaml").read_text()


@pytest.mark.slow  # seconds of training: the slow lane
def test_elmo_at_output_trains_to_f1_one_from_one_cache_fill_and_exports(tmp_path, tiny_bilm_files, caplog):
    """``elmo.at_output``: the second mix reads the same cached layers (one fill; a run without it reuses
    them all), the tiny set is learnt, metrics.json labels both mixes, and the export predicts the same."""
    import logging

    from ner_app.tagger.batch import encode_batch
    from ner_app.tagger.export import load_export
    from ner_app.train.from_checkpoint import export_checkpoint

    with caplog.at_level(logging.INFO, logger="ner_app"):
        assert run(tmp_path, "tiny.yaml", "elmo.at_output=true", bilm=tiny_bilm_files) == 0
        fills = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ELMo layer cache")]
        assert len(fills) == 1 and " 0 sentences computed" not in fills[0]
        caplog.clear()
        same_cache = f"elmo.cache_dir={tmp_path / 'cache'}"  # the first run's cache, at_output off
        assert run(tmp_path / "again", "tiny.yaml", same_cache, bilm=tiny_bilm_files) == 0
        assert any(" 0 sentences computed" in r.getMessage() for r in caplog.records)
    out = tmp_path / "run"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    assert [m["at"] for m in metrics["elmo_mix"]] == ["input", "output"]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "input mix" in page and "output mix" in page  # the run report labels both
    tagger, spec = load_export(out / "export")
    assert (
        spec.elmo is not None and spec.elmo.at_output and len(tagger.feature("elmo").elmo.scalar_mixes) == 2
    )
    again, _ = load_export(export_checkpoint(out / "checkpoints" / "best.ckpt", tmp_path / "export2"))
    sentences = [s.tokens for s in read_conll(TINY / "test.txt")]
    batch = encode_batch(sentences, spec)
    assert torch.equal(tagger.decode(batch), again.decode(batch))
    torch.testing.assert_close(tagger.emissions(batch), again.emissions(batch), atol=0, rtol=0)
