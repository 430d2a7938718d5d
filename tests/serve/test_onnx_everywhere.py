"""An ONNX folder is a model like any other: every inference command and ``load_tagger`` take it where they take
a torch export, an fp32 folder's outputs are the export's byte for byte, and predict, evaluate and serve run
it where torch and Lightning cannot be imported."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import ner_app
from ner_app.cli.commands import main
from ner_app.onnx.export import MANIFEST, export_onnx_from
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.predict.loading import ONNX_MANIFEST, load_predictor, model_kind
from ner_app.predict.predictor import Predictor
from tests.helpers import one_error_line, wait_until_healthy
from tests.serve.test_onnx import TEXTS, TINY, sentences, trained  # noqa: F401  # the tiny trained tagger

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--alternatives", "2", "--flag-missed", "0.95"]


@pytest.fixture(scope="module")
def text(trained: Path) -> Path:  # noqa: F811
    """Raw text lines: the module's texts and every tiny dev and test sentence, one a line."""
    path = trained / "text.txt"
    lines = [*TEXTS, *(" ".join(s) for s in sentences()[:-1])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_bytes(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> bytes:
    """Run a command writing ``--output out``; its bytes."""
    assert main([*argv, "--output", str(out)]) == 0, capsys.readouterr().err
    return out.read_bytes()


def test_the_folder_kind_is_read_off_the_folder(trained: Path) -> None:  # noqa: F811
    assert MANIFEST == ONNX_MANIFEST
    assert model_kind(trained / "onnx") == "onnx" and model_kind(trained / "run/export") == "torch"
    assert isinstance(load_predictor(trained / "onnx"), OnnxPredictor)
    assert isinstance(load_predictor(trained / "run/export"), Predictor)


@pytest.mark.parametrize(
    ("fmt", "extra"),
    [("jsonl", FLAGS), ("jsonl", ["--min-score", "0.3"]), ("conll", []), ("html", FLAGS)],
    ids=["jsonl-readings", "jsonl-min-score", "conll", "html"],
)
def test_predict_writes_the_exports_bytes(trained, text, tmp_path, capsys, fmt, extra) -> None:  # noqa: F811
    def predict(model: str, name: str, *more: str) -> bytes:
        argv = ["predict", "--model", model, "--input", str(text), "--format", fmt, *extra, *more]
        return run_bytes(argv, tmp_path / name, capsys)

    expected = predict(str(trained / "run/export"), "torch")
    assert expected.count(b"\n") >= len(TEXTS) and (b"PER" in expected or b"LOC" in expected)
    assert predict(str(trained / "onnx"), "onnx", "--threads", "1") == expected
    assert predict(str(trained / "onnx"), "workers", "--workers", "2") == expected


def test_predict_conll_tokens_are_the_exports(trained, tmp_path, capsys) -> None:  # noqa: F811
    for name in ("valid.txt", "test.txt"):
        argv = ["predict", "--input", str(TINY / name), "--format", "conll"]
        expected = run_bytes([*argv, "--model", str(trained / "run/export")], tmp_path / "torch", capsys)
        assert run_bytes([*argv, "--model", str(trained / "onnx")], tmp_path / "onnx", capsys) == expected


@pytest.mark.parametrize("extra", [[], ["--json"], ["--case-views"]], ids=["table", "json", "case-views"])
def test_evaluate_reports_are_the_exports(trained, tmp_path, capsys, extra) -> None:  # noqa: F811
    def evaluate(model: Path) -> tuple[str, bytes]:
        out = tmp_path / model.name
        argv = [
            "evaluate",
            "--model",
            str(model),
            "--gold",
            str(TINY / "test.txt"),
            "--predictions",
            str(out),
        ]
        assert main([*argv, *extra]) == 0
        return capsys.readouterr().out.replace(str(model), "MODEL"), out.read_bytes()

    expected = evaluate(trained / "run/export")
    assert "| **all** |" in expected[0] or '"f1"' in expected[0]
    assert evaluate(trained / "onnx") == expected


def test_evaluate_reports_on_an_int8_folder(trained, tmp_path, capsys) -> None:  # noqa: F811
    int8 = export_onnx_from(trained / "run/export", tmp_path / "onnx_int8", quantize="int8")
    assert OnnxPredictor(int8).quantize == "int8"
    found = {}
    for model in (trained / "onnx", int8):
        predictions = tmp_path / f"{model.name}.conll"
        argv = ["evaluate", "--model", str(model), "--gold", str(TINY / "test.txt"), "--json"]
        assert main([*argv, "--predictions", str(predictions)]) == 0
        rows = [line.split() for line in predictions.read_text(encoding="utf-8").splitlines() if line.strip()]
        found[model.name] = (json.loads(capsys.readouterr().out), rows)
    (fp32, fp32_rows), (quantized, int8_rows) = found["onnx"], found["onnx_int8"]
    assert quantized["model"] == str(int8) and 0 <= quantized["f1"] <= 100
    assert {k: quantized[k] for k in ("file", "sentences", "tokens", "scheme")} == {
        k: fp32[k] for k in ("file", "sentences", "tokens", "scheme")
    }
    assert [r[:-1] for r in int8_rows] == [r[:-1] for r in fp32_rows]  # token and gold: the same rows


def test_find_threshold_and_select_are_the_exports(trained, tmp_path, capsys) -> None:  # noqa: F811
    found = []
    for model in (trained / "run/export", trained / "onnx"):
        argv = ["find-threshold", "--model", str(model), "--gold", str(TINY / "test.txt"), "--json"]
        assert main(argv) == 0
        found.append(json.loads(capsys.readouterr().out) | {"model": None})
    assert found[0] == found[1] and found[0]["predicted_entities"] > 0
    chosen = []
    for model in (trained / "run/export", trained / "onnx"):
        out = tmp_path / f"chosen_{model.name}.jsonl"
        argv = ["select", "--model", str(model), "--input", str(TINY / "valid.txt"), "--pool-format", "conll"]
        assert (
            main([*argv, "--k", "3", "--strategy", "entropy", "--format", "conll", "--output", str(out)]) == 0
        )
        chosen.append(out.read_bytes())
    assert chosen[0] == chosen[1] and chosen[0]


def test_calibrating_an_onnx_folder_writes_a_calibrated_onnx_folder(trained, tmp_path, capsys) -> None:  # noqa: F811
    # gold where the tagger's LOC entities are wrong (MISC): a temperature other than 1 is fitted
    gold = tmp_path / "gold.txt"
    lines = (TINY / "valid.txt").read_text(encoding="utf-8").splitlines()
    gold.write_text("".join(line.replace("-LOC", "-MISC") + "\n" for line in lines), encoding="utf-8")
    outputs = {}
    for model in (trained / "run/export", trained / "onnx"):
        out = tmp_path / f"calibrated_{model.name}"
        argv = ["calibrate", "--model", str(model), "--gold", str(gold), "--output", str(out)]
        assert main(argv) == 0
        # the fit's time is the one value that may differ between two runs of the same fit
        outputs[model.name] = (out, re.sub(r"fitted in [0-9.]+ s", "fitted in T s", capsys.readouterr().out))
    (torch_out, torch_lines), (onnx_out, onnx_lines) = outputs["export"], outputs["onnx"]
    assert onnx_lines == torch_lines and "temperature" in onnx_lines  # the same fit, the same numbers
    assert (onnx_out / "onnx.json").is_file() and not (onnx_out / "tagger.json").exists()
    calibrated = OnnxPredictor(onnx_out)
    assert (
        calibrated.calibrated
        and calibrated.temperature == Predictor.from_export(torch_out).tagger.crf.temperature
    )
    assert calibrated.temperature != 1.0
    for name in (
        "tagger.onnx",
        "bilm.onnx",
        "crf.npz",
    ):  # the same graphs and scores: only the manifest changes
        assert (onnx_out / name).read_bytes() == (trained / "onnx" / name).read_bytes()
    text = tmp_path / "text.txt"
    text.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    argv = ["predict", "--input", str(text), *FLAGS]
    expected = run_bytes([*argv, "--model", str(torch_out)], tmp_path / "torch.jsonl", capsys)
    assert run_bytes([*argv, "--model", str(onnx_out)], tmp_path / "onnx.jsonl", capsys) == expected
    assert "not calibrated" not in capsys.readouterr().err


def test_load_tagger_takes_an_onnx_folder(trained: Path) -> None:  # noqa: F811
    onnx, torch_export = ner_app.load_tagger(trained / "onnx"), ner_app.load_tagger(trained / "run/export")
    assert isinstance(onnx.predictor, OnnxPredictor)
    assert onnx.predict(TEXTS, alternatives=2) == torch_export.predict(TEXTS, alternatives=2)
    assert onnx.tag(sentences()[:3]) == torch_export.tag(sentences()[:3])
    with pytest.raises(ValueError, match="is an ONNX folder, which runs on the CPU"):
        ner_app.load_tagger(trained / "onnx", device="cuda")


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "--input", "-", "--device", "cuda"],
        ["evaluate", "--gold", str(TINY / "test.txt"), "--device", "cuda"],
        ["find-threshold", "--gold", str(TINY / "test.txt"), "--device", "cuda"],
        ["calibrate", "--gold", str(TINY / "test.txt"), "--output", "{tmp}/out", "--device", "cuda"],
        [
            "select",
            "--input",
            str(TINY / "valid.txt"),
            "--k",
            "1",
            "--output",
            "{tmp}/out",
            "--device",
            "cuda",
        ],
        ["serve", "--port", "8931", "--device", "cuda"],
    ],
    ids=["predict", "evaluate", "find-threshold", "calibrate", "select", "serve"],
)
def test_a_cuda_device_is_one_line(trained, tmp_path, capsys, argv) -> None:  # noqa: F811
    model = trained / "onnx"
    args = [a.format(tmp=tmp_path) for a in argv]
    assert main([*args, "--model", str(model)]) == 2
    line = one_error_line(capsys)
    assert line == (
        f"error: --device cuda: {model} is an ONNX folder, which runs on the CPU (onnxruntime); leave --device "
        "out or give a torch export"
    )
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ torch-free
# A sitecustomize that makes torch and Lightning unimportable: importing one raises ImportError, and a probe for
# one (find_spec, as libraries do for optional packages) finds nothing it could load.
BLOCKER = """
import importlib.abc, importlib.machinery, sys
BLOCKED = {"torch", "lightning", "pytorch_lightning", "lightning_fabric", "torchmetrics"}
class Absent(importlib.abc.Loader):
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {spec.name!r} (blocked by the test)")
    def exec_module(self, module):
        pass
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            return importlib.machinery.ModuleSpec(name, Absent())
sys.meta_path.insert(0, Block())
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_predict_evaluate_and_serve_run_where_torch_cannot_be_imported(
    trained,  # noqa: F811
    text,
    tmp_path,
    capsys,
) -> None:
    pytest.importorskip("litserve", reason="serve needs LitServe (pip install -e '.[serve]')")
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    probe = subprocess.run(
        [sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env, timeout=60
    )
    assert probe.returncode == 1 and "blocked by the test" in probe.stderr  # the blocker is in force
    onnx = str(trained / "onnx")

    def command(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ner_app", *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    for fmt, extra in (("jsonl", FLAGS), ("conll", []), ("jsonl", ["--workers", "2"])):
        argv = ["predict", "--input", str(text), "--format", fmt, *extra]
        expected = run_bytes([*argv, "--model", str(trained / "run/export")], tmp_path / "expected", capsys)
        assert command(*argv, "--model", onnx).encode() == expected
    gold = ["--gold", str(TINY / "test.txt"), "--case-views"]
    assert main(["evaluate", "--model", str(trained / "run/export"), *gold]) == 0
    assert command("evaluate", "--model", onnx, *gold) == capsys.readouterr().out

    port = free_port()
    log = tmp_path / "serve.err"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ner_app",
                "serve",
                "--model",
                onnx,
                "--port",
                str(port),
                "--threads",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            start_new_session=True,
        )
    try:
        answer = _ask_when_ready(proc, port, log, TEXTS)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of its group is left
    assert answer == {"results": list(OnnxPredictor(onnx).predict_texts(TEXTS))}
    assert "Traceback" not in log.read_text(errors="replace")


def _ask_when_ready(proc: subprocess.Popen, port: int, log: Path, texts: list[str]) -> dict:
    """One POST /predict once ``/health`` answers 200."""
    wait_until_healthy(proc, port, log, 240)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"texts": texts}).encode()
    conn.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    return json.loads(response.read())
