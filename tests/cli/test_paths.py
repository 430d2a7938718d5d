"""One rule for relative paths (docs/configuration.md): written in a config file, against its project root (the
nearest folder above the config file with a pyproject.toml, else the config file's folder), from any working
directory; typed on the command line (an override, --init-from), against the working directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ner_app.cli.commands import main
from ner_app.config.load import BilmPretrainConfig, load_config, project_root

ROOT = Path(__file__).resolve().parents[2]


def test_project_root_is_the_nearest_pyproject_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert project_root(ROOT / "configs" / "tiny.yaml") == ROOT
    (tmp_path / "proj" / "configs" / "deep").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    config = tmp_path / "proj" / "configs" / "deep" / "x.yaml"
    config.write_text("data:\n  train: corpus/a.txt\n  heldout: [/abs/h.txt, h2.txt]\noutput_dir: ~/runs/x\n")
    cfg = load_config(config, ["data.vocab_size=10"], schema=BilmPretrainConfig)
    assert cfg.data.train == str(tmp_path / "proj" / "corpus" / "a.txt")
    assert cfg.data.heldout == ["/abs/h.txt", str(tmp_path / "proj" / "h2.txt")]  # absolute ones stay
    assert cfg.output_dir == str(Path.home() / "runs" / "x")
    # without a pyproject.toml above it, the config file's own folder is the root
    lone = tmp_path / "lone" / "y.yaml"
    lone.parent.mkdir()
    lone.write_text("data:\n  dir: conll\nmodel:\n  glove: package\nelmo:\n  cache_dir: null\n")
    monkeypatch.chdir(lone.parent)  # the override ../o.json is typed: from the working directory
    cfg = load_config(lone, ["elmo.options=../o.json"])
    assert cfg.data.dir == str(tmp_path / "lone" / "conll") and cfg.elmo.options == str(tmp_path / "o.json")
    assert cfg.model.glove == "package" and cfg.elmo.cache_dir is None  # a name and a null are not paths


@pytest.mark.system
@pytest.mark.slow
def test_tiny_config_trains_from_another_directory(tmp_path: Path) -> None:
    """A copy of the project's files, trained from an unrelated cwd with relative paths in the file (read from
    the project) and in an override (output_dir: the run lands in the working directory), the layer cache in the
    user's cache folder ($XDG_CACHE_HOME/ner_app/elmo), never beside the data."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "configs").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "pyproject.toml").write_text("")
    shutil.copy(ROOT / "configs" / "tiny.yaml", project / "configs" / "tiny.yaml")
    # the file's paths are the project's; output_dir=runs/moved, typed, is the working directory's
    for name in ("tiny_conll", "tiny_bilm"):
        shutil.copytree(ROOT / "tests" / "data" / name, project / "tests" / "data" / name)
    command = [
        sys.executable,
        "-m",
        "ner_app",
        "train",
        "--config",
        str(project / "configs" / "tiny.yaml"),
        "output_dir=runs/moved",
        "trainer.max_epochs=1",
        "trainer.threads=1",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    result = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    run = elsewhere / "runs" / "moved"
    assert (run / "metrics.json").is_file() and str(run / "metrics.json") in result.stdout
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["data"]["dir"] == str(project / "tests" / "data" / "tiny_conll")
    assert saved["elmo"]["weights"] == str(project / "tests" / "data" / "tiny_bilm" / "weights.hdf5")
    assert saved["elmo"]["cache_dir"] == str(tmp_path / "xdg" / "ner_app" / "elmo")
    assert (tmp_path / "xdg" / "ner_app" / "elmo").is_dir() and not (project / "cache").exists()
    assert [p.name for p in elsewhere.iterdir()] == ["runs"]  # the run, and nothing else
    assert not (project / "runs").exists()


def test_a_missing_file_is_named_by_its_resolved_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "train",
            "--config",
            str(ROOT / "configs" / "tiny.yaml"),
            f"output_dir={tmp_path / 'run'}",
            "elmo.options=no/such/options.json",
        ]
    )
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1
    # typed: from the working directory
    assert err[0].startswith(
        f"error: elmo.options: {tmp_path / 'no' / 'such' / 'options.json'} does not exist ("
    )


