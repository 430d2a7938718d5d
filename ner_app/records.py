"""Typed records from plain data: parsed JSON or YAML read into a dataclass, every value checked against the
field's type, with one-line errors that name the file and the dotted key.

One reader for every file whose layout is a dataclass (the config trees, a tagger spec, ...): a new field is
only a new annotated field. Supported types: bool, int, float (an int is taken), str, ``Literal``, ``X | None``,
``list[X]`` (or ``Sequence[X]``), ``tuple[X, ...]``, ``dict[str, X]``, dataclasses and ``TypedDict``s (every key
required), nested. A missing key takes the field's default; a field without a default is required. A field may
carry its own check (``checked``: bounds, a pattern), which then reads its value. A ``Reader`` says which error to raise and where a key's value came from;
subclasses change the wording (``ner_app.config.load`` names overrides, expands ``${VAR}``).

The one bounded JSON read and the one file digest.

Every JSON file a user could hand over (a ``tagger.json``, an ``options.json``, a metrics file, an annotation
export) is read by ``read_json``: within a byte bound and a nesting bound, so a forged or endless file is one
error naming it. Checksums of files and of JSON values come from here too.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import reprlib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from ner_app.errors import NerAppError

CHUNK = 1 << 20  # bytes read at a time when hashing


def canonical_sha256(value: Any) -> str:
    """sha256 of a JSON value in one canonical spelling (sorted keys, no spaces): a checksum of a JSON file's
    content that survives reformatting but no change of a value."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes, read in bounded chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


MAX_JSON_DEPTH = 32  # nesting of any JSON file this program reads (its own files nest 5 deep at most)


