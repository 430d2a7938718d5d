"""Prediction on Ray Data (``ner_app.onnx.ray_batch``): a local Ray cluster of two CPUs tags a few hundred
lines with a tiny ONNX export and writes, line for line, what ``predict --format jsonl`` prints."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ner_app.onnx import ray_batch
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.text.conll import read_conll
from tests.helpers import one_error_line
from tests.serve.test_onnx import TINY, trained  # noqa: F401  # the tiny tagger with ELMo and its ONNX export
from tests.system.docs_parsing import documented

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = (
    "python -m ner_app.onnx.ray_batch --model runs/tiny/onnx --output predictions --actors 2 news.txt"
)
SPECIAL = [
    "",  # predict answers an empty line with an empty object, and so must Ray
    "Zoë met Ünal in Köln\r and a carriage return inside the line",  # a lone \r is part of its line
    "Paris\u2028Berlin and Alice: a Unicode line separator, which is no line end for predict",
    "   ",
    "Alice Smith flew to Paris. Then Bob Jones left Berlin! " * 30,  # several sentences in one line
]


def lines() -> list[str]:
    """A few hundred lines: pairs of the tiny corpus's sentences, and lines that split differently elsewhere."""
    sentences = [
        " ".join(s.tokens) for name in ("train.txt", "valid.txt", "test.txt") for s in read_conll(TINY / name)
    ]
    pairs = [f"{a} {b}" for a in sentences for b in sentences] + [
        f"{a} , said {b}" for a in sentences for b in sentences
    ]
    assert len(pairs) >= 300
    return [*pairs[:150], *SPECIAL, *pairs[150:300]]


def written_rows(folder: Path) -> list[dict[str, Any]]:
    """Every JSON line of the files Ray wrote into ``folder``, ordered by file and line; the files are ASCII
    (every other character escaped), so that any reader splits them into the same lines."""
    assert all(f.read_bytes().isascii() for f in folder.glob("*.json"))
    rows = [
        json.loads(line)
        for f in sorted(folder.glob("*.json"))
        for line in f.read_text("utf-8").split("\n")
        if line
    ]
    return sorted(rows, key=lambda r: (r["path"], r["line"]))


def predicted(model: Path, source: Path) -> list[dict[str, Any]]:
    """What ``predict --format jsonl`` prints for ``source``, one object a line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "ner_app", "predict", "--format", "jsonl", "--model", str(model)]
    done = subprocess.run(
        [*command, "--input", str(source)], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def same_entities(found: list[dict[str, Any]], expected: list[dict[str, Any]], tolerance: float) -> bool:
    """Equal entities, their scores within ``tolerance``."""
    return [{**e, "score": None} for e in found] == [{**e, "score": None} for e in expected] and np.allclose(
        [e["score"] for e in found], [e["score"] for e in expected], atol=tolerance, rtol=0
    )


@pytest.fixture
def ray_cluster(monkeypatch: pytest.MonkeyPatch):
    """A Ray cluster of this machine: two CPUs, no dashboard, on 127.0.0.1 alone; its workers import this
    checkout."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.slow
@pytest.mark.system
def test_ray_writes_what_predict_prints_line_for_line(
    trained: Path,  # noqa: F811
    ray_cluster: Any,
    tmp_path: Path,
) -> None:
    text = lines()
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("\n".join(text[:200]) + "\n", encoding="utf-8")
    second.write_bytes(("\n".join(text[200:])).encode("utf-8"))  # no line end after the last line
    onnx = trained / "onnx"
    # small batches: many map_batches calls over both actors, which Ray gives back in no particular order
    dataset = ray_batch.predict_dataset([str(first), str(second)], onnx, actors=2, batch_lines=23)
    out = tmp_path / "out"
    assert ray_batch.write_predictions(dataset, out) == str(out)
    rows = written_rows(out)
    assert [(Path(r["path"]).name, r["line"]) for r in rows] == [
        *(("a.txt", n) for n in range(1, 201)),
        *(("b.txt", n) for n in range(1, len(text) - 199)),
    ]
    assert [r["text"] for r in rows] == text
    assert sum(len(r["entities"]) for r in rows) > len(
        text
    )  # a tagger that finds entities: a real comparison
    # the ONNX tagger over each whole file in one process, as predict runs it: equal, scores and all
    alone = [*OnnxPredictor(onnx).predict_texts(text[:200]), *OnnxPredictor(onnx).predict_texts(text[200:])]
    assert [{"text": r["text"], "entities": r["entities"]} for r in rows] == alone
    # predict --format jsonl --model ONNX_DIR on the same files: the same objects, line by line
    assert [{"text": r["text"], "entities": r["entities"]} for r in rows] == [
        *predicted(onnx, first),
        *predicted(onnx, second),
    ]
    # predict --format jsonl on the same files: the same lines, the same entities; the scores as the ONNX
    # graphs give them (onnxruntime's float32 differs from torch's in the last bits, tests/serve/test_onnx.py)
    expected = [*predicted(trained / "run/export", first), *predicted(trained / "run/export", second)]
    assert [r["text"] for r in rows] == [e["text"] for e in expected]
    for row, line in zip(rows, expected, strict=True):
        assert same_entities(row["entities"], line["entities"], 2e-4), (row, line)
    assert (out / ".ner-app").is_file()  # the marker: a second run may replace its own output
    ray_batch.write_predictions(ray_batch.predict_dataset(str(second), onnx), out)
    assert len(written_rows(out)) == len(text) - 200

    # a file that is not UTF-8, found in a Ray task: the one line predict gives, and nothing written
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"Alice\nBob \xff Jones\n")
    with pytest.raises(ray_batch.InputTextError) as caught:
        ray_batch.write_predictions(ray_batch.predict_dataset(str(bad), onnx), tmp_path / "bad_out")
    assert str(caught.value) == (
        f"{bad}:2: byte 5 (0xff) is not UTF-8; convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8)"
    )
    assert not (tmp_path / "bad_out").exists() and not list(tmp_path.glob(".bad_out*"))


