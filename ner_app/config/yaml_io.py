"""YAML for configs: a file a hostile user wrote cannot blow it up (aliases are counted, never expanded, before
anything is built; duplicate keys are errors: docs/reliability.md), ``1e-3`` reads as a float, a config may
extend a ``base:`` config, and a written config reads back exactly."""

from __future__ import annotations

import re
import stat
import typing
from pathlib import Path
from typing import Any

import yaml

from ner_app.config.schema import ConfigError
from ner_app.errors import NerAppError
from ner_app.limits import MAX_CONFIG_NODES


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (the later one silently won)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r:.40}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes of ``node`` with every alias expanded (memoised: an alias bomb is counted, never built)."""
    if id(node) not in memo:
        memo[id(node)] = 1  # a cycle counts once
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        memo[id(node)] = 1 + sum(min(expanded_size(c, memo), 1 << 40) for c in children)
    return memo[id(node)]


def load_bounded_yaml(
    text: str,
    source: str,
    loader: type[BoundedLoader] = BoundedLoader,
    error: type[NerAppError] = NerAppError,
) -> Any:
    """Parse YAML, refusing documents that expand (through aliases) beyond ``MAX_CONFIG_NODES`` nodes."""
    parser = loader(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        size = expanded_size(node, {})
        if size > MAX_CONFIG_NODES:
            raise error(
                f"{source}: the YAML expands to {size} values (aliases included), more than {MAX_CONFIG_NODES}"
            )
        return parser.construct_document(node)
    finally:
        parser.dispose()


# ------------------------------------------------------------------------------- YAML dialect
class ConfigLoader(BoundedLoader):
    """SafeLoader that also reads ``1e-3`` as a float (YAML 1.1 wants ``1.0e-3``) and refuses duplicate keys."""


class ConfigDumper(yaml.SafeDumper):
    """SafeDumper that quotes strings the loader would read as floats, for a lossless round trip."""


_EXP_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")
for _cls in (ConfigLoader, ConfigDumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _EXP_FLOAT, list("-+0123456789."))


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    # Flow style for lists of scalars ([3, 64]) keeps filters and heldout lists readable.
    flow = all(not isinstance(x, list | dict) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


ConfigDumper.add_representer(list, _represent_list)


def dump_yaml(data: Any) -> str:
    """``data`` as YAML that ``ConfigLoader`` reads back to the same values."""
    return yaml.dump(data, Dumper=ConfigDumper, sort_keys=False, default_flow_style=False)


BASE_KEY = "base"  # a config's first key may name another config it extends (a path beside it)
MAX_BASES = 8  # bases of bases
MAX_CONFIG_BYTES = 16 << 20  # a config file is a few KiB; this bounds what a mistaken path makes us read


def _not_a_config(path: Path) -> str | None:
    """Why ``path`` cannot be a config file (a folder, a FIFO, a device, missing), or None for a regular file."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in kinds.items() if test(mode)), "a special file")
    return f"is {kind}, expected a YAML config file"


def _read_text(path: Path) -> str:
    with open(path, "rb") as f:
        data = f.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB, which no config is; not read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a UTF-8 text file (byte {err.start + 1} is not UTF-8)") from None


def read_config_file(path: Path, extending: tuple[Path, ...] = ()) -> Any:
    """The YAML mapping of a config file, with its ``base:`` config (read first, then overridden key by key:
    sections merge, other values replace) folded in."""
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, expected a YAML config file")
    problem = _not_a_config(path) if path.exists() else None  # a missing file: the caller's own message
    if problem is not None:
        raise ConfigError(f"{path}: {problem}")
    text = _read_text(path)
    try:
        data = load_bounded_yaml(text, str(path), ConfigLoader, ConfigError)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    if not isinstance(data, dict) or BASE_KEY not in data:
        return data
    base = data.pop(BASE_KEY)
    if not isinstance(base, str) or not base:
        raise ConfigError(
            f"{path}: key '{BASE_KEY}': expected the path of another config, found {base!r:.40}"
        )
    base_path = (path.parent / base).resolve()
    if base_path in extending or path.resolve() == base_path:
        raise ConfigError(f"{path}: key '{BASE_KEY}': {base} extends itself (a cycle of base configs)")
    if len(extending) >= MAX_BASES:
        raise ConfigError(f"{path}: key '{BASE_KEY}': more than {MAX_BASES} configs extend each other")
    problem = _not_a_config(base_path)
    if problem is not None:
        raise ConfigError(f"{path}: key '{BASE_KEY}': {base_path} {problem}")
    merged = read_config_file(base_path, (*extending, path.resolve()))
    if not isinstance(merged, dict):  # a text file that is no config (base: ../../etc/passwd) or an empty one
        found = "nothing" if merged is None else f"a {type(merged).__name__}"
        raise ConfigError(
            f"{path}: key '{BASE_KEY}': {base_path} is not a config (expected a YAML mapping of keys, found {found})"
        )
    return _merged(merged, data)


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out
