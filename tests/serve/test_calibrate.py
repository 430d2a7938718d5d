"""Calibration end to end: fitted at the end of training, ``ner-app calibrate`` writing a calibrated copy with the
same F1, and the temperature surviving export, load, ONNX (numpy CRF = torch CRF) and a real server."""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import train
from ner_app.bilm import save_bilm
from ner_app.cli.commands import main
from ner_app.onnx.crf import marginals
from ner_app.predict.predictor import Predictor
from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF
from ner_app.tagger.export import load_export
from ner_app.text.conll import read_conll
from tests.helpers import random_bilm, rewrite_spec

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
TEXTS = ["Alice Smith flew to Paris.", "Acme Corp hired Bob Jones in Berlin. Then Alice left!"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("calibrate")
    options, weights = save_bilm(random_bilm(), tmp / "bilm")
    code = train.main(
        [
            "--config",
            str(ROOT / "configs/tiny.yaml"),
            f"output_dir={tmp / 'run'}",
            f"data.dir={TINY}",
            f"elmo.options={options}",
            f"elmo.weights={weights}",
            "trainer.max_epochs=12",
            "trainer.threads=1",
        ]
    )
    assert code == 0
    return tmp / "run"


@pytest.fixture(scope="module")
def older(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's export as an export made before calibration: no calibration record."""
    import shutil

    export = tmp_path_factory.mktemp("older") / "export"
    shutil.copytree(run / "export", export)
    rewrite_spec(export, lambda spec: spec.pop("calibration", None), recompute=True)
    return export


def with_temperature(source: Path, out: Path, temperature: float) -> Path:
    import shutil

    shutil.copytree(source, out)

    def edit(spec: dict) -> None:
        spec["calibration"] = {
            "temperature": temperature,
            "fitted_on": "test",
            "entities": 1,
            "ece_before": 0.5,
            "ece_after": 0.1,
            "log_loss_before": 1.0,
            "log_loss_after": 0.5,
            "method": "temperature",
        }

    rewrite_spec(out, edit, recompute=True)
    return out


def test_training_fits_a_temperature_on_dev_and_records_it(run: Path) -> None:
    report = json.loads((run / "calibration.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    spec = json.loads((run / "export" / "tagger.json").read_text())
    t = report["temperature"]
    assert spec["calibration"]["temperature"] == t and spec["calibration"]["fitted_on"] == "dev"
    assert metrics["calibration"]["temperature"] == t
    assert metrics["calibration"]["dev_ece_after"] == report["dev"]["after"]["ece"]
    for split in ("dev", "test"):
        bins = report[split]["after"]["bins"]
        assert len(bins) == 10 and sum(b["count"] for b in bins) == report[split]["entities"]
    # the fit minimises dev log loss: never worse than uncalibrated
    assert report["dev"]["after"]["log_loss"] <= report["dev"]["before"]["log_loss"] + 1e-12
    tagger, _ = load_export(run / "export")
    assert tagger.crf.temperature == t


def scores(export: Path, texts: list[str]) -> list[list[float]]:
    predictor = Predictor.from_export(export)
    return [[e["score"] for e in line["entities"]] for line in predictor.predict_texts(texts)]


def evaluate_f1(export: Path, capsys) -> float:
    assert main(["evaluate", "--model", str(export), "--input", str(TINY / "test.txt"), "--json"]) == 0
    return float(json.loads(capsys.readouterr().out)["f1"])


def test_calibrate_writes_a_calibrated_copy_with_the_same_f1(older: Path, tmp_path: Path, capsys) -> None:
    before = {p.name: p.read_bytes() for p in older.rglob("*") if p.is_file()}
    out = tmp_path / "calibrated"
    code = main(["calibrate", "--model", str(older), "--dev", str(TINY / "valid.txt"), "--output", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "entity ECE (10 bins)" in printed.out and "entity log loss" in printed.out
    assert {p.name: p.read_bytes() for p in older.rglob("*") if p.is_file()} == before  # only read
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibrated"]  # nothing else written beside it
    record = json.loads((out / "tagger.json").read_text())["calibration"]
    assert record["fitted_on"] == "valid.txt" and record["entities"] > 0
    assert record["log_loss_after"] <= record["log_loss_before"] + 1e-12
    tagger, _ = load_export(out)
    assert tagger.crf.temperature == record["temperature"]
    assert evaluate_f1(out, capsys) == evaluate_f1(older, capsys)
    # every score is a probability
    assert all(0.0 <= s <= 1.0 for row in scores(out, TEXTS) for s in row)


def test_an_older_export_says_once_that_it_is_uncalibrated(older: Path, tmp_path: Path, capsys) -> None:
    text = tmp_path / "in.txt"
    text.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert main(["predict", "--model", str(older), "--input", str(text)]) == 0
    err = capsys.readouterr().err
    assert err.count("no calibration record") == 1 and str(older) in err
    calibrated = with_temperature(older, tmp_path / "cal", 2.0)
    assert main(["predict", "--model", str(calibrated), "--input", str(text)]) == 0
    assert "calibration" not in capsys.readouterr().err


def test_the_temperature_changes_scores_not_entities(older: Path, tmp_path: Path) -> None:
    hot = with_temperature(older, tmp_path / "hot", 3.0)
    a = list(Predictor.from_export(older).predict_texts(TEXTS))
    b = list(Predictor.from_export(hot).predict_texts(TEXTS))
    strip = [[{**e, "score": 0} for e in line["entities"]] for line in a]
    assert strip == [[{**e, "score": 0} for e in line["entities"]] for line in b]
    flat_a = [e["score"] for line in a for e in line["entities"]]
    flat_b = [e["score"] for line in b for e in line["entities"]]
    assert flat_a and flat_a != flat_b


@pytest.mark.parametrize("temperature", [0.4, 2.7])
def test_the_numpy_crf_tempers_as_the_crf_does(temperature: float) -> None:
    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    torch.manual_seed(1)
    crf = CRF(len(tags), allowed_transitions(tags, "BIOES"))
    with torch.no_grad():
        for p in crf.parameters():
            p.uniform_(-2, 2)
    lengths = torch.tensor([1, 9, 4, 17])
    emissions = torch.randn(len(lengths), 17, len(tags)) * 3
    mask = torch.arange(17)[None, :] < lengths[:, None]
    crf.temperature = temperature
    start, trans, end = (s.detach().numpy() for s in crf._scores())
    found = marginals(emissions.numpy(), lengths.numpy(), start, trans, end, temperature)
    crf64 = copy.deepcopy(crf).double()  # the numpy CRF sums in float64: compare with float64 torch
    with torch.no_grad():
        want = crf64.marginals(emissions.double(), mask).numpy()
        crf64.temperature = 1.0
        plain = crf64.marginals(emissions.double(), mask).numpy()
    np.testing.assert_allclose(found, want, atol=1e-6)
    assert np.abs(want - plain).max() > 1e-3  # the temperature did change them


def test_onnx_keeps_and_applies_the_temperature(older: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from ner_app.onnx.export import export_onnx_from
    from ner_app.onnx.predictor import OnnxPredictor

    calibrated = with_temperature(older, tmp_path / "cal", 2.5)
    export_onnx_from(calibrated, tmp_path / "onnx")
    onnx = OnnxPredictor(tmp_path / "onnx")
    assert onnx.temperature == 2.5 and onnx.calibrated
    sentences = [s.tokens for s in read_conll(TINY / "test.txt")]
    torch_tagged = Predictor.from_export(calibrated).tag(sentences)
    onnx_tagged = onnx.tag(sentences)
    for (tags_a, probs_a), (tags_b, probs_b) in zip(torch_tagged, onnx_tagged, strict=True):
        assert tags_a == tags_b
        np.testing.assert_allclose(probs_a, probs_b, atol=1e-4)
    export_onnx_from(older, tmp_path / "onnx_old")
    assert OnnxPredictor(tmp_path / "onnx_old").temperature == 1.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _call(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_the_server_answers_calibrated_scores(older: Path, tmp_path: Path) -> None:
    pytest.importorskip("litserve", reason="serve needs LitServe (pip install -e '.[serve]')")
    calibrated = with_temperature(older, tmp_path / "cal", 2.5)
    expected = list(Predictor.from_export(calibrated).predict_texts(TEXTS))
    port, log = _free_port(), tmp_path / "serve.log"
    command = [sys.executable, "-m", "ner_app", "serve", "--model", str(calibrated), "--port", str(port)]
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [*command, "--threads", "1"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            with contextlib.suppress(OSError):
                if _call(port, "GET", "/health")[0] == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        status, data = _call(port, "POST", "/predict", json.dumps({"texts": TEXTS}).encode())
        assert status == 200
        got = json.loads(data)["results"]
        for g, w in zip(got, expected, strict=True):
            assert [{**e, "score": 0} for e in g["entities"]] == [{**e, "score": 0} for e in w["entities"]]
            for a, b in zip(g["entities"], w["entities"], strict=True):
                assert abs(a["score"] - b["score"]) <= 1.5e-4  # batch padding moves the 4th decimal at most
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert "no calibration record" not in log.read_text()
