"""Weight I/O: exact round trips and one clear error for every kind of bad file."""

import json
import os

import h5py
import numpy as np
import pytest
import torch

from ner_app.bilm import (
    BilmOptions,
    OptionsError,
    WeightFileError,
    load_bilm,
    load_weights,
    read_options,
    save_bilm,
)
from tests.helpers import TINY_OPTIONS, random_bilm, shared_path


def read_all(path):
    with h5py.File(path, "r") as f:
        out = {}
        f.visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset) else None)
    return out


def test_write_read_write_is_exact(tmp_path):
    bilm = random_bilm()
    options, weights = save_bilm(bilm, tmp_path / "a")
    loaded = load_bilm(options, weights)
    for (name, a), (_, b) in zip(bilm.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    save_bilm(loaded, tmp_path / "b")
    first, second = read_all(weights), read_all(tmp_path / "b" / "weights.hdf5")
    assert first.keys() == second.keys()
    assert all(np.array_equal(first[k], second[k]) and first[k].dtype == np.float32 for k in first)
    assert read_options(options) == TINY_OPTIONS


def test_the_file_sets_every_parameter(tmp_path):
    """A loaded biLM owes nothing to its random initialisation: the file covers every parameter but padding."""
    options, weights = save_bilm(random_bilm(), tmp_path)
    bilm = read_options(options).build()
    with torch.no_grad():
        for param in bilm.parameters():
            param.fill_(float("nan"))
        bilm.token_encoder.char_cnn.char_embed.weight[0].zero_()
    load_weights(bilm, weights)
    assert all(torch.isfinite(param).all() for param in bilm.parameters())


def test_loading_skips_the_random_fills_and_puts_them_back(tmp_path):
    """load_bilm(random_fills=False) builds without torch.nn.init's fills (the file overwrites them) and draws
    nothing from the global random stream; torch's own functions are back afterwards, also when the load
    fails, and a layer built later is initialised as usual. The default keeps the fills (seeded training)."""
    fills = {name: getattr(torch.nn.init, name) for name in ("uniform_", "normal_", "kaiming_uniform_")}
    bilm = random_bilm()
    options, weights = save_bilm(bilm, tmp_path)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    loaded = load_bilm(options, weights, random_fills=False)
    assert torch.equal(torch.get_rng_state(), state)  # nothing drawn from the global stream
    for (name, a), (_, b) in zip(bilm.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    load_bilm(options, weights)
    assert not torch.equal(torch.get_rng_state(), state)  # the default draws as training always did
    (tmp_path / "bad.hdf5").write_bytes(b"not hdf5")
    with pytest.raises(WeightFileError):
        load_bilm(options, tmp_path / "bad.hdf5", random_fills=False)
    assert {name: getattr(torch.nn.init, name) for name in fills} == fills
    assert torch.nn.Linear(8, 8).weight.abs().sum() > 0


@pytest.mark.parametrize("fixture", ["allennlp_elmo", "bilm_tf_noskip"])
def test_reference_file_round_trip_is_exact(tmp_path, fixture):
    folder = shared_path("reference", fixture)
    bilm = load_bilm(folder / "options.json", folder / "lm_weights.hdf5")
    _, weights = save_bilm(bilm, tmp_path)
    original, ours = read_all(folder / "lm_weights.hdf5"), read_all(weights)
    assert original.keys() == ours.keys()
    for name in original:
        assert np.array_equal(original[name], ours[name]), name


def test_layout_of_written_file(tmp_path):
    _, weights = save_bilm(random_bilm(), tmp_path)
    with h5py.File(weights, "r") as f:
        assert f["char_embed"].shape == (261, 4)
        assert f["CNN/W_cnn_2"].shape == (1, 3, 4, 8)
        assert f["CNN_high_0/W_carry"].shape == (20, 20)
        assert f["CNN_proj/W_proj"].shape == (20, 6)
        assert f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"].shape == (12, 48)
        assert f["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"].shape == (12, 6)


def test_original_model_parameter_count():
    original = BilmOptions(
        char_dim=16,
        filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
        n_highway=2,
        activation="relu",
        lstm_dim=4096,
        projection_dim=512,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
    )
    assert original.num_parameters() == 93_600_864


def edit(weights, fn):
    with h5py.File(weights, "a") as f:
        fn(f)


def test_not_hdf5(tmp_path, tiny_bilm_files):
    options, _ = tiny_bilm_files
    bad = tmp_path / "w.hdf5"
    bad.write_text("hello")
    with pytest.raises(
        WeightFileError, match=r"w.hdf5: not an HDF5 file \(expected ELMo weights in hdf5 format\)"
    ):
        load_bilm(options, bad)


def test_missing_file(tmp_path, tiny_bilm_files):
    with pytest.raises(WeightFileError, match="nope.hdf5: no such weight file"):
        load_bilm(tiny_bilm_files[0], tmp_path / "nope.hdf5")


def test_missing_dataset(tiny_bilm_files):
    options, weights = tiny_bilm_files
    edit(weights, lambda f: f.__delitem__("CNN/b_cnn_1"))
    with pytest.raises(WeightFileError, match=r"missing dataset 'CNN/b_cnn_1' \(expected shape \(8,\)\)"):
        load_bilm(options, weights)


def test_wrong_shape(tiny_bilm_files):
    options, weights = tiny_bilm_files
    name = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"

    def shrink(f):
        del f[name]
        f.create_dataset(name, data=np.zeros((12, 5), np.float32))

    edit(weights, shrink)
    with pytest.raises(WeightFileError, match=rf"dataset '{name}' has shape \(12, 5\), expected \(12, 6\)"):
        load_bilm(options, weights)


def test_options_contradicting_weights(tmp_path, tiny_bilm_files):
    options, weights = tiny_bilm_files
    data = json.loads(options.read_text())
    data["lstm"]["n_layers"] = 1  # the file has two layers
    (tmp_path / "one.json").write_text(json.dumps(data))
    with pytest.raises(
        WeightFileError, match=r"dataset 'RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B' is not described"
    ):
        load_bilm(tmp_path / "one.json", weights)
    data["lstm"]["n_layers"] = 3
    (tmp_path / "three.json").write_text(json.dumps(data))
    with pytest.raises(WeightFileError, match=r"missing dataset 'RNN_0/RNN/MultiRNNCell/Cell2/LSTMCell/W_0'"):
        load_bilm(tmp_path / "three.json", weights)
    data["lstm"]["n_layers"] = 2
    data["lstm"]["dim"] = 16
    (tmp_path / "dim.json").write_text(json.dumps(data))
    with pytest.raises(WeightFileError, match=r"W_0' has shape \(12, 48\), expected \(12, 64\)"):
        load_bilm(tmp_path / "dim.json", weights)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"o.json:1: not valid JSON"),
        ("[1, 2]", r"o.json: expected a JSON object with 'char_cnn' and 'lstm', found list"),
        ('{"lstm": {}}', r"o.json: missing section 'char_cnn'"),
    ],
)
def test_bad_options_file(tmp_path, content, message):
    (tmp_path / "o.json").write_text(content)
    with pytest.raises(OptionsError, match=message):
        read_options(tmp_path / "o.json")


