"""One CLI policy for every command: bad input is one ``error:`` line and exit code 2; a bug keeps its traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from ner_app.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def bad_inputs(tmp: Path) -> dict[str, list[str]]:
    missing = str(tmp / "missing")
    (tmp / "bad.json").write_text("{not json")
    return {
        "train": ["train", "--config", str(ROOT / "configs/tiny.yaml"), "trainer.devices=two"],
        "embed": [
            "embed",
            "--options",
            missing,
            "--weights",
            missing,
            "--input",
            missing,
            "--output",
            missing,
        ],
        "export": ["export", "--checkpoint", str(tmp / "bad.json"), "--output", str(tmp / "out")],
        "predict": ["predict", "--model", missing, "--input", "-"],
        "pretrain-bilm": [
            "pretrain-bilm",
            "--config",
            str(ROOT / "configs/bilm_tiny.yaml"),
            "train.strategy=1",
        ],
        "convert": [
            "convert",
            str(tmp / "bad.json"),
            "--from",
            "labelstudio",
            "--output",
            str(tmp / "o.txt"),
        ],
    }


@pytest.mark.system
@pytest.mark.parametrize("command", ["train", "embed", "export", "predict", "pretrain-bilm", "convert"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ner_app", *bad_inputs(tmp_path)[command]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        input="",
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr


def test_train_py_and_python_m_ner_app_train_share_the_policy(tmp_path: Path, capsys) -> None:
    args = ["--config", str(ROOT / "configs/tiny.yaml"), "trainer.strategy=[1]"]
    assert train.main(args) == 2 and main(["train", *args]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0] == err[1] and "trainer.strategy" in err[0]


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import ner_app.train.run as run

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(run, "run_training", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        main(["train", "--config", str(ROOT / "configs/tiny.yaml")])


@pytest.mark.system
@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU this runs the whole check")
def test_gpu_check_without_cuda_says_so_and_exits_0() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0 and "no CUDA device" in result.stdout


@pytest.mark.system
def test_gpu_speed_without_cuda_says_so_and_exits_0() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_speed", "model.glove=PATH"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0 and "no CUDA device" in result.stdout


def test_every_command_of_the_parser_has_a_handler():
    """The argparse tree (cli/parser.py) is the registry's (cli/registry.py): the same commands in the same
    order, each module with its parser and its handler."""
    import argparse

    from ner_app.cli.parser import build_parser
    from ner_app.cli.registry import COMMANDS, command_module, command_names

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == command_names() == [name for name, _ in COMMANDS]
    assert len(set(command_names())) == len(COMMANDS)
    for name in command_names():
        module = command_module(name)
        assert callable(module.add_parser) and callable(module.run), name


def test_owned_defaults_resolve_to_their_owners_and_cost_nothing_to_parse() -> None:
    """The parser names the defaults of predict, evaluate, embed and serve by owner: parsing a command line
    imports neither torch nor litserve, and each default reads as the owner's value."""
    import subprocess
    import sys

    from ner_app.bilm.document import MAX_POSITIONS
    from ner_app.bilm.embed import EMBED_BATCH_SIZE, EMBED_MAX_TOKENS
    from ner_app.cli.arguments import OwnedNamespace
    from ner_app.cli.parser import build_parser
    from ner_app.predict.predictor import PREDICT_MAX_TOKENS
    from ner_app.server.server import ServeSpec
    from ner_app.text.batching import PREDICT_BATCH_SIZE

    code = (
        "import sys; from ner_app.cli.arguments import OwnedNamespace; from ner_app.cli.parser import build_parser; "
        "build_parser().parse_args(['serve'], namespace=OwnedNamespace()); "
        "print('torch' in sys.modules, 'litserve' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
    parser = build_parser()
    serve = parser.parse_args(["serve"], namespace=OwnedNamespace())
    spec = ServeSpec(model=None)
    for key in ("host", "port", "batch_size", "max_batch_size", "batch_timeout"):
        assert getattr(serve, key) == getattr(spec, key), key
    predict = parser.parse_args(["predict", "--input", "-"], namespace=OwnedNamespace())
    assert (predict.batch_size, predict.max_tokens) == (PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS) == (64, 16384)
    embed = parser.parse_args(["embed", "--input", "a", "--output", "b"], namespace=OwnedNamespace())
    assert (embed.batch_size, embed.max_tokens, embed.max_stream_positions) == (
        EMBED_BATCH_SIZE,
        EMBED_MAX_TOKENS,
        MAX_POSITIONS,
    )
    assert parser.parse_args(["serve", "--port", "9000"], namespace=OwnedNamespace()).port == 9000


def test_serve_limits_are_options_with_the_specs_defaults() -> None:
    from ner_app.cli.arguments import OwnedNamespace
    from ner_app.cli.parser import build_parser
    from ner_app.server.server import ServeSpec

    parse = build_parser().parse_args
    given = parse(["serve", "--header-timeout", "3", "--body-timeout", "4.5", "--max-connections", "9"])
    assert (given.header_timeout, given.body_timeout, given.max_connections) == (3.0, 4.5, 9)
    default = parse(["serve"], namespace=OwnedNamespace())
    spec = ServeSpec(model=None)
    assert (default.header_timeout, default.body_timeout, default.max_connections) == (
        spec.header_timeout,
        spec.body_timeout,
        spec.max_connections,
    )
