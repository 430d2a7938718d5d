"""Tests for the typed YAML config: defaults, overrides, errors, env expansion, round trip."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

import pytest

from ner_app.config.load import (
    BilmPretrainConfig,
    ConfigError,
    TrainConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    resolve_paths,
    save_config,
)

REPO = Path(__file__).resolve().parents[2]
MODEL_KEYS = "char_dim, char_filters, char_width, dropout, features, glove, glove_oov, init_from, lstm_hidden, lstm_layers, word_dim"


@pytest.fixture(autouse=True)
def _no_shared_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests must not depend on the caller's NER_SHARED."""
    monkeypatch.delenv("NER_SHARED", raising=False)


def write(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_from_empty_yaml(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, ""))
    assert isinstance(cfg, TrainConfig)
    # relative paths resolve against the config's folder here (no pyproject.toml above tmp_path)
    assert cfg.seed == 13 and cfg.output_dir == str(tmp_path / "runs/default")
    assert cfg.data.dir == str(tmp_path.parent / "shared/data/conll2003")  # ${NER_SHARED:-../shared} expanded
    assert cfg.data.scheme == "BIOES" and cfg.data.max_sentences is None
    assert cfg.model.glove == "package" and cfg.model.lstm_hidden == 200
    assert cfg.elmo.enabled and cfg.elmo.l2_coef == 0.1
    # the layer cache: the user's cache folder (the suite's XDG_CACHE_HOME), never beside the config or data
    assert cfg.elmo.cache_dir == str(Path(os.environ["XDG_CACHE_HOME"]) / "ner_app" / "elmo")
    assert cfg.optim.lr == 0.001 and cfg.trainer.precision == "auto"
    assert cfg.data.case_augment == 0.0
    expanded = dataclasses.replace(TrainConfig().elmo, cache_dir=cfg.elmo.cache_dir)
    default = TrainConfig(data=dataclasses.replace(TrainConfig().data, dir=cfg.data.dir), elmo=expanded)
    assert cfg == resolve_paths(default, tmp_path / "x.yaml")


def test_the_layer_cache_defaults_to_the_home_cache_without_xdg(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load_config(write(tmp_path, "")).elmo.cache_dir == str(tmp_path / "home/.cache/ner_app/elmo")


def test_bilm_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "{}\n"), schema=BilmPretrainConfig)
    assert isinstance(cfg, BilmPretrainConfig)
    shared = tmp_path.parent / "shared"
    assert cfg.output_dir == str(tmp_path / "runs/bilm")
    assert cfg.data.train == str(shared / "corpus/news_pretrain.tok.txt")
    assert cfg.data.heldout == [str(shared / "corpus/heldout/1b_benchmark.dev.tokens")]
    assert cfg.model.filters[-1] == [7, 1024] and len(cfg.model.filters) == 7
    assert cfg.train.optimizer == "adagrad" and cfg.train.max_time_minutes is None


def test_null_section_means_defaults(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "model:\n  # word_dim: 100\n"))
    assert cfg.model.word_dim == 50


def test_yaml_values_and_overrides_of_each_type(tmp_path: Path) -> None:
    path = write(tmp_path, "trainer:\n  max_epochs: 7\noptim:\n  lr: 1e-3\n  grad_clip: 1\n")
    cfg = load_config(
        path,
        [
            "trainer.max_epochs=3",  # int
            "elmo.enabled=false",  # bool
            "model.glove=null",  # Optional -> None
            "data.dir=/x/y",  # str
            "model.dropout=0.25",  # float
            "elmo.l2_coef=1",  # int accepted for float
            "trainer.limit_train_batches=2e-1",  # exponent without a dot is still a float
            "trainer.precision=bf16-mixed",  # Literal
            "data.scheme=BIO",
            "trainer.threads=4",  # Optional[int]
            "seed=1",
            "seed=2",  # last one wins
        ],
    )
    t = cfg.trainer
    assert (t.max_epochs, t.precision, t.threads, t.limit_train_batches) == (3, "bf16-mixed", 4, 0.2)
    assert cfg.elmo.enabled is False and cfg.model.glove is None and cfg.data.dir == "/x/y"
    assert cfg.model.dropout == 0.25 and cfg.data.scheme == "BIO" and cfg.seed == 2
    assert cfg.optim.lr == 0.001 and type(cfg.optim.grad_clip) is float and cfg.optim.grad_clip == 1.0
    assert type(cfg.elmo.l2_coef) is float and cfg.elmo.l2_coef == 1.0


