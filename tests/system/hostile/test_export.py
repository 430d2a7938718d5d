"""Hostile and careless input to exports: tampered, truncated or half-written ones, and a full disk: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import hashlib
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


@pytest.mark.slow
def test_export_on_a_full_disk_is_all_or_nothing(trained, tmp_path):
    out = tmp_path / "export"
    shutil.copytree(trained / "export", out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    result = run_with_file_limit(
        4000, "export", "--checkpoint", str(trained / "checkpoints/best.ckpt"), "--output", str(out)
    )
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


# ------------------------------------------------------------------ export --onnx: the manifest under its checksum
@pytest.fixture(scope="module")
def onnx_folder(trained: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnxruntime")
    from ner_app.onnx.export import export_onnx_from

    return export_onnx_from(trained / "export", tmp_path_factory.mktemp("onnx") / "onnx")


def _tampered(onnx_folder: Path, tmp_path: Path, edit, resum: bool) -> Path:
    """A copy of the ONNX export whose manifest ``edit`` changed; with ``resum`` a forger also recomputed every
    checksum (the files' and the manifest's own: sha256 of the other keys as sorted, compact JSON)."""

    copy = tmp_path / "onnx"
    shutil.copytree(onnx_folder, copy)
    manifest = json.loads((copy / "onnx.json").read_text())
    edit(manifest, copy)
    if resum:
        manifest["sha256"] = {
            name: hashlib.sha256((copy / name).read_bytes()).hexdigest() for name in manifest["sha256"]
        }
        body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        manifest["manifest_sha256"] = hashlib.sha256(canonical.encode()).hexdigest()
    (copy / "onnx.json").write_text(json.dumps(manifest))
    return copy


def _swap_types(manifest, folder) -> None:
    tags = manifest["spec"]["vocab"]["tags"]["tokens"]
    manifest["spec"]["vocab"]["tags"]["tokens"] = [
        t.replace("PER", "@").replace("LOC", "PER").replace("@", "LOC") for t in tags
    ]


def _nan_crf(manifest, folder) -> None:
    import numpy as np

    with np.load(folder / "crf.npz") as arrays:
        scores = {name: arrays[name].copy() for name in arrays.files}
    scores["transitions"][1, 2] = np.nan
    np.savez(folder / "crf.npz", **scores)


def _swap_graphs(manifest, folder) -> None:
    manifest["graphs"] = {"tagger": "bilm.onnx", "bilm": "tagger.onnx"}


ONNX_TAMPERING = {
    "PER and LOC swapped": (_swap_types, "is not the BIOES tag list training builds"),
    "max_word_chars 1": (
        lambda m, f: m["spec"].update(max_word_chars=1),
        "spec.max_word_chars 1 is outside [3,",
    ),
    "max_word_chars -5": (
        lambda m, f: m["spec"].update(max_word_chars=-5),
        "spec.max_word_chars -5 is outside",
    ),
    "scheme": (
        lambda m, f: m["spec"].update(scheme="IOB9"),
        "spec.scheme 'IOB9' is not a scheme (IOB1, IOB2, BIOES)",
    ),
    "elmo_chars shift": (lambda m, f: m["elmo_chars"].update(shift=2), "elmo_chars.shift is 2, expected 1"),
    "elmo_chars max_chars": (lambda m, f: m["elmo_chars"].update(max_chars=49), "elmo_chars.max_chars is 49"),
    "NaN CRF": (_nan_crf, "crf.npz: CRF transitions scores hold NaN"),
    "graphs swapped": (_swap_graphs, "its graphs do not run on the inputs its manifest describes"),
}


@pytest.mark.parametrize("case", list(ONNX_TAMPERING))
def test_a_tampered_onnx_manifest_is_refused_at_load(onnx_folder: Path, tmp_path: Path, case: str) -> None:
    """Every field of onnx.json is under its checksum; a forger who recomputes it still meets the value checks
    (tags in training's order, a known scheme, the char CNN's width, the traced char layout, finite CRF
    scores, graphs that run): one ``OnnxModelError`` line at load, never a wrong tag or a crash later."""
    from ner_app.onnx.predictor import OnnxModelError, OnnxPredictor

    edit, message = ONNX_TAMPERING[case]
    if case != "NaN CRF":  # a changed crf.npz is already caught by its file checksum
        with pytest.raises(OnnxModelError, match="changed after export .manifest_sha256 differs"):
            OnnxPredictor(_tampered(onnx_folder, tmp_path / "plain", edit, resum=False))
    with pytest.raises(OnnxModelError) as refused:
        OnnxPredictor(_tampered(onnx_folder, tmp_path / "forged", edit, resum=True))
    assert message in str(refused.value) and "\n" not in str(refused.value)


ONNX_MALFORMED = {
    "tags a string": (
        lambda m, f: m["spec"]["vocab"]["tags"].update(tokens="B-PER"),
        "key 'spec.vocab.tags.tokens': expected a list of strings, found str 'B-PER'",
    ),
    "no tagger graph": (lambda m, f: m["graphs"].pop("tagger"), "key 'graphs.tagger': missing"),
    "max_word_chars a float": (
        lambda m, f: m["spec"].update(max_word_chars=30.0),
        "key 'spec.max_word_chars': expected int, found float 30.0",
    ),
    "crf a number": (lambda m, f: m.update(crf=3), "key 'crf': expected str, found int 3"),
    "no spec": (lambda m, f: m.pop("spec"), "key 'spec': missing"),
}


@pytest.mark.parametrize("case", list(ONNX_MALFORMED))
@pytest.mark.parametrize("resum", [False, True])
def test_a_malformed_onnx_manifest_is_one_line_naming_the_key(
    onnx_folder: Path, tmp_path: Path, case: str, resum: bool
) -> None:
    """onnx.json is read as a typed record (``OnnxManifest``): a key of the wrong type, or missing, is one line
    naming the file and the key, whether or not its checksums were recomputed."""
    from ner_app.onnx.predictor import OnnxModelError, OnnxPredictor

    edit, message = ONNX_MALFORMED[case]
    with pytest.raises(OnnxModelError) as refused:
        OnnxPredictor(_tampered(onnx_folder, tmp_path, edit, resum=resum))
    text = str(refused.value)
    assert text.startswith(str(tmp_path / "onnx" / "onnx.json") + ": ") and message in text, text
    assert text.endswith("; export the model again") and "\n" not in text


def test_an_onnx_manifest_without_its_checksum_is_refused(onnx_folder: Path, tmp_path: Path) -> None:
    from ner_app.onnx.predictor import OnnxModelError, OnnxPredictor

    copy = _tampered(onnx_folder, tmp_path, lambda m, f: m.pop("manifest_sha256"), resum=False)
    with pytest.raises(OnnxModelError, match="no manifest_sha256 .written by an older version, or edited."):
        OnnxPredictor(copy)
    assert OnnxPredictor(onnx_folder).tag([["Alice", "met", "Bob"]])[0][
        0
    ]  # the untouched export loads and tags


def test_export_output_dash_is_refused_in_one_line(trained, tmp_path, capsys, monkeypatch):
    """``-`` means standard output wherever an output path is taken; an export is a folder, so it is refused
    (it made a folder named ``-``)."""
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--checkpoint", str(trained / "checkpoints" / "best.ckpt"), "--output", "-"]) == 2
    one_error_line(capsys, "-: this output is a folder, and standard output is not one")
    assert list(tmp_path.iterdir()) == []


def test_export_never_replaces_an_export_it_did_not_write(trained, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(trained / "export", other)  # another run's export, copied here
    before = {p.relative_to(other): p.read_bytes() for p in other.rglob("*") if p.is_file()}
    command = ["export", "--checkpoint", str(trained / "checkpoints/best.ckpt"), "--output", str(other)]
    assert main(command) == 2
    assert one_error_line(capsys).startswith(
        f"error: --output {other}: exists and is not an earlier output of export, or was changed since (it holds "
    )
    assert {p.relative_to(other): p.read_bytes() for p in other.rglob("*") if p.is_file()} == before
    (other / "notes.txt").write_text("the user's notes")
    assert main([*command, "--overwrite"]) == 2  # --overwrite never removes a file it does not write
    one_error_line(capsys, "holds notes.txt, which this output would remove")
    (other / "notes.txt").unlink()
    assert main([*command, "--overwrite"]) == 0
    assert main(command) == 0  # its own earlier output now
