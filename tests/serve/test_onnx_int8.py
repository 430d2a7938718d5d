"""``export --onnx --quantize int8``: int8 graphs that the ONNX predictor loads and tags with, recorded in the
manifest, and their agreement with the fp32 graphs measured (benchmarks/onnx_int8.py measures it on
CoNLL-2003)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import onnx
import pytest

from benchmarks.onnx_int8 import agreement, source_tags
from ner_app.cli.commands import main
from ner_app.onnx.manifest import with_checksum
from ner_app.onnx.predictor import OnnxModelError, OnnxPredictor
from ner_app.text.conll import read_conll
from tests.helpers import one_error_line
from tests.serve.test_onnx import TINY, trained  # noqa: F401  # the module's tiny trained tagger

pytestmark = pytest.mark.system  # trains a tiny run: out of the fast lane

INTEGER_OPS = {"DynamicQuantizeLSTM", "MatMulInteger", "ConvInteger", "DynamicQuantizeLinear"}


@pytest.fixture(scope="module")
def int8(trained: Path) -> Path:  # noqa: F811
    out = trained / "onnx_int8"
    code = main(
        [
            "export",
            "--onnx",
            "--quantize",
            "int8",
            "--model",
            str(trained / "run/export"),
            "--output",
            str(out),
        ]
    )
    assert code == 0
    return out


def ops(path: Path) -> Counter[str]:
    return Counter(node.op_type for node in onnx.load(str(path)).graph.node)


def test_int8_graphs_hold_integer_ops_and_the_manifest_says_so(trained, int8):  # noqa: F811
    for graph in ("tagger.onnx", "bilm.onnx"):
        assert set(ops(int8 / graph)) & INTEGER_OPS, graph
        assert not set(ops(trained / "onnx" / graph)) & INTEGER_OPS, graph
    manifest = json.loads((int8 / "onnx.json").read_text(encoding="utf-8"))
    assert manifest["quantize"] == "int8"
    assert "quantize" not in json.loads(
        (trained / "onnx/onnx.json").read_text(encoding="utf-8")
    )  # fp32: as before


def test_int8_predictor_tags_and_agrees_with_fp32(trained, int8):  # noqa: F811
    fp32, quantized = OnnxPredictor(trained / "onnx", threads=1), OnnxPredictor(int8, threads=1)
    assert fp32.quantize is None and quantized.quantize == "int8"
    sentences = [s for name in ("valid.txt", "test.txt") for s in read_conll(TINY / name)]
    first, second = source_tags(fp32, sentences), source_tags(quantized, sentences)
    assert [len(t) for t in second] == [len(s.tokens) for s in sentences]
    tokens, whole = agreement(second, first)
    assert 0.9 <= tokens <= 1.0 and 0.0 <= whole <= tokens + 1e-9  # a tiny random-ish tagger: near, not exact
    texts = list(quantized.predict_texts(["Alice Smith flew to Paris.", ""]))
    assert [t["text"] for t in texts] == ["Alice Smith flew to Paris.", ""] and texts[1]["entities"] == []


def test_agreement_counts_tokens_and_sentences():
    assert agreement([["O", "B-PER"], ["O"]], [["O", "B-PER"], ["B-LOC"]]) == (2 / 3, 1 / 2)
    assert agreement([], []) == (0.0, 0.0)


def test_an_unknown_quantization_in_the_manifest_is_refused(int8, tmp_path):
    folder = tmp_path / "edited"
    folder.mkdir()
    for path in int8.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    manifest = json.loads((folder / "onnx.json").read_text(encoding="utf-8"))
    manifest.pop("manifest_sha256")
    manifest["quantize"] = "int4"
    (folder / "onnx.json").write_text(json.dumps(with_checksum(manifest)), encoding="utf-8")
    with pytest.raises(OnnxModelError, match="quantize 'int4' is not int8"):
        OnnxPredictor(folder)


def test_quantize_without_onnx_is_one_line(trained, tmp_path, capsys):  # noqa: F811
    code = main(["export", "--checkpoint", "x.ckpt", "--quantize", "int8", "--output", str(tmp_path / "o")])
    assert code == 2
    one_error_line(capsys, "--quantize goes with --onnx")
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--onnx", "--quantize", "int4", "--output", str(tmp_path / "o")])
    assert exit_.value.code == 2 and not (tmp_path / "o").exists()


SPEED = re.compile(
    r"^(torch|onnx|int8) \(.*\): ([\d,]+) words/s, 95% CI \[([\d,]+), ([\d,]+)\] over (\d+) batches \(([\d,]+) words in "
    r"[\d.]+ s; 2 warm-up batches left out\)$"
)


@pytest.mark.parametrize("where, path", [("run/export", "torch"), ("onnx", "onnx"), ("onnx_int8", "int8")])
def test_benchmark_speed_on_every_path(trained, int8, tmp_path, capsys, where, path):  # noqa: F811
    text = tmp_path / "in.txt"
    text.write_text("Alice Smith flew to Paris.\nAcme Corp hired Bob Jones in Berlin. Then Alice left!\n\n")
    args = ["benchmark", "speed", "--model", str(trained / where), "--input", str(text), "--batches", "12"]
    assert main([*args, "--warmup", "2", "--batch-size", "4", "--path", path]) == 0
    found = SPEED.match(capsys.readouterr().out.strip())
    assert found, found
    mean, low, high = (float(found.group(i).replace(",", "")) for i in (2, 3, 4))
    assert found.group(1) == path and int(found.group(5)) == 12
    assert 0 < low <= mean <= high < 1e8
    assert int(found.group(6).replace(",", "")) == 16 * (
        6 + 8 + 4
    )  # 48 sentences: the 3 (6, 8, 4 words) 16 times


def test_benchmark_speed_refuses_a_path_the_folder_does_not_hold(trained, tmp_path, capsys):  # noqa: F811
    text = tmp_path / "in.txt"
    text.write_text("Alice\n")
    assert (
        main(["benchmark", "speed", "--model", str(trained / "onnx"), "--input", str(text), "--path", "int8"])
        == 2
    )
    one_error_line(capsys, "holds fp32 ONNX graphs", "--quantize int8")
    assert (
        main(
            [
                "benchmark",
                "speed",
                "--model",
                str(trained / "run/export"),
                "--input",
                str(text),
                "--path",
                "onnx",
            ]
        )
        == 2
    )
    one_error_line(capsys, "is not an ONNX export")
