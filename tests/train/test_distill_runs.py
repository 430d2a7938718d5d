"""``distill`` end to end at tiny scale: exact teacher marginals on disk, an ensemble's mean, a resumed
labelling equal to one run, and a student that is an ordinary export."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import train
from ner_app.cli.main import main
from ner_app.predict.predictor import Predictor
from ner_app.predict.teachers import label_text, text_sentences
from ner_app.text.soft_labels import chunk_names, read_soft_labels

pytestmark = pytest.mark.system  # trains tiny runs

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny_conll"
STUDENT = [f"data.dir={TINY}", "elmo.enabled=false", "trainer.threads=1"]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny tagger without ELMo trained to F1 = 1.0 on the tiny data: the teacher."""
    run = tmp_path_factory.mktemp("teacher") / "run"
    args = ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={run}", *STUDENT]
    assert train.main(args) == 0
    return run / "export"


def test_stored_marginals_are_the_teachers_exact_ones_and_an_ensemble_their_mean(teacher, tmp_path):
    text = TINY / "train.txt"
    one = label_text([teacher], text, tmp_path / "one", chunk_sentences=2)
    twice = label_text([teacher, teacher], text, tmp_path / "twice", chunk_sentences=2)
    assert one.complete and one.sentences == len(list(text_sentences(text))) == 5
    for index in range(one.chunks):  # the mean of two equal teachers is that teacher, to the bit
        name = chunk_names(index)[0]
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "twice" / name).read_bytes()
    assert len(twice.teachers) == 2
    labels = read_soft_labels(tmp_path / "one")
    predictor = Predictor.from_export(teacher)
    exact = []
    for group, emissions, mask in predictor.emission_batches(labels.sentences):
        probs = predictor.tagger.crf.marginals(emissions, mask).double()  # the teacher's forward-backward
        exact += [(i, probs[row, : len(labels.sentences[i])]) for row, i in enumerate(group)]
    for i, probs in exact:
        np.testing.assert_array_equal(labels.rows(i), probs.numpy().astype(np.float16))