@pytest.mark.parametrize("spelling", ["none", "None", "NONE"])
def test_glove_none_means_no_glove_and_is_no_path(tmp_path: Path, spelling: str) -> None:
    """YAML reads `none` as a string; it means null (no GloVe), not a file named none beside the config."""
    assert load_config(write(tmp_path, f"model:\n  glove: {spelling}\n")).model.glove is None
    assert load_config(write(tmp_path, ""), [f"model.glove={spelling}"]).model.glove is None
    # an override is typed: relative to the working directory
    assert load_config(write(tmp_path, ""), ["model.glove=vectors.txt"]).model.glove == str(
        Path.cwd() / "vectors.txt"
    )


def test_init_from_and_previous_dev_are_paths_from_the_project_root(tmp_path: Path) -> None:
    cfg = load_config(
        write(tmp_path, "model:\n  init_from: runs/a/export\ndata:\n  previous_dev: old/valid.txt\n")
    )
    assert cfg.model.init_from == str(tmp_path / "runs/a/export")
    assert cfg.data.previous_dev == str(tmp_path / "old/valid.txt")


def test_list_of_lists(tmp_path: Path) -> None:
    path = write(tmp_path, "model:\n  filters:\n    - [1, 8]\n    - [2, 16]\ndata:\n  heldout: [a, b]\n")
    cfg = load_config(path, ["train.max_time_minutes=1.5"], schema=BilmPretrainConfig)
    assert cfg.model.filters == [[1, 8], [2, 16]] and cfg.data.heldout == [
        str(tmp_path / "a"),
        str(tmp_path / "b"),
    ]
    assert cfg.train.max_time_minutes == 1.5
    cfg = load_config(path, ["model.filters=[[3, 4]]", "model.activation=tanh"], schema=BilmPretrainConfig)
    assert cfg.model.filters == [[3, 4]] and cfg.model.activation == "tanh"


