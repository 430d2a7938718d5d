"""Hostile and careless arguments to ``label-studio``: a model that is not an export, a work folder it did not
make or of another model, a missing training config, shares and label maps that cannot be, a port in use:
each one ``error:`` line (or argparse's) with exit code 2, nothing written and nothing left listening.
Hostile requests and Label Studio answers: tests/serve/label_studio/."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from tests.helpers import ROOT, one_error_line

CONFIG = str(ROOT / "configs" / "own_data_continue.yaml")


def run(*args: str) -> int:
    return main(["label-studio", "--config", CONFIG, *args])


def test_a_model_that_is_not_an_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--model", str(tmp_path), "--workdir", str(tmp_path / "w")) == 2
    one_error_line(capsys, f"--model {tmp_path}: not an export (expected a folder with tagger.json)")
    assert not (tmp_path / "w").exists()


def test_a_missing_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["label-studio", "--workdir", str(tmp_path / "w"), "--config", str(tmp_path / "no.yaml")]) == 2
    )
    one_error_line(capsys, f"--config {tmp_path / 'no.yaml'}: not found (a training config;")


@pytest.mark.parametrize("share", ["0", "1"])
def test_a_held_out_share_that_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], share: str
) -> None:
    assert run("--workdir", str(tmp_path / "w"), "--heldout", share) == 2
    one_error_line(capsys, f"--heldout {share}: expected a share between 0 and 1, e.g. 0.2")


@pytest.mark.parametrize("value", ["1.5", "-0.1", "x"])
def test_a_held_out_share_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run("--workdir", str(tmp_path / "w"), "--heldout", value)
    assert exit_.value.code == 2 and "argument --heldout" in capsys.readouterr().err


def test_labels_that_are_not_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--workdir", str(tmp_path / "w"), "--labels", "Person") == 2
    one_error_line(capsys, "--labels: expected OLD=NEW pairs separated by commas, found 'Person'")


def test_a_port_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run("--workdir", str(tmp_path / "w"), "--port", str(port)) == 2
    one_error_line(capsys, f"--port {port}: cannot listen on 127.0.0.1:{port}")
    assert not (tmp_path / "w").exists()


@pytest.mark.system
def test_work_folders_it_did_not_make(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert run("--workdir", str(mine)) == 2
    one_error_line(capsys, f"--workdir {mine}: a folder ner-app label-studio did not make (no state.json)")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    assert run("--workdir", str(tmp_path / "file")) == 2
    one_error_line(capsys, f"--workdir {tmp_path / 'file'}: not a folder")
    other = tmp_path / "other"
    other.mkdir()
    state = {"format": "ner_app.label_studio_backend/1", "project": None, "serving": 0}
    state["versions"] = [
        {
            "number": 0,
            "export": "/elsewhere/export",
            "model_version": "x-1",
            "heldout_f1": None,
            "trained_on": 0,
        }
    ]
    (other / "state.json").write_text(json.dumps(state))
    assert run("--workdir", str(other)) == 2
    one_error_line(capsys, f"--workdir {other}: holds the versions of /elsewhere/export, not of ")
    (other / "state.json").write_text('{"format": "something else"}')
    assert run("--workdir", str(other)) == 2
    one_error_line(
        capsys, f"{other / 'state.json'}: not a state file of ner-app label-studio; give another --workdir"
    )


@pytest.mark.system
@pytest.mark.parametrize(
    "versions",
    [
        [],
        "x",
        [{"number": 0}],
        [{"number": "0", "export": "e", "model_version": "m", "heldout_f1": None, "trained_on": 0}],
    ],
)
def test_a_damaged_state_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], versions: object) -> None:
    (tmp_path / "w").mkdir()
    state = {"format": "ner_app.label_studio_backend/1", "project": None, "serving": 0, "versions": versions}
    (tmp_path / "w" / "state.json").write_text(json.dumps(state))
    assert run("--workdir", str(tmp_path / "w")) == 2
    one_error_line(
        capsys,
        f"{tmp_path / 'w' / 'state.json'}: not a state file of ner-app label-studio (its versions are damaged)",
    )
