"""Typed configuration: the dataclass trees of ``schema.py`` loaded from YAML (``yaml_io.py``) with dotted
overrides.

The typed reader of ``ner_app.records`` walks the dataclass fields (via ``typing.get_type_hints``), so a new
section is only a new dataclass. Errors are :class:`ConfigError` naming the dotted key and
where the value came from (the YAML file or the override).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import yaml

from ner_app.config.schema import (  # the trees live there; importing them from here keeps working
    PATH,
    SHIPPED,
    Accelerator,
    BilmDataConfig,
    BilmModelConfig,
    BilmPretrainConfig,
    BilmTrainConfig,
    ConfigError,
    DataConfig,
    ElmoConfig,
    ModelConfig,
    OptimConfig,
    Precision,
    TrainConfig,
    TrainerConfig,
    keys_with,
)
from ner_app.config.yaml_io import ConfigLoader, dump_yaml, load_bounded_yaml, read_config_file
from ner_app.errors import NerAppError
from ner_app.files import write_text
from ner_app.records import Reader, found, read_record

# --------------------------------------------------------------------------------- validation
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_T = TypeVar("_T")


class _Ctx(Reader):
    """Where values came from: the YAML file, or an override for a key or one of its parents; strings get their
    ``${VAR}`` expanded."""

    mapping, none_is_empty = "a mapping", True

    def __init__(self, file_source: str, override_sources: Mapping[str, str]) -> None:
        super().__init__(ConfigError, file_source)
        self.override_sources = override_sources

    def source_of(self, key: str) -> str:
        cuts = [m.start() for m in re.finditer(r"[.\[]|$", key)]  # 'a.b[0]' -> a.b[0], a.b, a
        for cut in reversed(cuts):
            src = self.override_sources.get(key[:cut])
            if src is not None:
                return src
        return self.source

    def error(self, key: str, msg: str) -> NerAppError:
        if key in self.override_sources:  # an override of this very key already shows it
            return ConfigError(f"{self.source_of(key)}: {msg}")
        return super().error(key, msg)

    def not_a_mapping(self, key: str, value: Any) -> NerAppError:
        where = f"section '{key}'" if key else "the top level"
        return self.error(key, f"expected a mapping for {where}, found {found(value)}")

    def text(self, value: str, key: str) -> str:
        def repl(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            env = os.environ.get(name)
            if default is not None and not env:  # shell semantics: unset or empty -> default
                return default
            if env is None:
                raise self.error(key, f"environment variable '{name}' is not set (use ${{{name}:-default}})")
            return env

        return _ENV.sub(repl, value)


# ------------------------------------------------------------------------------------ public
def _apply_override(data: dict[str, Any], raw: str, sources: dict[str, str]) -> None:
    src = f"override {raw}"
    key, sep, text = raw.partition("=")
    key = key.strip()
    if not sep:
        raise ConfigError(f"{src}: expected the form key.sub=value")
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"{src}: invalid key '{key}'")
    try:
        value = load_bounded_yaml(text, src, ConfigLoader, ConfigError)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{src}: cannot parse value: {exc}") from None
    node = data
    for i, part in enumerate(parts[:-1]):
        if node.get(part) is None:
            node[part] = {}
            sources.setdefault(".".join(parts[: i + 1]), src)  # so an unknown section blames this override
        if not isinstance(node[part], dict):
            parent = ".".join(parts[: i + 1])
            raise ConfigError(f"{src}: key '{parent}' is {found(node[part])}, not a mapping")
        node = node[part]
    node[parts[-1]] = value
    sources[key] = src


def config_from_dict(
    data: Any, overrides: Sequence[str] = (), *, schema: Any = TrainConfig, source: str = "<dict>"
) -> Any:
    """Validate a plain mapping (e.g. parsed YAML) plus overrides into a ``schema`` instance."""
    if data is None:
        data = {}
    if isinstance(data, Mapping):
        data = copy.deepcopy(dict(data))  # overrides must not touch the caller's mapping
    sources: dict[str, str] = {}
    ctx = _Ctx(source, sources)
    for raw in overrides:
        if not isinstance(data, dict):
            break  # read_record reports the non-mapping top level
        _apply_override(data, raw, sources)
    cfg = read_record(schema, data, ctx)
    if isinstance(cfg, TrainConfig) and cfg.model.glove is not None and cfg.model.glove.lower() == "none":
        cfg.model.glove = None  # `glove: none` reads as a string in YAML; it means no GloVe, as null does
    return cfg


@overload
def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig: ...
@overload
def load_config(path: str | Path, overrides: Sequence[str] = (), *, schema: type[_T]) -> _T: ...
def load_config(path: str | Path, overrides: Sequence[str] = (), *, schema: Any = TrainConfig) -> Any:
    """Read YAML at ``path``, apply ``key.sub=value`` overrides, validate into ``schema``; relative paths are
    resolved (``resolve_paths``): those written in a file against the config's project root, those typed in an
    override against the working directory."""
    data = read_config_file(Path(path))
    cfg = config_from_dict(data, overrides, schema=schema, source=str(path))
    return resolve_paths(cfg, path, overrides)


# Keys that name files or folders, in both trees (their fields' PATH metadata; absent ones are skipped: each
# schema has some of them). "package" is model.glove's name for the packaged GloVe, not a path.
PATH_KEYS = keys_with(PATH, TrainConfig, BilmPretrainConfig)
# Keys whose relative path may name what the repository ships (data/bilm, data/models): looked for there when missing
# under the config's project root.
SHIPPED_KEYS = keys_with(SHIPPED, TrainConfig, BilmPretrainConfig)
REPOSITORY = Path(__file__).resolve().parents[2]  # the folder that holds ner_app/ and, in a clone, data/


def project_root(config_path: str | Path) -> Path:
    """The nearest folder above the config file that holds a pyproject.toml, else the config file's folder."""
    folder = Path(config_path).resolve().parent
    return next((p for p in (folder, *folder.parents) if (p / "pyproject.toml").is_file()), folder)