def test_a_stopped_labelling_resumes_to_the_same_files(teacher, tmp_path):
    text = TINY / "train.txt"
    label_text([teacher], text, tmp_path / "whole", chunk_sentences=2)
    label_text([teacher], text, tmp_path / "stopped", chunk_sentences=2)
    stopped = tmp_path / "stopped"
    for name in chunk_names(2):  # a run stopped after its second chunk: the third never written
        (stopped / name).unlink()
    manifest = json.loads((stopped / "teachers.json").read_text())
    earlier = 1000.0  # the stopped run's teachers' time, as its manifest keeps it after every chunk
    (stopped / "teachers.json").write_text(
        json.dumps(
            {**manifest, "complete": False, "chunks": 0, "sentences": 0, "tokens": 0, "seconds": earlier}
        )
    )
    resumed = label_text([teacher], text, stopped, chunk_sentences=2)
    assert resumed.complete and resumed.sentences == 5 and resumed.chunks == 3
    assert earlier < resumed.seconds < earlier + 60  # the resumed run's time added to the stopped one's
    for index in range(3):
        for name in chunk_names(index):
            assert (stopped / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    # complete: a third run reuses it without tagging
    again = label_text([teacher], text, stopped, chunk_sentences=2)
    assert again == resumed


def test_distill_trains_an_ordinary_calibrated_student(teacher, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    marginals, student = tmp_path / "marginals", tmp_path / "student"
    args = [
        "distill",
        "--config",
        "configs/distill_conll2003.yaml",
        "--teacher",
        str(teacher),
        "--teacher",
        str(teacher),
        "--unlabelled",
        str(TINY / "train.txt"),
        "--marginals",
        str(marginals),
        f"output_dir={student}",
        *STUDENT,
        "model.glove=null",
        "model.word_dim=8",
        "model.char_filters=8",
        "model.lstm_hidden=16",
        "model.lstm_layers=1",
        "model.dropout=0.0",
        "optim.lr=0.01",
        "data.batch_size=2",
        "trainer.max_epochs=40",
        "trainer.patience=40",
        "trainer.enable_progress_bar=false",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    tokens = sum(map(len, text_sentences(TINY / "train.txt")))
    assert f"teachers' marginals: 5 sentences, {tokens} tokens in {marginals} (2 teachers)" in out
    metrics = json.loads((student / "metrics.json").read_text())
    assert metrics["dev"]["f1"] == 100.0 and metrics["test"]["f1"] == 100.0
    spec = json.loads((student / "export" / "tagger.json").read_text())
    assert [f["name"] for f in spec["features"]] == ["words", "chars"]
    # an ordinary export: predict reads it
    assert (
        main(
            [
                "predict",
                "--model",
                str(student / "export"),
                "--input",
                str(TINY / "test.txt"),
                "--format",
                "conll",
                "--output",
                str(tmp_path / "p.conll"),
            ]
        )
        == 0
    )
    assert (tmp_path / "p.conll").is_file()
    # the same teachers and text again: the folder is reused, the student resumes nothing (it is done)
    shutil.rmtree(student)
    written = {p.name: p.stat().st_mtime_ns for p in marginals.iterdir()}
    assert main([*args, "trainer.max_epochs=1"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in marginals.iterdir()} == written
    assert f"teachers' marginals: 5 sentences, {tokens} tokens" in capsys.readouterr().out


@pytest.mark.parametrize("per_epoch", [None, 3])
def test_soft_labels_teach_types_the_gold_data_never_shows(teacher, tmp_path, monkeypatch, per_epoch):
    # one gold sentence (PER, LOC): ORG and MISC come from the teacher's marginals alone; with
    # distill.sentences_per_epoch=3 each epoch reads 2 of the 3 batches of the 5 labelled sentences, for 60
    # epochs instead of 40: the same soft batches in all
    monkeypatch.chdir(ROOT)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("valid", "test"):
        shutil.copy(TINY / f"{split}.txt", data)
    first = (TINY / "train.txt").read_text().split("\n\n")[:2]
    (data / "train.txt").write_text("\n\n".join(first) + "\n")
    label_text([teacher], TINY / "train.txt", tmp_path / "m", chunk_sentences=4)
    common = ["--config", str(ROOT / "configs/tiny.yaml"), *STUDENT, f"data.dir={data}"]
    kd_args = [f"output_dir={tmp_path / 'kd'}", f"distill.marginals={tmp_path / 'm'}"]
    if per_epoch is not None:
        kd_args += [
            f"distill.sentences_per_epoch={per_epoch}",
            "trainer.max_epochs=60",
            "trainer.patience=60",
        ]
    assert train.main([*common, *kd_args]) == 0
    kd = json.loads((tmp_path / "kd" / "metrics.json").read_text())
    assert set(kd["dev"]["per_type"]) == {"PER", "LOC", "ORG", "MISC"}
    assert kd["dev"]["f1"] == 100.0 and kd["test"]["f1"] == 100.0
    with open(tmp_path / "kd" / "logs" / "metrics.csv") as log:
        first_steps = sorted(
            {int(row["epoch"]): int(row["step"]) for row in reversed(list(csv.DictReader(log)))}.items()
        )
    assert first_steps[2][1] - first_steps[1][1] == 1 + (
        2 if per_epoch else 3
    )  # an epoch's gold and soft batches
    if per_epoch is not None:
        return
    # without the teacher the same gold data cannot train for this dev set at all
    assert train.main([*common, f"output_dir={tmp_path / 'gold'}"]) == 2


def test_an_onnx_teacher_gives_the_torch_teachers_marginals(teacher, tmp_path):
    onnx = tmp_path / "onnx"
    assert main(["export", "--onnx", "--model", str(teacher), "--output", str(onnx)]) == 0
    text = TINY / "train.txt"
    label_text([teacher], text, tmp_path / "torch", chunk_sentences=2)
    label_text([onnx], text, tmp_path / "onnx_marginals", chunk_sentences=2)
    a, b = read_soft_labels(tmp_path / "torch"), read_soft_labels(tmp_path / "onnx_marginals")
    assert a.sentences == b.sentences and a.tags == b.tags
    # the same CRF on emissions that onnxruntime sums in another order: equal to float16's rounding
    np.testing.assert_allclose(a.targets.astype(np.float32), b.targets.astype(np.float32), atol=2e-3, rtol=0)


def test_the_distillation_table_reads_seed_folders_and_times_teacher_and_student(teacher, tmp_path):
    run = teacher.parent  # a tiny run: metrics.json, logs/metrics.csv, export/
    for arm in ("gold", "student"):
        for seed in ("seed1", "seed2"):
            shutil.copytree(run, tmp_path / arm / seed, ignore=shutil.ignore_patterns("checkpoints"))
    out = tmp_path / "table" / "tiny"
    command = [
        sys.executable, "-m", "benchmarks.distillation", "--teacher", str(teacher), "--gold-runs",
        str(tmp_path / "gold"), "--student-runs", str(tmp_path / "student"), "--name", "tiny", "--dev",
        str(TINY / "valid.txt"), "--test", str(TINY / "test.txt"), "--rounds", "1", "--seeds", "seed2",
        "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.with_suffix(".json").read_text())
    assert [x["seed"] for x in record["gold"]] == [x["seed"] for x in record["student"]] == ["seed2"]
    with open(run / "logs" / "metrics.csv") as log:
        validated = sorted({int(r["epoch"]) for r in csv.DictReader(log) if r.get("val_f1")})
    assert (
        record["student"][0]["epochs"] == len(validated) - 1
    )  # the best one validated again is not an epoch
    assert record["teacher"]["test"] == record["student"][0]["test"] == 100.0
    # the gold arm's first run has an export: timed beside the student (here the same tagger)
    assert set(record["words_per_s"]) == {"teacher", "student", "fast tagger, gold alone"}
    assert min(record["words_per_s"].values()) > 0 and record["student_speed_ratio"] > 0
    assert "| student | 1 | 100.00 +/- 0.00 | 100.00 +/- 0.00 |" in out.with_suffix(".md").read_text()
