"""Hostile and careless input to exports: tampered, truncated or half-written ones, and a full disk: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ner_app.cli.commands import main
from ner_app.errors import NerAppError
from ner_app.limits import LimitError
from ner_app.tagger.export import load_export
from tests.helpers import (
    TINY,
    copy_export,
    one_error_line,
    rewrite_spec,
    run_with_file_limit,
)


def test_swapped_tags_or_words_are_refused(tmp_path, trained):
    export = copy_export(trained, tmp_path)
    tags = json.loads((export / "tagger.json").read_text())["vocab"]["tags"]["tokens"]
    assert len(tags) > 2

    def swap(spec):  # noqa: ANN001, ANN202
        t = spec["vocab"]["tags"]["tokens"]
        t[0], t[1] = t[1], t[0]

    rewrite_spec(export, swap, recompute=False)
    with pytest.raises(NerAppError, match="changed after export"):
        load_export(export)


def test_flipped_byte_in_weights_is_refused(tmp_path, trained):
    export = copy_export(trained, tmp_path)
    data = bytearray((export / "model.safetensors").read_bytes())
    data[-5] ^= 0x01
    (export / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(NerAppError, match="checksum differs"):
        load_export(export)


@pytest.mark.parametrize("damage", ["int", "nan", "shape"])
def test_wrong_tensors_are_refused_even_with_recomputed_checksums(tmp_path, trained, damage):
    export = copy_export(trained, tmp_path)
    state = load_file(str(export / "model.safetensors"))
    name = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 2)
    if damage == "int":
        state[name] = state[name].to(torch.int32)
    elif damage == "nan":
        state[name] = state[name].clone()
        state[name][0, 0] = float("nan")
    else:
        state[name] = state[name][:, :-1].contiguous()
    save_file(state, str(export / "model.safetensors"))
    rewrite_spec(export, lambda spec: None, recompute=True)
    expected = {"int": "torch.int32", "nan": "NaN", "shape": "expected torch.float32"}[damage]
    with pytest.raises(NerAppError, match=expected):
        load_export(export)


def test_absurd_tagger_sizes_are_refused(tmp_path, trained):
    export = copy_export(trained, tmp_path)
    rewrite_spec(export, lambda spec: spec["model"].update(lstm_hidden=10**9), recompute=True)
    with pytest.raises(LimitError, match="'model.lstm_hidden' is 1000000000"):
        load_export(export)


def test_truncated_export_files_are_one_line(tmp_path, trained, capsys):
    export = copy_export(trained, tmp_path)
    (export / "model.safetensors").write_bytes((export / "model.safetensors").read_bytes()[:64])
    assert main(["predict", "--model", str(export), "--input", str(TINY / "valid.txt")]) == 2
    one_error_line(capsys, "model.safetensors")
    (export / "tagger.json").write_text('{"format": "ner_app.tagger/1", "model": ')
    assert main(["predict", "--model", str(export), "--input", str(TINY / "valid.txt")]) == 2
    one_error_line(capsys, "tagger.json:1: not valid JSON")


def test_export_on_a_full_disk_is_all_or_nothing(trained, tmp_path):
    out = tmp_path / "export"
    shutil.copytree(trained / "export", out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    result = run_with_file_limit(4000, "export", "--checkpoint", str(trained / "checkpoints/best.ckpt"),
                                 "--output", str(out))  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in result.stderr
    assert {
        p.name: p.read_bytes() for p in out.iterdir() if p.is_file()
    } == before  # the old export is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no temporary folder left behind


def test_an_export_left_half_written_by_a_killed_run_is_swept(trained, tmp_path: Path) -> None:
    out = tmp_path / "export"
    half = tmp_path / ".export.k7x.tmp"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"half")
    fresh = tmp_path / ".export.live.tmp"  # a writer still at work: touched just now, kept
    fresh.mkdir()
    os.utime(half, (time.time() - 3600, time.time() - 3600))
    assert main(["export", "--checkpoint", str(trained / "checkpoints/best.ckpt"), "--output", str(out)]) == 0
    assert not half.exists() and fresh.exists() and (out / "tagger.json").is_file()


@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_json_is_one_line(tmp_path, trained, capsys, depth):
    """tagger.json and metrics.json nested 40 or 100,000 levels (a RecursionError inside json): one line."""
    export = copy_export(trained, tmp_path)
    (export / "tagger.json").write_text("[" * depth + "]" * depth)
    with pytest.raises(NerAppError, match="nested deeper than 32 levels"):
        load_export(export)
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "metrics.json").write_text('{"dev": ' + "[" * depth + "]" * depth + "}")
    assert main(["compare", str(run)]) == 2
    one_error_line(capsys, "metrics.json: JSON nested deeper than 32 levels")
