"""The transformer feature through the whole product: a tiny run reaches F1 1.0, its export carries the
encoder and predicts with the training folder gone and the hub offline, and every command takes it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open

import train
from ner_app import load_tagger
from ner_app.cli.main import main
from ner_app.report.run_files import read_transformer_mix
from tests.tagger.transformer.models import tiny_bert
from tests.tagger.transformer.runs import (
    TEXTS,
    TINY,
    cli,
    offline,
    one_error_line,
    train_args,
    train_process,
)

pytestmark = pytest.mark.system  # trains tiny runs and starts processes


def test_a_tiny_run_reaches_f1_one_and_records_its_mix(run: Path) -> None:
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    (mix,) = metrics["transformer_mix"]  # the learned mix of the encoder's 3 hidden states
    assert len(mix["softmax_w"]) == 3 and abs(sum(mix["softmax_w"]) - 1) < 1e-6
    assert "elmo_mix" not in metrics and "bilm_fingerprint" not in metrics  # no ELMo in this run
    entry = json.loads((run / "export" / "tagger.json").read_text())["features"][-1]
    assert entry["name"] == "transformer" and entry["config"] == "transformer/config.json"
    assert metrics["transformer_fingerprint"] == entry["fingerprint"]
    exported = read_transformer_mix(run)  # the report's table: the export's weights, read back
    assert exported is not None and exported.softmax_w == pytest.approx(mix["softmax_w"], abs=1e-7)
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "Transformer layer weights" in page and f"{exported.gamma:.2f}" in page
    assert sorted(p.name for p in (run / "export" / "transformer").iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    with safe_open(str(run / "export" / "model.safetensors"), "pt") as weights:  # the encoder: not trained
        keys = list(weights.keys())
    assert "transformer_mix.scalar_parameters" in keys and not [
        k for k in keys if k.startswith("transformer.")
    ]


@pytest.mark.slow
def test_the_export_predicts_offline_without_the_training_folder(run: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(run / "export", moved)
    result = cli("predict", "--model", str(moved), "--input", "-", stdin="\n".join(TEXTS) + "\n")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    expected = load_tagger(run / "export").predict(TEXTS)
    assert [[(e["start"], e["end"], e["type"]) for e in line["entities"]] for line in lines] == [
        [(e.start, e.end, e.type) for e in entities] for entities in expected
    ]
    assert result.stderr == ""  # no load bars, no notes of the library's


@pytest.mark.slow  # CI's slow lane: processes
def test_a_changed_encoder_file_is_refused(run: Path, tmp_path: Path) -> None:
    forged = tmp_path / "forged"
    shutil.copytree(run / "export", forged)
    weights = forged / "transformer" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 1
    weights.write_bytes(bytes(data))
    one_error_line(
        cli("predict", "--model", str(forged), "--input", "-", stdin="EU .\n"),
        "differ from those the tagger was trained with",
    )
    (forged / "transformer" / "model.safetensors").unlink()
    one_error_line(
        cli("predict", "--model", str(forged), "--input", "-", stdin="EU .\n"), "no model.safetensors"
    )


@pytest.mark.parametrize(
    "fmt",
    [
        "jsonl",
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("conll", "labelstudio", "doccano", "brat")),
    ],
)
def test_predict_with_workers_equals_one_process(run: Path, tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS * 5) + "\n")
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}"
        code = main(
            [
                "predict",
                "--model",
                str(run / "export"),
                "--input",
                str(source),
                "--format",
                fmt,
                "--workers",
                workers,
                "--output",
                str(out),
            ]
        )
        assert code == 0
        outputs.append(
            {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
            if out.is_dir()
            else out.read_bytes()
        )
    assert outputs[0] == outputs[1]


def test_evaluate_calibrate_and_select_take_it(run: Path, tmp_path: Path, capsys) -> None:
    export = str(run / "export")
    assert main(["evaluate", "--model", export, "--gold", str(TINY / "test.txt"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == 100.0
    calibrated = tmp_path / "calibrated"
    assert (
        main(["calibrate", "--model", export, "--dev", str(TINY / "valid.txt"), "--output", str(calibrated)])
        == 0
    )
    assert (calibrated / "transformer" / "model.safetensors").is_file()
    assert load_tagger(calibrated).predict(TEXTS[:1]) != [] and capsys.readouterr()
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(TEXTS * 3) + "\n")
    assert (
        main(
            [
                "select",
                "--model",
                export,
                "--input",
                str(pool),
                "--k",
                "2",
                "--output",
                str(tmp_path / "chosen.txt"),
            ]
        )
        == 0
    )
    assert len((tmp_path / "chosen.txt").read_text().splitlines()) == 2


@pytest.mark.slow  # CI's slow lane: processes
def test_onnx_export_refuses_in_one_line(run: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    result = cli("export", "--model", str(run / "export"), "--onnx", "--output", str(tmp_path / "onnx"))
    one_error_line(result, "transformer")
    assert not (tmp_path / "onnx").exists()


@pytest.mark.slow  # CI's slow lane: more training runs, processes or a server
def test_init_from_continues_with_the_exports_encoder_and_refuses_another(run: Path, tmp_path: Path) -> None:
    export = run / "export"
    more = ["trainer.max_epochs=2", f"model.init_from={export}"]
    assert train.main(train_args(tmp_path / "again", export / "transformer", *more)) == 0
    other = tiny_bert(tmp_path / "other", seed=1)
    result = train_process(tmp_path / "other_run", f"transformer.folder={other}", *more)
    one_error_line(result, "transformer.folder", "export/transformer")


@pytest.mark.slow  # CI's slow lane: more training runs, processes or a server
def test_resume_and_seeds(tmp_path: Path) -> None:
    folder = tiny_bert(tmp_path / "bert")
    assert train.main(train_args(tmp_path / "r", folder, "trainer.max_epochs=2")) == 0
    assert train.main([*train_args(tmp_path / "r", folder, "trainer.max_epochs=3"), "--resume"]) == 0
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["test"]["f1"] >= 0
    args = train_args(tmp_path / "seeds", folder, "trainer.max_epochs=2")
    assert train.main([*args, "--seeds", "1,2"]) == 0
    assert all((tmp_path / "seeds" / f"seed{s}" / "metrics.json").is_file() for s in (1, 2))


@pytest.mark.slow  # CI's slow lane: processes
def test_a_hub_name_offline_is_one_line_before_any_training(tmp_path: Path) -> None:
    result = train_process(
        tmp_path / "run", "transformer.hub=bert-base-cased", env=offline(HF_HOME=str(tmp_path / "hf"))
    )
    one_error_line(result, "transformer.hub=bert-base-cased", "transformer.folder=PATH")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow  # CI's slow lane: two processes
def test_folder_and_hub_together_or_neither_is_a_config_error(tmp_path: Path) -> None:
    for extra in ([], ["transformer.folder=/nowhere", "transformer.hub=bert-base-cased"]):
        result = train_process(tmp_path / "run", *extra)
        one_error_line(result, "transformer.folder", "transformer.hub")


@pytest.mark.slow  # CI's slow lane: more training runs, processes or a server
def test_serve_answers_what_predict_gives(run: Path, tmp_path: Path) -> None:
    from tests.serve.test_server import ask, running

    with running(run / "export", tmp_path / "serve.err") as (_, port):
        status, answer = ask(port, TEXTS)
    assert status == 200
    expected = load_tagger(run / "export").predict(TEXTS)
    assert [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in answer["results"]] == [
        [(e.start, e.end, e.type) for e in entities] for entities in expected
    ]


@pytest.mark.slow  # CI's slow lane: more training runs, processes or a server
def test_document_context_trains_and_predicts(tmp_path: Path) -> None:
    folder = tiny_bert(tmp_path / "bert")
    args = train_args(tmp_path / "doc", folder, "transformer.context=document", "trainer.max_epochs=3")
    assert train.main(args) == 0
    entry = json.loads((tmp_path / "doc" / "export" / "tagger.json").read_text())["features"][-1]
    assert entry["context"] == "document"
    lines = load_tagger(tmp_path / "doc" / "export").predict(TEXTS)
    assert len(lines) == len(TEXTS) and lines[1] == []


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("transformer.window=0", "transformer.window"),
        *(
            pytest.param(override, needle, marks=pytest.mark.slow)
            for override, needle in (
                ("transformer.max_stream_positions=1", "transformer.max_stream_positions"),
                ("transformer.dropout=1.5", "transformer.dropout"),
                ("transformer.hub=../../etc", "transformer.hub"),
                ("transformer.pooling=last", "transformer.pooling"),
            )
        ),
    ],
)
def test_bad_transformer_values_are_one_line(tmp_path: Path, override: str, needle: str) -> None:
    folder = tiny_bert(tmp_path / "bert")
    extra = [] if override.startswith("transformer.hub") else [f"transformer.folder={folder}"]
    result = train_process(tmp_path / "run", *extra, override)
    one_error_line(result, needle)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_compare_groups_runs_by_the_encoders_files_not_its_path(run: Path, tmp_path: Path, capsys) -> None:
    """Two seeds whose configs name the same encoder under other folders are one recipe; another encoder's
    fingerprint under the same folder is another."""
    copies = []
    for seed, folder, fingerprint in ((7, "/a/bert", None), (8, "/b/bert", None), (9, "/a/bert", "ab" * 32)):
        copy = tmp_path / f"seed{seed}"
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("checkpoints", "export"))
        text = (copy / "config.yaml").read_text()
        text = re.sub(r"(?m)^seed: .*$", f"seed: {seed}", text)
        (copy / "config.yaml").write_text(re.sub(r"(?m)^  folder: .*$", f"  folder: {folder}", text))
        if fingerprint is not None:
            metrics = json.loads((copy / "metrics.json").read_text())
            metrics["transformer_fingerprint"] = fingerprint
            (copy / "metrics.json").write_text(json.dumps(metrics))
        copies.append(copy)
    assert main(["compare", *map(str, copies), "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["groups"]
    assert sorted(g["seeds"] for g in groups) == [[7, 8], [9]]
    recorded = json.loads((run / "metrics.json").read_text())["transformer_mix"][0]
    for group in groups:  # each group's transformer mix: its seeds' (all copies of one run here)
        assert group["elmo_mix"] == [] and [m["runs"] for m in group["transformer_mix"]] == [
            len(group["seeds"])
        ]
        means = [w["mean"] for w in group["transformer_mix"][0]["softmax_w"]]
        assert means == pytest.approx(recorded["softmax_w"], abs=1e-9)
    assert main(["compare", *map(str, copies)]) == 0
    table = capsys.readouterr().out
    assert "Learned transformer mix" in table and "Learned ELMo mix" not in table
    assert {g["config"]["transformer.encoder"][:12] for g in groups} == {"ab" * 6, run_fingerprint(run)[:12]}


def run_fingerprint(run: Path) -> str:
    return json.loads((run / "metrics.json").read_text())["transformer_fingerprint"]