@pytest.mark.system
def test_the_batch_class_takes_arrow_pandas_and_numpy_batches(trained: Path) -> None:  # noqa: F811
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    tagger = ray_batch.OnnxTagBatch(str(trained / "onnx"))
    text = ["Alice Smith flew to Paris .", "", "Acme Corp hired Bob Jones in Berlin ."]
    expected = list(OnnxPredictor(trained / "onnx").predict_texts(text))
    batches = {
        "pyarrow": pa.table({"id": [7, 8, 9], "text": text}),
        "pandas": pd.DataFrame({"id": [7, 8, 9], "text": text}),
        "numpy": {"id": np.array([7, 8, 9]), "text": np.array(text)},
    }
    for name, batch in batches.items():
        table = tagger(batch)
        assert table.column_names == ["id", "text", "entities"], name
        assert table.column("id").to_pylist() == [7, 8, 9], name
        assert [
            {"text": t, "entities": e}
            for t, e in zip(text, table.column("entities").to_pylist(), strict=True)
        ] == expected
    empty = tagger(
        pa.table({"text": ["", "the"]})
    )  # no entities at all: still the entity type, not list<null>
    assert empty.schema.field("entities").type == ray_batch._entity_type()
    with pytest.raises(ray_batch.NerAppError, match="a batch without a 'text' column"):
        tagger({"line": np.array(["Alice"])})


def test_without_ray_one_line_names_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray imports
    monkeypatch.setitem(sys.modules, "ray.data", None)
    source = tmp_path / "news.txt"
    source.write_text("Alice flew to Paris.\n", encoding="utf-8")
    code = ray_batch.main(["--model", str(tmp_path), "--output", str(tmp_path / "out"), str(source)])
    assert code == 2
    assert one_error_line(capsys) == 'error: Ray Data is not installed: pip install "ray[data]"'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["news.txt"]


def test_a_folder_it_did_not_write_is_refused_before_ray_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me\n", encoding="utf-8")
    code = ray_batch.main(["--model", str(tmp_path), "--output", str(tmp_path / "out"), "news.txt"])
    assert code == 2
    assert one_error_line(capsys) == (
        f"error: --output {tmp_path / 'out'}: exists and is not an earlier output of ray_batch, or was changed since "
        "(it holds mine.txt); nothing was changed: choose another output folder, or add --overwrite to replace the "
        "files it writes"
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mine.txt"]


@pytest.mark.slow
@pytest.mark.system
def test_the_documented_command(trained: Path, tmp_path: Path) -> None:  # noqa: F811
    assert DOCUMENTED in {c.command for c in documented()}  # docs/deploying.md shows this very command
    pytest.importorskip("ray.data")
    news = tmp_path / "news.txt"
    news.write_text(
        "Alice Smith flew to Paris .\n\nAcme Corp hired Bob Jones in Berlin .\n", encoding="utf-8"
    )
    argv = shlex.split(DOCUMENTED)
    argv = [
        {
            "runs/tiny/onnx": str(trained / "onnx"),
            "predictions": str(tmp_path / "predictions"),
            "news.txt": str(news),
        }.get(a, a)
        for a in argv
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, *argv[1:], "--num-cpus", "2"]  # this machine's two cores, whatever it has
    done = subprocess.run(run, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = written_rows(tmp_path / "predictions")
    assert [(r["line"], r["text"]) for r in rows] == [
        (n, t) for n, t in enumerate(news.read_text().splitlines(), 1)
    ]
    assert rows[0]["entities"] and rows[1]["entities"] == []
    # a folder that is not an ONNX export: predict's one line, before any actor starts, nothing written
    wrong = [*run[: run.index("--model") + 1], str(trained / "run/export"), *run[run.index("--model") + 2 :]]
    wrong[wrong.index("--output") + 1] = str(tmp_path / "wrong")
    done = subprocess.run(wrong, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and errors == [
        f"error: {trained / 'run/export'}: not an ONNX export (no onnx.json); make one with ner-app export --onnx "
        "--model EXPORT --output DIR"
    ], done.stderr[-3000:]
    assert not (tmp_path / "wrong").exists()