def read_json(
    path: str | Path, max_bytes: int, error: type[NerAppError] = NerAppError, what: str = "a JSON file"
) -> Any:
    """A JSON file read within ``max_bytes`` and ``MAX_JSON_DEPTH``: a huge or deeply nested file (a forged
    ``tagger.json``, a download that never ends) is one ``error`` naming it, never exhausted memory or stack."""
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise error(f"{path}: larger than the {max_bytes:,} bytes such a file can be; not read")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise error(f"{path}: not {what} (byte {err.start} is not UTF-8)") from None
    except json.JSONDecodeError as err:
        raise error(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise error(f"{path}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    stack = [(value, 1)]
    while stack:  # depth without recursion
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise error(f"{path}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if {dict, list}.isdisjoint(map(type, children)):  # a loop in C: a list of 400k words holds no nesting
            continue
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return value


_T = TypeVar("_T")
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 60, 60, 2, 4, 4


def found(value: Any) -> str:
    """A value as an error message quotes it: its type and a bounded repr ("str 'x'", "null")."""
    # reprlib bounds the work: a nested-alias value must not be expanded just to be quoted in an error
    return "null" if value is None else f"{type(value).__name__} {_SHORT.repr(value)}"


class Reader:
    """How a record is reported: the error class, the file (``source``) and the wording. Subclasses may name
    another source per key (``source_of``) or rewrite strings (``text``)."""

    mapping = "an object"  # what a dataclass's value is called in errors ("a mapping" in YAML)
    none_is_empty = False  # whether null stands for a dataclass with every key left out (YAML: all commented)
    ignore_unknown = False  # whether keys a record does not know are skipped (records of other versions)

    def __init__(self, error: type[NerAppError], source: str) -> None:
        self.error_type, self.source = error, source

    def source_of(self, key: str) -> str:
        """Where the value of ``key`` came from (the file)."""
        return self.source

    def error(self, key: str, msg: str) -> NerAppError:
        """One line: the source, the key (when there is one) and what is wrong."""
        where = self.source_of(key)
        return self.error_type(f"{where}: key '{key}': {msg}" if key else f"{where}: {msg}")

    def not_a_mapping(self, key: str, value: Any) -> NerAppError:
        return self.error(key, f"expected {self.mapping}, found {found(value)}")

    def unknown(self, key: str, prefix: str, known: Sequence[str]) -> NerAppError:
        where = f"in '{prefix}'" if prefix else "at the top level"
        return self.error_type(
            f"{self.source_of(key)}: unknown key '{key}' (known keys {where}: {', '.join(sorted(known))})"
        )

    def missing(self, key: str, prefix: str, names: Sequence[str], data: Mapping[str, Any]) -> NerAppError:
        """A field without a default whose key is absent."""
        return self.error(prefix, f"expected the keys {sorted(names)}, found {sorted(map(str, data))}")

    def text(self, value: str, key: str) -> str:
        """A string value as the record keeps it."""
        return value


Check = Callable[
    [Any, str, Reader], Any
]  # (value, dotted key, reader) -> the value kept; raises reader.error


def checked(check: Check) -> dict[str, Check]:
    """Field metadata: ``check`` reads the field's value instead of its type (``field(metadata=checked(f))``)."""
    return {"check": check}


def hints(cls: Any) -> dict[str, Any]:
    """The resolved field types of a dataclass (cached)."""
    return _hints(cls)


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional_arg(tp: Any) -> Any:
    """X for ``X | None``; TypeError for other unions (unsupported)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) != 1 or len(typing.get_args(tp)) != 2:
        raise TypeError(f"unsupported record type {tp!r}: only Optional unions are supported")
    return args[0]


def type_name(tp: Any) -> str:
    """A type as errors name it: int, list[int], int or null, a list of strings."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return f"{type_name(_optional_arg(tp))} or null"
    if origin in (list, Sequence):
        return f"list[{type_name(typing.get_args(tp)[0])}]"
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return "a list of strings" if item is str else f"a list of {type_name(item)}"
    if origin is dict:
        return f"a mapping of {type_name(typing.get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
        return "a mapping"
    return getattr(tp, "__name__", repr(tp))


def _expected(tp: Any, shown: Any, value: Any) -> str:
    # built only for an error: a long list of good values would otherwise pay for a repr of each
    return f"expected {type_name(shown or tp)}, found {found(value)}"


def read_value(tp: Any, value: Any, key: str, reader: Reader, shown: Any = None) -> Any:
    """``value`` checked against type ``tp`` (named ``shown`` in errors) and converted: a list for ``list`` and
    ``Sequence``, a tuple for ``tuple[X, ...]``, a record for a dataclass, a float for an int read as float."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return None if value is None else read_value(_optional_arg(tp), value, key, reader, shown=tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        # type() check too, so that True is not taken for 1.
        if not any(value == c and type(value) is type(c) for c in choices):
            allowed = ", ".join(repr(c) for c in choices)
            raise reader.error(key, f"expected one of {allowed}, found {found(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        return read_record(typing.cast(type, tp), value, reader, key)
    if typing.is_typeddict(tp):
        return _read_typeddict(tp, value, key, reader)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise reader.not_a_mapping(key, value)
        item_tp = typing.get_args(tp)[1]
        return {str(k): read_value(item_tp, v, f"{key}.{k}", reader) for k, v in value.items()}
    if origin in (list, Sequence, tuple):
        if not isinstance(value, list | tuple):
            raise reader.error(key, _expected(tp, shown, value))
        item_tp = typing.get_args(tp)[0]
        if item_tp is str and type(reader).text is Reader.text and {str}.issuperset(map(type, value)):
            items = list(value)  # a vocabulary of 400k words: one pass, the same result as item by item
        else:
            items = [read_value(item_tp, v, f"{key}[{i}]", reader) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
    }
    if tp not in ok:
        raise TypeError(f"unsupported record type {tp!r} for '{key}'")
    if not ok[tp]:
        raise reader.error(key, _expected(tp, shown, value))
    if tp is float:
        return float(value)
    return reader.text(value, key) if tp is str else value


def _read_typeddict(tp: Any, value: Any, key: str, reader: Reader) -> dict[str, Any]:
    """A ``TypedDict`` (every key required) from mapping ``value``, each value checked against its type, in the
    mapping's order."""
    if not isinstance(value, Mapping):
        raise reader.not_a_mapping(key, value)
    types_ = hints(tp)
    unknown = sorted(str(k) for k in value if k not in types_)
    if unknown and not reader.ignore_unknown:
        raise reader.unknown(f"{key}.{unknown[0]}" if key else unknown[0], key, list(types_))
    missing = [name for name in types_ if name not in value]
    if missing:
        raise reader.missing(f"{key}.{missing[0]}" if key else missing[0], key, list(types_), value)
    names = [str(k) for k in value if k in types_]
    return {
        name: read_value(types_[name], value[name], f"{key}.{name}" if key else name, reader)
        for name in names
    }


def read_record(cls: type[_T], data: Any, reader: Reader, prefix: str = "") -> _T:
    """Dataclass ``cls`` from mapping ``data`` (keys under ``prefix``): unknown keys are refused (or skipped,
    ``Reader.ignore_unknown``), missing ones take their defaults (a nested dataclass its own), a missing field
    without a default is an error."""
    if data is None and reader.none_is_empty:
        data = {}
    if not isinstance(data, Mapping):
        raise reader.not_a_mapping(prefix, data)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in data if k not in names)
    if unknown and not reader.ignore_unknown:
        raise reader.unknown(f"{prefix}.{unknown[0]}" if prefix else unknown[0], prefix, names)
    return cls(**{name: read_field(cls, name, data, reader, prefix) for name in names})


def read_field(cls: type, name: str, data: Mapping[str, Any], reader: Reader, prefix: str = "") -> Any:
    """Field ``name`` of dataclass ``cls`` from mapping ``data``: its check or its type, else its default."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    tp, key = hints(cls)[name], f"{prefix}.{name}" if prefix else name
    check = f.metadata.get("check")
    if name in data:
        value = data[name]
        return check(value, key, reader) if check else read_value(tp, value, key, reader)
    if f.default_factory is not dataclasses.MISSING:
        value = {} if dataclasses.is_dataclass(tp) else f.default_factory()
    elif f.default is not dataclasses.MISSING:
        value = f.default
    else:
        raise reader.missing(key, prefix, [f.name for f in dataclasses.fields(cls)], data)
    return (
        value if check else read_value(tp, value, key, reader)
    )  # defaults too: ``Reader.text`` expands them
