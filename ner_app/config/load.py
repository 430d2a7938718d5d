"""Typed configuration: the dataclass trees of ``schema.py`` loaded from YAML (``yaml_io.py``) with dotted
overrides.

One generic validator walks the dataclass fields (via ``typing.get_type_hints``), so a new
section is only a new dataclass. Errors are :class:`ConfigError` naming the dotted key and
where the value came from (the YAML file or the override).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import re
import reprlib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, overload

import yaml

from ner_app.config.schema import (  # the trees live there; importing them from here keeps working
    PATH,
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
from ner_app.files import write_text

# --------------------------------------------------------------------------------- validation
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_T = TypeVar("_T")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional_arg(tp: Any) -> Any:
    """Return X for Optional[X] / X | None; raise TypeError for other unions (unsupported)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) != 1 or len(typing.get_args(tp)) != 2:
        raise TypeError(f"unsupported config type {tp!r}: only Optional unions are supported")
    return args[0]


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return f"{_type_name(_optional_arg(tp))} or null"
    if origin in (list, Sequence):
        return f"list[{_type_name(typing.get_args(tp)[0])}]"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", repr(tp))


_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 60, 60, 2, 4, 4


def _found(value: Any) -> str:
    # reprlib bounds the work: a nested-alias value must not be expanded just to be quoted in an error
    return "null" if value is None else f"{type(value).__name__} {_SHORT.repr(value)}"


class _Ctx:
    """Where values came from: the YAML file, or an override for a key or one of its parents."""

    def __init__(self, file_source: str, override_sources: Mapping[str, str]) -> None:
        self.file_source = file_source
        self.override_sources = override_sources

    def source(self, key: str) -> str:
        cuts = [m.start() for m in re.finditer(r"[.\[]|$", key)]  # 'a.b[0]' -> a.b[0], a.b, a
        for cut in reversed(cuts):
            src = self.override_sources.get(key[:cut])
            if src is not None:
                return src
        return self.file_source

    def error(self, key: str, msg: str) -> ConfigError:
        src = self.source(key)
        if not key or key in self.override_sources:  # an override of this very key already shows it
            return ConfigError(f"{src}: {msg}")
        return ConfigError(f"{src}: key '{key}': {msg}")


def _expand(value: str, key: str, ctx: _Ctx) -> str:
    def repl(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        env = os.environ.get(name)
        if default is not None and not env:  # shell semantics: unset or empty -> default
            return default
        if env is None:
            raise ctx.error(key, f"environment variable '{name}' is not set (use ${{{name}:-default}})")
        return env

    return _ENV.sub(repl, value)


def _convert(tp: Any, value: Any, key: str, ctx: _Ctx, shown: Any = None) -> Any:
    """Check ``value`` against type ``tp`` (named ``shown`` in errors); return it converted."""
    origin = typing.get_origin(tp)
    expected = f"expected {_type_name(shown or tp)}, found {_found(value)}"
    if origin in (Union, types.UnionType):
        return None if value is None else _convert(_optional_arg(tp), value, key, ctx, shown=tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        # type() check too, so that True is not taken for 1.
        if not any(value == c and type(value) is type(c) for c in choices):
            allowed = ", ".join(repr(c) for c in choices)
            raise ctx.error(key, f"expected one of {allowed}, found {_found(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        return _build(typing.cast(type, tp), value, key, ctx)
    if origin in (list, Sequence):
        if not isinstance(value, list | tuple):
            raise ctx.error(key, expected)
        (item_tp,) = typing.get_args(tp)
        return [_convert(item_tp, v, f"{key}[{i}]", ctx) for i, v in enumerate(value)]
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
    }
    if tp not in ok:
        raise TypeError(f"unsupported config type {tp!r} for '{key}'")
    if not ok[tp]:
        raise ctx.error(key, expected)
    if tp is float:
        return float(value)
    return _expand(value, key, ctx) if tp is str else value


def _build(cls: type[_T], data: Any, prefix: str, ctx: _Ctx) -> _T:
    """Build dataclass ``cls`` from mapping ``data``; missing fields take their defaults."""
    if data is None:  # a section with every key commented out
        data = {}
    if not isinstance(data, Mapping):
        where = f"section '{prefix}'" if prefix else "the top level"
        raise ctx.error(prefix, f"expected a mapping for {where}, found {_found(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in data if k not in fields)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        where = f"in '{prefix}'" if prefix else "at the top level"
        known = ", ".join(sorted(fields))
        raise ConfigError(f"{ctx.source(key)}: unknown key '{key}' (known keys {where}: {known})")
    hints = _hints(typing.cast(Any, cls))
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if name in data:
            value = data[name]
        elif dataclasses.is_dataclass(hints[name]):
            value = {}
        else:  # defaults go through the same path so that ${VAR} in them is expanded
            value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kwargs[name] = _convert(hints[name], value, key, ctx)
    return cls(**kwargs)


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
            raise ConfigError(f"{src}: key '{parent}' is {_found(node[part])}, not a mapping")
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
            break  # _build reports the non-mapping top level
        _apply_override(data, raw, sources)
    return _build(schema, data, "", ctx)


@overload
def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig: ...
@overload
def load_config(path: str | Path, overrides: Sequence[str] = (), *, schema: type[_T]) -> _T: ...
def load_config(path: str | Path, overrides: Sequence[str] = (), *, schema: Any = TrainConfig) -> Any:
    """Read YAML at ``path``, apply ``key.sub=value`` overrides, validate into ``schema``; relative paths are
    resolved against the config's project root (``resolve_paths``)."""
    data = read_config_file(Path(path))
    return resolve_paths(config_from_dict(data, overrides, schema=schema, source=str(path)), path)


# Keys that name files or folders, in both trees (their fields' PATH metadata; absent ones are skipped: each
# schema has some of them). "package" is model.glove's name for the packaged GloVe, not a path.
PATH_KEYS = keys_with(PATH, TrainConfig, BilmPretrainConfig)


def project_root(config_path: str | Path) -> Path:
    """The nearest folder above the config file that holds a pyproject.toml, else the config file's folder."""
    folder = Path(config_path).resolve().parent
    return next((p for p in (folder, *folder.parents) if (p / "pyproject.toml").is_file()), folder)


def resolve_paths(cfg: _T, config_path: str | Path) -> _T:
    """Make every relative path of ``cfg`` (from the file or an override) absolute against
    ``project_root(config_path)``, so that a config means the same files from any working directory
    (docs/configuration.md)."""
    root = project_root(config_path)

    def resolve(value: str) -> str:
        if value == "package":
            return value
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else (root / path).resolve())

    for key in PATH_KEYS:
        *parents, name = key.split(".")
        node: Any = cfg
        for part in parents:
            node = getattr(node, part, None)
        value = getattr(node, name, None)
        if isinstance(value, str):
            setattr(node, name, resolve(value))
        elif isinstance(value, list):
            setattr(node, name, [resolve(v) for v in value])
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
    "Accelerator", "BilmDataConfig", "BilmModelConfig", "BilmPretrainConfig", "BilmTrainConfig", "ConfigError",
    "DataConfig", "ElmoConfig", "ModelConfig", "OptimConfig", "Precision", "TrainConfig", "TrainerConfig",
    "config_from_dict", "config_to_dict", "load_config", "project_root", "resolve_paths", "save_config",
]  # fmt: skip