def test_a_config_outside_the_repository_finds_the_shipped_bilm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative elmo.options/weights: under the config's project root first, then the ner_app repository's
    shipped data/bilm; a file beside the config wins, and a path found nowhere stays under the config's root."""
    from ner_app.config.load import REPOSITORY
    from ner_app.train.early_checks import check_elmo_files

    assert REPOSITORY == ROOT and (ROOT / "data" / "bilm" / "weights.hdf5").is_file()
    lone = tmp_path / "mine" / "config.yaml"
    lone.parent.mkdir()
    lone.write_text("data:\n  dir: conll\n")  # the defaults: elmo.options data/bilm/options.json
    cfg = load_config(lone)
    assert cfg.elmo.options == str(ROOT / "data" / "bilm" / "options.json")
    assert cfg.elmo.weights == str(ROOT / "data" / "bilm" / "weights.hdf5")
    assert cfg.data.dir == str(tmp_path / "mine" / "conll")  # other keys keep the config's root
    assert cfg.elmo.cache_dir is None or not cfg.elmo.cache_dir.startswith(str(ROOT))
    check_elmo_files(cfg.elmo)  # train's first check passes
    # the user's own biLM beside the config comes first
    own = tmp_path / "mine" / "data" / "bilm"
    own.mkdir(parents=True)
    (own / "options.json").write_text("{}")
    assert load_config(lone).elmo.options == str(own / "options.json")
    assert load_config(lone).elmo.weights == str(ROOT / "data" / "bilm" / "weights.hdf5")
    # a name found nowhere is not guessed: it stays where it was looked for (typed: the working directory), and
    # the error shows the way out
    monkeypatch.chdir(lone.parent)
    cfg = load_config(lone, ["elmo.weights=data/bilm/weigths.hdf5"])
    assert cfg.elmo.weights == str(own / "weigths.hdf5")
    with pytest.raises(Exception, match="the shipped biLM is .*data/bilm") as caught:
        check_elmo_files(cfg.elmo)
    assert str(own / "weigths.hdf5") in str(caught.value)
    # only the biLM's keys fall back: data.dir never does, even where the repository has that folder
    (tmp_path / "mine" / "x.yaml").write_text("data:\n  dir: tests/data/tiny_conll\n")
    assert load_config(tmp_path / "mine" / "x.yaml").data.dir == str(
        tmp_path / "mine" / "tests/data/tiny_conll"
    )


@pytest.mark.system
def test_the_own_data_template_copied_beside_ones_data_trains_with_the_shipped_bilm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hour: configs/own_data.yaml copied into a folder of one's own (no pyproject.toml above it),
    the data beside it, trained from there. The shipped biLM is found, and the layer cache goes to the user's
    cache folder: the user's folder ends with the config, the data and the run, nothing else."""
    from tests.train.test_annotation_data import write_doccano

    mine = tmp_path / "work"
    mine.mkdir()
    write_doccano(mine / "mine")
    shutil.copy(ROOT / "configs" / "own_data.yaml", mine / "config.yaml")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(mine)
    small = ["model.glove=null", "model.lstm_hidden=8", "trainer.max_epochs=1", "trainer.threads=1"]
    assert main(["train", "--config", "config.yaml", *small, "trainer.enable_progress_bar=false"]) == 0
    saved = yaml.safe_load((mine / "runs" / "own_data" / "config.yaml").read_text())
    assert saved["elmo"]["options"] == str(ROOT / "data" / "bilm" / "options.json")
    assert saved["elmo"]["cache_dir"] == str(tmp_path / "xdg" / "ner_app" / "elmo")
    assert (tmp_path / "xdg" / "ner_app" / "elmo").is_dir()
    assert sorted(p.name for p in mine.iterdir()) == ["config.yaml", "mine", "runs"]


def test_typed_paths_are_the_working_directorys_and_written_ones_the_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run from one's own folder with the repository's config: a section override (data={dir: mine}),
    output_dir=runs/x and elmo.cache_dir=c are under the working directory, --init-from data/models/conll2003 (not there) is the shipped
    tagger, and the config file's own paths stay the repository's."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.chdir(user)
    typed = [
        "data={dir: mine}",
        "output_dir=runs/x",
        "model.init_from=data/models/conll2003",
        "elmo.cache_dir=c",
    ]
    cfg = load_config(ROOT / "configs" / "tiny.yaml", typed)
    assert (cfg.data.dir, cfg.output_dir, cfg.elmo.cache_dir) == (
        str(user / "mine"),
        str(user / "runs" / "x"),
        str(user / "c"),
    )
    assert cfg.model.init_from == str(ROOT / "data" / "models" / "conll2003")  # the shipped one
    assert cfg.elmo.options == str(
        ROOT / "tests" / "data" / "tiny_bilm" / "options.json"
    )  # written: the project's
    # a folder of one's own by the shipped tagger's name comes first
    (user / "data" / "models" / "conll2003").mkdir(parents=True)
    own = load_config(
        ROOT / "configs" / "tiny.yaml", ["model.init_from=data/models/conll2003"]
    ).model.init_from
    assert own == str(user / "data" / "models" / "conll2003")
    # the command line: train's --init-from and data.dir=... name the working directory's folders
    shutil.copytree(ROOT / "tests" / "data" / "tiny_conll", user / "mine")
    code = main(
        ["train", "--config", str(ROOT / "configs" / "tiny.yaml"), "data.dir=mine", "--init-from", "nope"]
    )
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: model.init_from: {user / 'nope'}"), err