@pytest.mark.parametrize(
    ("yaml_text", "overrides", "message"),
    [
        (
            "model:\n  lstm_hiden: 3\n",
            [],
            f"{{src}}: unknown key 'model.lstm_hiden' (known keys in 'model': {MODEL_KEYS})",
        ),
        (
            "",
            ["model.lstm_hiden=3"],
            "override model.lstm_hiden=3: unknown key 'model.lstm_hiden' "
            f"(known keys in 'model': {MODEL_KEYS})",
        ),
        (
            "modle: {}\n",
            [],
            "{src}: unknown key 'modle' (known keys at the top level: data, distill, elmo, model, optim, "
            "output_dir, seed, trainer, transformer)",
        ),
        ("", ["foo.bar=1"], "override foo.bar=1: unknown key 'foo' (known keys at the top level: data, "),
        ("optim:\n  lr: fast\n", [], "{src}: key 'optim.lr': expected float, found str 'fast'"),
        ("", ["trainer.max_epochs=abc"], "override trainer.max_epochs=abc: expected int, found str 'abc'"),
        (
            "trainer:\n  max_epochs: true\n",
            [],
            "{src}: key 'trainer.max_epochs': expected int, found bool True",
        ),
        ("seed: 1.5\n", [], "{src}: key 'seed': expected int, found float 1.5"),
        ("", ["seed=null"], "override seed=null: expected int, found null"),
        ("", ["data.dir=3"], "override data.dir=3: expected str or null, found int 3"),
        ("", ["elmo.enabled=1"], "override elmo.enabled=1: expected bool, found int 1"),
        ("", ["trainer.max_epochs"], "override trainer.max_epochs: expected the form key.sub=value"),
        ("", ["model..dropout=1"], "override model..dropout=1: invalid key 'model..dropout'"),
        ("", ["seed=[1"], "override seed=[1: cannot parse value: "),
        ("model: 3\n", [], "{src}: key 'model': expected a mapping for section 'model', found int 3"),
        ("", ["data=x"], "override data=x: expected a mapping for section 'data', found str 'x'"),
        ("data: [1]\n", ["data.dir=a"], "override data.dir=a: key 'data' is list [1], not a mapping"),
        ("- 1\n", [], "{src}: expected a mapping for the top level, found list [1]"),
        ("model: {\n", [], "{src}:2: invalid YAML: expected the node content"),
        (
            "data:\n  scheme: BIOS\n",
            [],
            "{src}: key 'data.scheme': expected one of 'BIO', 'BIOES', found str 'BIOS'",
        ),
        (
            "",
            ["trainer.precision=fp8"],
            "override trainer.precision=fp8: expected one of 'auto', '32-true', 'bf16-mixed', '16-mixed', "
            "found str 'fp8'",
        ),
        (
            "output_dir: ${NER_RUN_ROOT}/a\n",
            [],
            "{src}: key 'output_dir': environment variable 'NER_RUN_ROOT' is not set "
            "(use ${NER_RUN_ROOT:-default})",
        ),
    ],
)
def test_errors(tmp_path: Path, yaml_text: str, overrides: list[str], message: str) -> None:
    path = write(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    assert str(info.value).startswith(message.replace("{src}", str(path)))
    assert isinstance(info.value, ValueError)


def test_bilm_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "model:\n  filters: [[1, 32], [2, x]]\n")
    with pytest.raises(ConfigError, match=r"key 'model\.filters\[1\]\[1\]': expected int, found str 'x'$"):
        load_config(path, schema=BilmPretrainConfig)
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, ""), ["model.filters=[1, 2]"], schema=BilmPretrainConfig)
    assert str(info.value) == (
        "override model.filters=[1, 2]: key 'model.filters[0]': expected list[int], found int 1"
    )


def test_env_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NER_SHARED", "/mnt/shared")
    monkeypatch.setenv("RUN_TAG", "exp1")
    monkeypatch.delenv("NER_UNSET_VAR", raising=False)
    path = write(tmp_path, "output_dir: runs/${RUN_TAG}/${NER_UNSET_VAR:-x}\n")
    cfg = load_config(path, ["elmo.options=${RUN_TAG}.json"])
    assert cfg.data.dir == "/mnt/shared/data/conll2003"  # default config value, env set
    # the file's path from the config's folder; the typed one from the working directory
    assert cfg.output_dir == str(tmp_path / "runs/exp1/x") and cfg.elmo.options == str(
        Path.cwd() / "exp1.json"
    )
    monkeypatch.setenv("NER_SHARED", "")  # empty counts as unset for ${VAR:-default}, as in the shell
    assert load_config(path).data.dir == str(tmp_path.parent / "shared/data/conll2003")
    with pytest.raises(
        ConfigError, match=r"^override elmo.weights=\$\{NOPE_VAR\}: environment variable 'NOPE_"
    ):
        load_config(path, ["elmo.weights=${NOPE_VAR}"])


def test_save_load_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NER_SHARED", "/s")
    tricky = [
        "output_dir='1e5'",
        "data.hub_name='null'",
        "model.glove='true'",
        "trainer.limit_train_batches=0.25",
    ]
    cfg = load_config(write(tmp_path, ""), tricky)
    assert cfg.output_dir == str(Path.cwd() / "1e5") and cfg.data.hub_name == "null"
    out = tmp_path / "run" / "config.yaml"
    save_config(cfg, out)
    assert "${" not in out.read_text() and "/s/data/conll2003" in out.read_text()
    monkeypatch.delenv("NER_SHARED")
    assert load_config(out) == cfg
    assert config_to_dict(cfg)["trainer"]["limit_train_batches"] == 0.25
    bilm = load_config(write(tmp_path, ""), ["train.lr=1e-05"], schema=BilmPretrainConfig)
    save_config(bilm, tmp_path / "bilm.yaml")
    assert load_config(tmp_path / "bilm.yaml", schema=BilmPretrainConfig) == bilm


