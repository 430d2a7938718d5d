"""Hostile and careless input to train.py / pretrain-bilm input: configs, data files, run folders, checkpoints, a full disk: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
import torch

import train
from ner_app.cli.commands import main
from ner_app.config.load import ConfigError, load_config
from ner_app.runtime.run_dir import locked_run_folder
from ner_app.text.conll import ConllFormatError, read_conll
from tests.helpers import (
    ROOT,
    TINY,
    TINY_BILM,
    one_error_line,
    run_with_file_limit,
    train_args,
)


class Payload:
    """Unpickling this creates a file: proof that code from a checkpoint ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("command", ["train", "pretrain", "export"])
def test_crafted_checkpoint_never_runs(tmp_path, trained, monkeypatch, capsys, command):
    monkeypatch.setenv(
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1"
    )  # the common workaround must not open the door
    marker = tmp_path / "pwned"
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    crafted = run / "checkpoints" / "last.ckpt"
    good = torch.load(crafted, weights_only=True)
    torch.save({**good, "payload": Payload(marker)}, crafted)
    if command == "train":
        code = train.main([*train_args(run), "--resume"])
    elif command == "pretrain":
        config = ROOT / "configs" / "bilm_tiny.yaml"
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("a b c d e f g h\n" * 40)
        code = main(
            [
                "pretrain-bilm",
                "--config",
                str(config),
                "--resume",
                f"output_dir={run}",
                f"data.train={corpus}",
                "data.heldout=[]",
            ]
        )
    else:
        code = main(["export", "--checkpoint", str(crafted), "--output", str(tmp_path / "out")])
    assert code == 2
    assert not marker.exists()
    one_error_line(capsys, str(crafted), "never unpickled")


