"""The shipped tagger as an fp32 ONNX folder on every CoNLL-2003 dev sentence: predict's CoNLL output and
evaluate's report are the export's byte for byte; predict's JSON lines are too, but for the last digit of the
rare score that lies within onnxruntime's rounding of a 4-decimal boundary (docs/deploying.md#onnx-or-torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ner_app.cli.commands import main
from ner_app.onnx.export import export_onnx_from
from tests.helpers import shared_path

pytestmark = pytest.mark.slow  # the whole dev file through both, several times: minutes

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "data" / "models" / "conll2003"
SCORE_UNIT = 1e-4  # predict prints a score to 4 decimals (text/pieces.py)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    dev = shared_path("data", "conll2003", "valid.txt")
    tmp = tmp_path_factory.mktemp("shipped_onnx")
    return dev, SHIPPED, export_onnx_from(SHIPPED, tmp / "onnx")


def output(argv: list[str], out: Path) -> bytes:
    assert main([*argv, "--threads", "1", "--output", str(out)]) == 0
    return out.read_bytes()


def test_predict_conll_on_dev_is_the_exports(folders, tmp_path) -> None:
    dev, export, onnx = folders
    argv = ["predict", "--input", str(dev), "--format", "conll"]
    expected = output([*argv, "--model", str(export)], tmp_path / "torch.conll")
    assert expected.count(b"\n") > 50_000
    assert output([*argv, "--model", str(onnx)], tmp_path / "onnx.conll") == expected


def test_evaluate_on_dev_is_the_exports(folders, tmp_path, capsys) -> None:
    dev, export, onnx = folders
    found = []
    for model in (export, onnx):
        predictions = tmp_path / f"{model.name}.conll"
        argv = ["evaluate", "--model", str(model), "--gold", str(dev), "--threads", "1"]
        assert main([*argv, "--json", "--predictions", str(predictions)]) == 0
        found.append((capsys.readouterr().out.replace(str(model), "MODEL"), predictions.read_bytes()))
    assert found[0] == found[1]
    assert json.loads(found[0][0])["f1"] > 85


def without_scores(value: Any, scores: list[float]) -> Any:
    """``value`` with every ``score`` and ``o_score`` taken out into ``scores``, in order."""
    if isinstance(value, dict):
        for key in ("score", "o_score"):
            if key in value:
                scores.append(value[key])
        return {k: without_scores(v, scores) for k, v in value.items() if k not in ("score", "o_score")}
    if isinstance(value, list):
        return [without_scores(v, scores) for v in value]
    return value


def test_predict_jsonl_on_dev_differs_only_in_a_rounded_last_digit(folders, tmp_path) -> None:
    dev, export, onnx = folders
    text = tmp_path / "dev.txt"
    sentences = dev.read_text(encoding="utf-8").split("\n\n")
    lines = [" ".join(row.split()[0] for row in s.splitlines() if row.strip()) for s in sentences]
    text.write_text(
        "".join(line + "\n" for line in lines if line and "-DOCSTART-" not in line), encoding="utf-8"
    )
    argv = ["predict", "--input", str(text), "--alternatives", "2", "--flag-missed", "0.95"]
    expected = output([*argv, "--model", str(export)], tmp_path / "torch.jsonl").decode().splitlines()
    found = output([*argv, "--model", str(onnx)], tmp_path / "onnx.jsonl").decode().splitlines()
    assert len(found) == len(expected) > 3000
    different = 0
    for a, b in zip(found, expected, strict=True):
        if a == b:
            continue
        ours, theirs = [], []  # every entity, reading and flagged token the same; only a score's last digit
        assert without_scores(json.loads(a), ours) == without_scores(json.loads(b), theirs)
        gaps = [abs(x - y) for x, y in zip(ours, theirs, strict=True) if x != y]
        assert gaps and all(abs(gap - SCORE_UNIT) < 1e-9 for gap in gaps), gaps
        different += len(gaps)
    # onnxruntime's emissions differ from torch's by at most ~1e-5 (another summation order), the probabilities
    # by ~1e-6: a printed score changes only where it lies that close to a 4-decimal rounding boundary
    assert different <= 0.001 * sum(line.count('"score"') for line in expected)
