"""Hostile and careless input to distill: one ``error:`` line, exit code 2, nothing written or lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import train
from ner_app.cli.commands import main
from tests.helpers import ROOT, TINY, one_error_line, train_args

STUDENT = [f"data.dir={TINY}", "elmo.enabled=false", "trainer.max_epochs=1", "trainer.threads=1"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def distill(teachers: list[Path], text: Path, marginals: Path, out: Path, *extra: str) -> int:
    args = ["distill", "--config", str(ROOT / "configs/tiny.yaml")]
    for teacher in teachers:
        args += ["--teacher", str(teacher)]
    return main([*args, "--unlabelled", str(text), "--marginals", str(marginals), f"output_dir={out}",
                 *STUDENT, *extra])  # fmt: skip


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (None, "--unlabelled {text}: not a readable file"),
        (b"", "--unlabelled {text}: holds no sentence; expected text, or CoNLL token lines"),
        (b"\n\n  \n", "--unlabelled {text}: holds no sentence; expected text, or CoNLL token lines"),
        (b"Good text.\nbad \xff byte\n", "{text}:2: byte 5 (0xff) is not UTF-8"),
    ],
    ids=["missing", "empty", "blank", "not-utf8"],
)
def test_bad_unlabelled_text_is_one_line_and_writes_nothing(trained, tmp_path, capsys, write, message):
    text = tmp_path / "text.txt"
    if write is not None:
        text.write_bytes(write)
    assert distill([trained / "export"], text, tmp_path / "m", tmp_path / "out") == 2
    one_error_line(capsys, message.format(text=text))
    assert not (tmp_path / "m").exists() and not (tmp_path / "out").exists()


def test_a_marginals_path_that_is_not_this_commands_folder_is_refused(trained, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("Alice met Bob in Paris .\n")
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    assert distill([trained / "export"], text, a_file, tmp_path / "out") == 2
    one_error_line(capsys, f"--marginals {a_file}: exists and is not a folder; nothing was changed")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert distill([trained / "export"], text, other, tmp_path / "out") == 2
    one_error_line(
        capsys, f"--marginals {other}: holds other files and no teachers.json; nothing was changed"
    )
    assert snapshot(other) == {"notes.txt": b"mine"} and a_file.read_text() == "mine"


def test_marginals_of_other_text_are_never_mixed_in(trained, tmp_path, capsys):
    text, changed = tmp_path / "text.txt", tmp_path / "changed.txt"
    text.write_text("Alice met Bob in Paris .\n")
    changed.write_text("Carol visited Rome .\n")
    marginals = tmp_path / "m"
    assert distill([trained / "export"], text, marginals, tmp_path / "out", "--label-only") == 0
    before = snapshot(marginals)
    assert distill([trained / "export"], changed, marginals, tmp_path / "out", "--label-only") == 2
    one_error_line(
        capsys, f"--marginals {marginals}: holds the marginals of other teachers, text or chunk size"
    )
    assert snapshot(marginals) == before


def test_teachers_of_other_tags_make_no_ensemble(trained, tmp_path, capsys):
    persons = tmp_path / "persons"
    assert train.main(train_args(persons, "data.types=PER", "elmo.enabled=false")) == 0
    text = tmp_path / "text.txt"
    text.write_text("Alice met Bob in Paris .\n")
    assert distill([trained / "export", persons / "export"], text, tmp_path / "m", tmp_path / "out") == 2
    one_error_line(
        capsys, f"--teacher {persons / 'export'}: tags BIOES", "an ensemble's teachers share their tags"
    )
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["elmo.enabled=true"], "config key 'distill.marginals': a student reads words and chars only"),
        (["distill.weight=-1"], "'distill.weight' must be a finite number in [0.0, inf), found -1.0"),
        (["--parallel", "2"], "--parallel N goes with --seeds"),
        (
            ["distill.sentences_per_epoch=0"],
            "'distill.sentences_per_epoch' is 0, expected an integer in [1, ",
        ),
    ],
)
def test_a_student_that_cannot_be_distilled_is_refused_before_the_teachers_run(
    trained, tmp_path, capsys, extra, message
):
    text = tmp_path / "text.txt"
    text.write_text("Alice met Bob in Paris .\n")
    assert distill([trained / "export"], text, tmp_path / "m", tmp_path / "out", *extra) == 2
    one_error_line(capsys, message)
    assert not (tmp_path / "m").exists()


def test_an_incomplete_folder_named_in_a_config_says_how_to_finish_it(trained, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("Alice met Bob in Paris .\nCarol visited Rome .\n")
    marginals = tmp_path / "m"
    assert distill([trained / "export"], text, marginals, tmp_path / "out", "--label-only") == 0
    manifest = json.loads((marginals / "teachers.json").read_text())
    (marginals / "teachers.json").write_text(json.dumps({**manifest, "complete": False}))
    args = train_args(tmp_path / "run", "elmo.enabled=false", f"distill.marginals={marginals}")
    assert train.main(args) == 2
    one_error_line(
        capsys, f"{marginals}: incomplete (1 chunks written); run ner-app distill again to finish it"
    )