def test_config_from_dict_leaves_input_alone() -> None:
    data = {"model": {"word_dim": 100}}
    cfg = config_from_dict(data, ["model.word_dim=300"])
    assert cfg.model.word_dim == 300 and data == {"model": {"word_dim": 100}}


@dataclass
class _Inner:
    sizes: list[int] = field(default_factory=lambda: [1])
    mode: Literal["a", "b"] = "a"


@dataclass
class _Schema:
    old_style: Optional[int] = None  # noqa: UP045 - the typing.Optional spelling must work too
    new_style: float | None = 1.0
    inner: _Inner = field(default_factory=_Inner)


def test_generic_validator_on_a_new_schema() -> None:
    cfg = config_from_dict({"old_style": 4, "inner": {"sizes": [2, 3]}}, ["inner.mode=b"], schema=_Schema)
    assert cfg == _Schema(old_style=4, new_style=1.0, inner=_Inner(sizes=[2, 3], mode="b"))
    with pytest.raises(ConfigError, match=r"^<dict>: key 'old_style': expected int or null, found str 'x'$"):
        config_from_dict({"old_style": "x"}, schema=_Schema)


@pytest.mark.parametrize(
    "path", sorted((REPO / "configs").glob("*.yaml")), ids=lambda p: p.name if isinstance(p, Path) else p
)
def test_repo_configs_load(path: Path, tmp_path: Path) -> None:
    schema = BilmPretrainConfig if path.name.startswith("bilm_") else TrainConfig
    cfg = load_config(path, schema=schema)
    assert isinstance(cfg, schema)
    save_config(cfg, tmp_path / "resolved.yaml")
    assert load_config(tmp_path / "resolved.yaml", schema=schema) == cfg


def test_base_config_is_read_first_and_overridden_key_by_key(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.yaml").write_text(
        "seed: 3\ndata:\n  batch_size: 8\n  scheme: BIO\nelmo:\n  enabled: false\n"
    )
    (tmp_path / "b.yaml").write_text("base: a.yaml\ndata:\n  batch_size: 16\n")
    (tmp_path / "c.yaml").write_text("base: b.yaml\nseed: 5\n")
    cfg = load_config(tmp_path / "c.yaml")
    assert (cfg.seed, cfg.data.batch_size, cfg.data.scheme, cfg.elmo.enabled) == (5, 16, "BIO", False)


def test_the_shipped_configs_extend_the_elmo_recipe() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    elmo = config_to_dict(load_config(root / "conll2003_elmo.yaml"))
    for name, differs in {
        "conll2003_baseline.yaml": {"elmo.enabled"},
        "conll2003_elmo_doc.yaml": {"elmo.context"},
    }.items():
        other = config_to_dict(load_config(root / name))
        found = {
            f"{s}.{k}"
            for s in elmo
            if isinstance(elmo[s], dict)
            for k in elmo[s]
            if elmo[s][k] != other[s][k]
        }
        assert found == differs and other["output_dir"] != elmo["output_dir"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("base: self.yaml\n", "extends itself"),
        ("base: missing.yaml\n", "missing.yaml does not exist"),
        ("base: [a]\n", "key 'base': expected the path of another config"),
    ],
)
def test_bad_base_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "self.yaml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path / "self.yaml")


