"""Hostile and careless input to biLM files a user hands over: options.json and weights.hdf5: each case ends in one clear ``error:``
line with exit code 2, or is refused, never run, allocated or misleading (docs/reliability.md)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import h5py
import pytest

import train
from ner_app.bilm.weights import load_bilm
from ner_app.config.checks import check_pretrain_config
from ner_app.config.load import BilmPretrainConfig, ConfigError, load_config
from ner_app.errors import NerAppError
from ner_app.limits import LimitError
from tests.helpers import (
    ROOT,
    TINY_BILM,
    one_error_line,
    train_args,
)


def test_nan_bilm_is_refused(tmp_path, capsys):
    copy = tmp_path / "bilm"
    shutil.copytree(TINY_BILM, copy)
    with h5py.File(copy / "weights.hdf5", "a") as f:
        f["CNN_proj/b_proj"][0] = float("nan")
    run = tmp_path / "run"
    assert train.main(train_args(run, f"elmo.weights={copy / 'weights.hdf5'}")) == 2
    one_error_line(capsys, "CNN_proj/b_proj", "NaN")


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [("lstm", "dim", 10**9), ("lstm", "n_layers", 10**6), ("lstm", "projection_dim", 0)],
)
def test_absurd_biLM_sizes_fail_before_allocating(tmp_path, section, key, value):
    copy = tmp_path / "bilm"
    shutil.copytree(TINY_BILM, copy)
    options = json.loads((copy / "options.json").read_text())
    options[section][key] = value
    (copy / "options.json").write_text(json.dumps(options))
    start = time.perf_counter()
    with pytest.raises(LimitError, match=f"'{section}.{key}'"):
        load_bilm(copy / "options.json", copy / "weights.hdf5")
    assert time.perf_counter() - start < 5


def test_biLM_options_contradicting_the_weights_fail_before_building(tmp_path):
    copy = tmp_path / "bilm"
    shutil.copytree(TINY_BILM, copy)
    options = json.loads((copy / "options.json").read_text())
    options["lstm"]["dim"] *= 2
    (copy / "options.json").write_text(json.dumps(options))
    with pytest.raises(NerAppError, match="W_0' has shape .* from the options \\('lstm.dim'\\)"):
        load_bilm(copy / "options.json", copy / "weights.hdf5")


def test_binary_options_file_is_one_line(tmp_path):
    (tmp_path / "options.json").write_bytes(b"\x89HDF\r\n\x1a\n\xff\xfe")
    with pytest.raises(NerAppError, match="options.json: not a JSON options file"):
        load_bilm(tmp_path / "options.json", TINY_BILM / "weights.hdf5")


@pytest.mark.parametrize("clip", [-1, 0, "nan"])
def test_a_clip_that_is_not_positive_is_refused(tmp_path: Path, clip) -> None:
    """A cell_clip of -1 would clamp every cell to -1: the options file and the pretraining config refuse it."""
    from ner_app.bilm.options import OptionsError, read_options

    options = json.loads((ROOT / "tests/data/tiny_bilm/options.json").read_text())
    options["lstm"]["cell_clip"] = float(clip) if clip == "nan" else clip
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))  # json writes NaN, which json.loads reads back
    with pytest.raises(OptionsError, match="'lstm.cell_clip' must be a positive number or null"):
        read_options(path)
    value = ".nan" if clip == "nan" else clip  # YAML's spelling of NaN
    cfg = load_config(
        ROOT / "configs/bilm_tiny.yaml", [f"model.proj_clip={value}"], schema=BilmPretrainConfig
    )
    with pytest.raises(ConfigError, match="'model.proj_clip' must be a positive number or null"):
        check_pretrain_config(cfg)


@pytest.mark.slow  # a thousand loads, 15-20 s
def test_any_flipped_byte_in_a_weight_file_loads_or_is_one_error(tmp_path: Path) -> None:
    """Brute force over the hdf5's structure (superblock, object headers, heaps, B-trees: its first 4 KiB and
    every 97th byte after): h5py's own errors never escape as a traceback."""
    good = (TINY_BILM / "weights.hdf5").read_bytes()
    path = tmp_path / "weights.hdf5"
    positions = [*range(0, min(len(good), 4096), 7), *range(4096, len(good), 97)]
    outcomes = {"loaded": 0, "refused": 0}
    for position in positions:
        path.write_bytes(good[:position] + bytes([good[position] ^ 0xFF]) + good[position + 1 :])
        try:
            load_bilm(TINY_BILM / "options.json", path, random_fills=False)  # the file is what is tested
            outcomes["loaded"] += 1
        except NerAppError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == len(positions)