def typed_keys(overrides: Sequence[str]) -> tuple[str, ...]:
    """The keys the overrides set (``data.dir=x`` -> ``data.dir``; ``data={dir: x}`` -> ``data``)."""
    return tuple(raw.partition("=")[0].strip() for raw in overrides)


def resolve_paths(cfg: _T, config_path: str | Path, overrides: Sequence[str] = ()) -> _T:
    """Make every relative path of ``cfg`` absolute, the one rule for every path key (docs/configuration.md):
    a value typed on the command line (an override of the key or of a section above it, ``overrides``) is
    relative to the working directory, as a shell means it; a value written in the config file (or a default
    of the schema) is relative to ``project_root(config_path)``, so that a config means the same files from
    any working directory. A relative path of a ``SHIPPED`` key (``elmo.options``, ``elmo.weights``,
    ``model.init_weights``, ``model.init_from``) that names nothing there but a file or folder of the ner_app
    repository (``data/bilm``, ``data/models``) is that one: a config or a command outside the repository
    still finds the shipped biLM and the shipped tagger."""
    root = project_root(config_path)
    typed = typed_keys(overrides)

    def resolve(value: str, key: str) -> str:
        if value == "package":
            return value
        path = Path(value).expanduser()
        if path.is_absolute():
            return str(path)
        from_shell = any(key == k or key.startswith(f"{k}.") for k in typed)
        found = ((Path.cwd() if from_shell else root) / path).resolve()
        if key in SHIPPED_KEYS and not found.exists() and (REPOSITORY / path).exists():
            return str((REPOSITORY / path).resolve())
        return str(found)

    for key in PATH_KEYS:
        *parents, name = key.split(".")
        node: Any = cfg
        for part in parents:
            node = getattr(node, part, None)
        value = getattr(node, name, None)
        if isinstance(value, str):
            setattr(node, name, resolve(value, key))
        elif isinstance(value, list):
            setattr(node, name, [resolve(v, key) for v in value])
    return cfg


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The config tree as plain nested dicts and lists."""
    return dataclasses.asdict(cfg)


def save_config(cfg: Any, path: str | Path) -> None:
    """Write the resolved config (env vars already expanded) as YAML, atomically, creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, dump_yaml(config_to_dict(cfg)))


__all__ = [
    "Accelerator",
    "BilmDataConfig",
    "BilmModelConfig",
    "BilmPretrainConfig",
    "BilmTrainConfig",
    "ConfigError",
    "DataConfig",
    "ElmoConfig",
    "ModelConfig",
    "OptimConfig",
    "Precision",
    "TrainConfig",
    "TrainerConfig",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "project_root",
    "resolve_paths",
    "save_config",
]