def test_the_key_lists_come_from_field_metadata() -> None:
    """PATH_KEYS, RESUMABLE_KEYS and OPERATIONAL_KEYS are read from the schema; pinned to what they listed."""
    from ner_app.config.load import PATH_KEYS
    from ner_app.report.compare import OPERATIONAL_KEYS
    from ner_app.runtime.run_dir import RESUMABLE_KEYS

    assert set(PATH_KEYS) == {
        "output_dir",
        "data.dir",
        "data.train",
        "data.heldout",
        "data.extra_train",
        "model.glove",
        "model.init_from",
        "data.previous_dev",
        "model.init_weights",
        "elmo.options",
        "elmo.weights",
        "elmo.cache_dir",
        "transformer.folder",
        "distill.marginals",
    }
    assert RESUMABLE_KEYS == {
        "output_dir",
        "trainer.max_epochs",
        "trainer.patience",
        "trainer.max_time_minutes",
        "trainer.threads",
        "trainer.enable_progress_bar",
        "trainer.log_every_n_steps",
        "elmo.cache_dir",
        "data.num_workers",
        "train.max_steps",
        "train.max_time_minutes",
        "train.threads",
        "train.enable_progress_bar",
        "train.log_every_n_steps",
        "train.val_every_n_steps",
        "train.patience",
        "trainer.logger",
        "train.logger",
    }
    assert OPERATIONAL_KEYS == {
        "seed",
        "output_dir",
        "trainer.threads",
        "trainer.enable_progress_bar",
        "trainer.log_every_n_steps",
        "elmo.cache_dir",
        "data.num_workers",
        "trainer.logger",
    }


def test_the_pretraining_model_section_yields_the_bilm_options() -> None:
    """BilmModelConfig is a BilmShape: its options are BilmOptions.of it, which builds the biLM directly."""
    import inspect

    from ner_app.bilm.bilm import BidirectionalLM
    from ner_app.bilm.options import SHAPE_KEYS, BilmOptions

    cfg = config_from_dict(
        {"model": {"filters": [[1, 4], [2, 8]], "lstm_dim": 16, "projection_dim": 8}},
        schema=BilmPretrainConfig,
    )
    options = BilmOptions.of(cfg.model)
    assert options == BilmOptions.from_dict(options.to_dict()) and options.filters == ((1, 4), (2, 8))
    assert options == BilmOptions(16, ((1, 4), (2, 8)), 2, "relu", 16, 8, 2, 3.0, 3.0, True)
    assert BilmOptions() == BilmOptions.of(BilmPretrainConfig().model)  # the defaults: the original ELMo
    assert set(SHAPE_KEYS) <= set(inspect.signature(BidirectionalLM).parameters)
    assert BilmOptions.from_model(options.build()) == options


def test_bilm_filters_that_are_not_pairs_are_refused_naming_the_key() -> None:
    from ner_app.config.checks import check_pretrain_config

    cfg = config_from_dict({"model": {"filters": [[1, 4, 2]]}}, schema=BilmPretrainConfig)
    with pytest.raises(ConfigError, match=r"^config key 'model.filters' must be \[width, channels\] pairs"):
        check_pretrain_config(cfg)


def test_a_config_anywhere_finds_the_shipped_tagger_and_bilm(tmp_path: Path) -> None:
    """model.init_from, elmo.options and model.init_weights name what the repository ships (data/models,
    data/bilm) from a config outside it; a path that exists beside the config wins, and one that names nothing
    anywhere stays where the config put it (the error then names that path)."""
    from ner_app.config.load import REPOSITORY

    text = "model:\n  init_from: data/models/conll2003\nelmo:\n  options: data/bilm/options.json\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.model.init_from == str(REPOSITORY / "data/models/conll2003")
    assert cfg.elmo.options == str(REPOSITORY / "data/bilm/options.json")
    (tmp_path / "data/models/conll2003").mkdir(parents=True)
    assert load_config(write(tmp_path, text)).model.init_from == str(tmp_path / "data/models/conll2003")
    missing = load_config(write(tmp_path, "model:\n  init_from: data/models/nothing\n"))
    assert missing.model.init_from == str(tmp_path / "data/models/nothing")


def test_model_features_choose_the_input_and_elmo_enabled_still_leaves_elmo_out() -> None:
    from ner_app.config.checks import check_train_config
    from ner_app.config.schema import input_features

    cfg = TrainConfig()
    assert input_features(cfg) == ["words", "chars", "elmo"]
    cfg.elmo.enabled = False  # the switch of configs written before model.features
    assert input_features(cfg) == ["words", "chars"]
    cfg.model.features = ["chars", "chars"]
    with pytest.raises(
        ConfigError, match=r"^config key 'model.features': expected a non-empty list of distinct"
    ):
        check_train_config(cfg)