def _pretrain_metrics() -> dict:
    """A pretraining metrics.json as ``PretrainMetrics.save`` writes it (one held-out file, two contexts)."""
    sentence = {"forward": 7.25, "backward": 7.5, "mean": 7.375, "predicted_tokens": 120}
    document = {"forward": 6.5, "backward": 6.75, "mean": 6.625, "predicted_tokens": 120}
    heldout = {"path": "h.txt", "sentences": 20, "documents": 3, "context": "sentence", **sentence}
    heldout["contexts"] = {"sentence": sentence, "document": document}
    plain = {"steps": 30, "epochs": 1.25, "processes": 1, "train_tokens_per_s": None, "train_tokens_timed": 0}
    return {**plain, "vocab_size": 50, "parameters": 99, "exported_step": 30, "heldout": {"h.txt": heldout}}


def _drop(key: str):
    return lambda m: m.pop(key)


PRETRAIN_METRICS = {
    "steps a string": (lambda m: m.update(steps="30"), "key 'steps': expected int, found str '30'"),
    "steps missing": (_drop("steps"), "key 'steps': missing (expected the record a pretraining run writes)"),
    "a bool for a count": (lambda m: m.update(parameters=True), "key 'parameters': expected int, found bool"),
    "unknown key": (lambda m: m.update(loss=1.0), "unknown key 'loss'"),
    "heldout a list": (lambda m: m.update(heldout=[]), "key 'heldout': expected an object, found list []"),
    "perplexity a string": (
        lambda m: m["heldout"]["h.txt"]["contexts"]["document"].update(mean="low"),
        "key 'heldout.h.txt.contexts.document.mean': expected float, found str 'low'",
    ),
    "perplexity missing": (
        lambda m: m["heldout"]["h.txt"]["contexts"]["document"].pop("predicted_tokens"),
        "key 'heldout.h.txt.contexts.document.predicted_tokens': missing",
    ),
    "context not scored": (
        lambda m: m["heldout"]["h.txt"].update(context="paragraph"),
        "key 'heldout.h.txt.context': expected one of the contexts (document, sentence), found str 'paragraph'",
    ),
    "flat numbers not the context's": (
        lambda m: m["heldout"]["h.txt"].update(mean=1.0),
        "key 'heldout.h.txt.mean': expected 7.375 (its sentence context's), found float 1.0",
    ),
}


@pytest.mark.parametrize("case", list(PRETRAIN_METRICS))
def test_a_malformed_pretraining_metrics_file_is_one_line(tmp_path: Path, case: str) -> None:
    """``PretrainMetrics.read``: a malformed pretraining metrics.json is one line naming the file and the key."""
    from ner_app.pretrain.metrics import PretrainMetrics, PretrainMetricsError

    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(_pretrain_metrics()))
    assert PretrainMetrics.read(path).steps == 30  # the untouched record reads
    metrics = _pretrain_metrics()
    edit, message = PRETRAIN_METRICS[case]
    edit(metrics)
    path.write_text(json.dumps(metrics))
    with pytest.raises(PretrainMetricsError) as refused:
        PretrainMetrics.read(path)
    text = str(refused.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text, text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not valid JSON"),
        (b"[1, 2]", "expected an object, found list"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"heldout": ' + b"[" * 100 + b"]" * 100 + b"}", "nested deeper than 32 levels"),
    ],
)
def test_a_pretraining_metrics_file_that_is_no_record_is_one_line(
    tmp_path: Path, content: bytes, message: str
):
    from ner_app.pretrain.metrics import PretrainMetrics

    path = tmp_path / "metrics.json"
    path.write_bytes(content)
    with pytest.raises(NerAppError) as refused:
        PretrainMetrics.read(path)
    assert str(refused.value).startswith(str(path)) and message in str(refused.value), refused.value
    assert "\n" not in str(refused.value)
    with pytest.raises(NerAppError, match="not found .expected the metrics.json of a pretraining run."):
        PretrainMetrics.read(tmp_path / "nothing.json")