def test_truncated_checkpoint_is_one_line(tmp_path, trained, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    assert train.main([*train_args(run), "--resume"]) == 2
    one_error_line(capsys, str(last), "not a readable checkpoint")


def test_fresh_run_into_a_used_folder_is_refused(tmp_path, trained, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert train.main(train_args(run)) == 2
    one_error_line(capsys, "is not empty", "--resume")
    assert not (run / "checkpoints" / "last-v1.ckpt").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("my notes")
    assert train.main(train_args(other)) == 2
    one_error_line(capsys, "notes.txt")


def test_resume_under_another_config_or_data_is_refused(tmp_path, trained, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert train.main([*train_args(run, "model.lstm_hidden=8"), "--resume"]) == 2
    one_error_line(capsys, "another config", "model.lstm_hidden: 16 -> 8")
    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    with open(data / "train.txt", "a") as f:
        f.write("\nExtra O\n")
    assert train.main([*train_args(run, f"data.dir={data}"), "--resume"]) == 2
    one_error_line(capsys, "another config", "data.dir")  # the same folder with other bytes: the next test


def test_a_key_added_after_the_checkpoint_resumes_only_at_its_default(tmp_path):
    """A checkpoint written before a config key existed is the same run while the key keeps its default
    (what the older program did), and another run once the key is set to something else."""
    from ner_app.config.load import TrainConfig, config_to_dict
    from ner_app.runtime.run_dir import IDENTITY_KEY, RunFolderError, check_identity, run_identity

    defaults = config_to_dict(TrainConfig())
    identity = run_identity(config_to_dict(TrainConfig()), "data", defaults)
    older = {"config": dict(identity["config"]), "data": "data"}
    del older["config"]["elmo.context"]  # as written before document context existed
    path = tmp_path / "last.ckpt"
    check_identity({IDENTITY_KEY: older}, identity, path)
    changed = TrainConfig()
    changed.elmo.context = "document"
    with pytest.raises(RunFolderError, match=r"another config \(elmo.context: None -> 'document'\)"):
        check_identity({IDENTITY_KEY: older}, run_identity(config_to_dict(changed), "data", defaults), path)


@pytest.mark.system
def test_resume_on_changed_data_files_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    run = tmp_path / "run"
    assert train.main(train_args(run, f"data.dir={data}", "trainer.max_epochs=1")) == 0
    capsys.readouterr()
    with open(data / "train.txt", "a") as f:
        f.write("\nExtra O\n")
    assert train.main([*train_args(run, f"data.dir={data}"), "--resume"]) == 2
    one_error_line(capsys, "other data")


def test_second_run_in_a_locked_folder_stops(tmp_path, capsys):
    run = tmp_path / "run"
    with locked_run_folder(run):  # a real flock on run/.lock, as a running train.py holds it
        assert train.main(train_args(run)) == 2
    one_error_line(capsys, "another run is using this output_dir")
    assert not (run / "metrics.json").exists()


def test_infinite_learning_rate_is_a_config_error(tmp_path, capsys):
    assert train.main(train_args(tmp_path / "run", "optim.lr=.inf")) == 2
    one_error_line(capsys, "optim.lr", "finite")


def test_diverging_training_stops_at_the_first_non_finite_step(tmp_path, capsys):
    assert train.main(train_args(tmp_path / "run", "optim.lr=1e38", "optim.grad_clip=0")) == 2
    one_error_line(capsys, "training stopped at step")
    assert not (tmp_path / "run" / "export").exists()


def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join([*lines, "seed: *a8"]) + "\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="expands to .* more than"):
        load_config(tmp_path / "bomb.yaml")
    # Under the node bound, a nested value in a type error is quoted shortly, not expanded.
    nested = (
        "[&c [&b [&a [x, x, x, x, x, x, x, x], *a, *a, *a, *a, *a, *a, *a], *b, *b, *b, *b, *b], *c, *c, *c]"
    )
    (tmp_path / "small.yaml").write_text(f"seed: {nested}\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "small.yaml")
    assert "key 'seed': expected int" in str(err.value) and len(str(err.value)) < 300
    assert time.perf_counter() - start < 5


def test_duplicate_yaml_keys_are_refused(tmp_path, capsys):
    (tmp_path / "dup.yaml").write_text("seed: 1\ntrainer:\n  max_epochs: 3\n  max_epochs: 4\n")
    assert train.main(["--config", str(tmp_path / "dup.yaml")]) == 2
    one_error_line(capsys, "dup.yaml:4", "duplicate key 'max_epochs'")


def test_binary_or_folder_config_is_one_line(tmp_path, capsys):
    (tmp_path / "bin.yaml").write_bytes(b"seed: 1\n\xff\xfe\x00")
    assert train.main(["--config", str(tmp_path / "bin.yaml")]) == 2
    one_error_line(capsys, "bin.yaml", "not a UTF-8")
    assert train.main(["--config", str(tmp_path)]) == 2
    one_error_line(capsys, "is a folder")
    (tmp_path / "bom.yaml").write_bytes("\ufeffseed: 3\n".encode())
    assert load_config(tmp_path / "bom.yaml").seed == 3


def test_bom_before_docstart_is_not_a_sentence(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeff-DOCSTART- -X- O O\n\nEU B-ORG\nrejects O\n".encode())
    sentences = read_conll(path)
    assert [s.tokens for s in sentences] == [["EU", "rejects"]]


@pytest.mark.parametrize(
    "override",
    [
        "data.max_sentences=-1",
        "trainer.patience=-1",
        "trainer.max_epochs=0",
        "optim.grad_clip=-1",
        "data.batch_size=0",
        "model.dropout=1.5",
        "seed=18446744073709551616",
        "seed=-1",
        "data.case_augment=1.5",
        "data.case_augment=-0.1",
        "data.case_augment=.nan",
        "data.case_augment=.inf",
    ],
)
def test_out_of_range_values_name_the_key(tmp_path, capsys, override):
    assert train.main(train_args(tmp_path / "run", override)) == 2
    one_error_line(capsys, f"'{override.split('=')[0]}'")
    assert not (tmp_path / "run").exists()


def test_checkpoint_folder_given_as_file_is_one_line(tmp_path, capsys):
    assert main(["export", "--checkpoint", str(tmp_path), "--output", str(tmp_path / "out")]) == 2
    one_error_line(capsys, "is a folder")


def test_cr_only_line_endings_are_named(tmp_path: Path) -> None:
    path = tmp_path / "mac.txt"
    path.write_bytes(b"EU I-ORG\rrejects O\r\rGerman I-MISC\r")
    with pytest.raises(ConllFormatError, match="lines end with CR alone"):
        read_conll(path)


def test_output_dir_naming_a_file_is_one_line_and_the_file_stays(tmp_path: Path, capsys) -> None:
    target = tmp_path / "results.txt"
    target.write_text("a user's file")
    args = ["--config", str(ROOT / "configs/tiny.yaml"), f"output_dir={target}", "trainer.max_epochs=1"]
    assert train.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: output_dir {target} is a file, expected a folder"
    assert target.read_text() == "a user's file"


def test_training_onto_a_full_disk_leaves_no_truncated_checkpoint(small_disk: Path, capsys):
    """The disk fills while checkpoints and the export are written: one line, and every checkpoint left under
    its name is whole (each was fsynced beside its name and renamed only once complete)."""
    run = small_disk / "run"
    args = [
        "--config",
        str(ROOT / "configs/tiny.yaml"),
        f"output_dir={run}",
        "elmo.cache_dir=null",
        f"data.dir={ROOT / 'tests/data/tiny_conll'}",
        f"elmo.options={TINY_BILM / 'options.json'}",
        f"elmo.weights={TINY_BILM / 'weights.hdf5'}",
        "trainer.max_epochs=3",
        "trainer.threads=1",
    ]
    assert train.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "cannot write" in err[-1] and str(small_disk) in err[-1]
    left = sorted((run / "checkpoints").glob("*")) if (run / "checkpoints").is_dir() else []
    assert not [p for p in left if p.name.endswith(".tmp")]
    for path in left:
        torch.load(path, weights_only=True)  # whole, or absent


@pytest.mark.system
@pytest.mark.slow
def test_cache_fill_on_a_full_disk_is_one_line(tmp_path):
    conll = tmp_path / "data"
    conll.mkdir()
    for split in ("train", "valid", "test"):  # distinct sentences: the cache stores each once, ~130 kB in all
        sentences = ["".join(f"{split}{k}w{i} O\n" for i in range(30)) for k in range(20)]
        (conll / f"{split}.txt").write_text("EU B-ORG\n\n" + "\n".join(sentences))
    args = train_args(tmp_path / "run", f"data.dir={conll}", f"elmo.cache_dir={tmp_path / 'cache'}")
    result = run_with_file_limit(20000, "train", *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "cannot write the ELMo layer cache" in result.stderr.strip().splitlines()[-1]


def test_a_base_that_is_not_a_config_is_one_line(tmp_path, capsys, unblock):
    """``base: ../../etc/passwd`` (a text file that is no YAML mapping), an empty file, a folder, a FIFO and a
    character device are each named for what they are; none is taken as an empty config."""
    (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/bin/sh\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    devices = tmp_path / "dev"
    devices.mkdir()
    os.mknod(devices / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers, made here
    cases = {
        "passwd": "is not a config (expected a YAML mapping of keys, found a str)",
        "empty.yaml": "is not a config (expected a YAML mapping of keys, found nothing)",
        "folder": "is a folder, expected a YAML config file",
        "fifo": "is a FIFO, expected a YAML config file",
        "dev/zero": "is a character device, expected a YAML config file",
    }
    for base, message in cases.items():
        config = tmp_path / "run.yaml"
        config.write_text(f"base: {base}\nseed: 3\n")
        with pytest.raises(ConfigError) as refused:
            load_config(config)
        assert f"run.yaml: key 'base': {tmp_path / base} {message}" in str(refused.value)
    unblock(tmp_path / "fifo", 60)  # a read of the FIFO would fail the test after a minute, not hang it
    assert train.main(["--config", str(tmp_path / "fifo")]) == 2  # the config itself: named, never read
    one_error_line(capsys, "fifo: is a FIFO, expected a YAML config file")


def test_a_file_where_the_tensorboard_logs_go_is_one_line(tmp_path, capsys):
    (tmp_path / "run" / "logs").mkdir(parents=True)
    (tmp_path / "run" / "logs" / "tensorboard").write_text("my notes\n")
    assert train.main(train_args(tmp_path / "run", "trainer.logger=tensorboard")) == 2
    one_error_line(
        capsys, "logs/tensorboard: is a file, expected the folder where the run writes its tensorboard"
    )
    assert (tmp_path / "run" / "logs" / "tensorboard").read_text() == "my notes\n"


def test_a_full_disk_at_report_time_is_one_warning_line(trained, small_disk, caplog, capsys):
    """train.py draws report.html last; on a full disk (a real tmpfs, filled) that step warns in one line
    without a traceback (the run's results are on disk), and ``report`` itself is one error line, exit 2."""
    import logging

    from ner_app.report.run_report import report_after_training

    run = small_disk / "run"
    run.mkdir()
    for entry in trained.iterdir():  # the run's files stay where they are: only report.html goes on the disk
        if entry.name != "report.html":
            (run / entry.name).symlink_to(entry)
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):  # until ENOSPC: the disk is full
            pass
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)
    with caplog.at_level(logging.WARNING, logger="ner_app"):
        assert report_after_training(run) is None
    [record] = [r for r in caplog.records if "report.html not written" in r.getMessage()]
    assert not record.exc_info and "No space left on device" in record.getMessage()  # no traceback
    assert main(["report", str(run)]) == 2
    one_error_line(capsys, "report.html: cannot write (No space left on device)")
    assert sorted(p.name for p in run.iterdir() if not p.is_symlink()) == []


@pytest.mark.parametrize("value", ["abc", "[0.5]", "true", "{a: 1}"])
def test_case_augment_of_another_type_is_one_line(tmp_path, capsys, value):
    assert train.main(train_args(tmp_path / "run", f"data.case_augment={value}")) == 2
    one_error_line(capsys, "data.case_augment")
    assert not (tmp_path / "run").exists()


@pytest.mark.system
def test_case_augment_in_document_context_is_refused_in_one_line(tmp_path, capsys):
    args = train_args(tmp_path / "run", "data.case_augment=0.2", "elmo.context=document")
    assert train.main(args) == 2
    one_error_line(capsys, "'data.case_augment'", "elmo.context=sentence")
    assert not (tmp_path / "run").exists()
    # without ELMo there are no document streams: the same share trains
    assert (
        train.main(
            train_args(
                tmp_path / "ok",
                "data.case_augment=0.2",
                "elmo.context=document",
                "elmo.enabled=false",
                "trainer.max_epochs=1",
            )
        )
        == 0
    )


def test_a_refused_run_leaves_nothing_in_the_folder_it_was_given(tmp_path, capsys):
    run = tmp_path / "mine"
    run.mkdir()
    (run / "notes.txt").write_text("the user's own file\n")
    assert train.main(train_args(run)) == 2
    one_error_line(capsys, f"output_dir {run} is not empty (it holds notes.txt)")
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]  # no .lock left behind
    fresh = tmp_path / "fresh"
    assert train.main([*train_args(fresh), "--resume"]) == 2  # refused before it made anything
    one_error_line(capsys, "--resume: no checkpoint")
    assert not fresh.exists()


def test_resume_with_fewer_epochs_than_trained_is_one_line(tmp_path, trained, capsys):
    """``trainer.max_epochs`` below the epochs the checkpoint has trained: one line before anything is built
    (Lightning would stop with a traceback, or end at once as if the run were done)."""
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = (run / "metrics.json").read_bytes()
    assert train.main([*train_args(run, "trainer.max_epochs=1"), "--resume"]) == 2
    one_error_line(
        capsys, f"trainer.max_epochs is 1, but {run}/checkpoints/last.ckpt has trained 2 epochs", "at least 2"
    )
    assert (run / "metrics.json").read_bytes() == before