def test_bad_option_values(tmp_path, tiny_bilm_files):
    data = json.loads(tiny_bilm_files[0].read_text())
    del data["lstm"]["projection_dim"]
    (tmp_path / "o.json").write_text(json.dumps(data))
    with pytest.raises(OptionsError, match=r"o.json: missing 'lstm.projection_dim'"):
        read_options(tmp_path / "o.json")
    data["lstm"]["projection_dim"] = "big"
    (tmp_path / "o.json").write_text(json.dumps(data))
    with pytest.raises(OptionsError, match=r"'lstm.projection_dim' must be int, found 'big'"):
        read_options(tmp_path / "o.json")
    data["lstm"]["projection_dim"] = 6
    data["char_cnn"]["activation"] = "gelu"
    (tmp_path / "o.json").write_text(json.dumps(data))
    with pytest.raises(OptionsError, match=r"'char_cnn.activation' must be 'relu' or 'tanh', found 'gelu'"):
        read_options(tmp_path / "o.json")


def test_written_files_get_normal_permissions(tmp_path) -> None:
    """Atomic writes go through a private temp file; the published file is readable like any other."""
    umask = os.umask(0o022)
    try:
        options, weights = save_bilm(random_bilm(), tmp_path)
    finally:
        os.umask(umask)
    for path in (options, weights):
        assert path.stat().st_mode & 0o777 == 0o644, path
