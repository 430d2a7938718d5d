"""The typed reader of ``ner_app.records``: dataclasses from parsed JSON or YAML, one-line errors naming the
source and the key, defaults for missing keys, field checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import pytest

from ner_app.errors import NerAppError
from ner_app.records import Reader, checked, read_record


class RecordError(NerAppError):
    pass


def _positive(value: Any, key: str, reader: Reader) -> int:
    if not isinstance(value, int) or value < 1:
        raise reader.error(key, f"expected a positive count, found {value!r}")
    return value


@dataclass(frozen=True)
class Inner:
    name: str
    weight: float = 1.0


@dataclass(frozen=True)
class Outer:
    inner: Inner
    tokens: tuple[str, ...]
    mode: Literal["a", "b"] = "a"
    sizes: list[int] = field(default_factory=list)
    table: dict[str, Inner] = field(default_factory=dict)
    limit: int | None = None
    count: int = field(default=1, metadata=checked(_positive))


def read(data: Any) -> Outer:
    return read_record(Outer, data, Reader(RecordError, "file.json"))


def test_a_record_reads_with_its_types_and_defaults() -> None:
    data = {
        "inner": {"name": "x", "weight": 2},
        "tokens": ["a", "b"],
        "table": {"k": {"name": "y"}},
        "count": 3,
    }
    out = read(data)
    assert out == Outer(Inner("x", 2.0), ("a", "b"), table={"k": Inner("y")}, count=3)
    assert isinstance(out.inner.weight, float) and isinstance(out.tokens, tuple)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "file.json: expected an object, found list []"),
        (
            {"tokens": []},
            "file.json: expected the keys ['count', 'inner', 'limit', 'mode', 'sizes', 'table', "
            "'tokens'], found ['tokens']",
        ),
        (
            {"inner": {"name": "x"}, "tokens": "ab"},
            "file.json: key 'tokens': expected a list of strings, found str 'ab'",
        ),
        (
            {"inner": {"name": "x"}, "tokens": [], "mode": "c"},
            "file.json: key 'mode': expected one of 'a', 'b', found str 'c'",
        ),
        (
            {"inner": {"name": "x"}, "tokens": [], "sizes": [1, True]},
            "file.json: key 'sizes[1]': expected int, found bool True",
        ),
        ({"inner": {"name": 3}, "tokens": []}, "file.json: key 'inner.name': expected str, found int 3"),
        (
            {"inner": {"name": "x", "extra": 1}, "tokens": []},
            "file.json: unknown key 'inner.extra' (known keys in 'inner': name, weight)",
        ),
        (
            {"inner": {"name": "x"}, "tokens": [], "table": {"k": 1}},
            "file.json: key 'table.k': expected an object, found int 1",
        ),
        (
            {"inner": {"name": "x"}, "tokens": [], "limit": "7"},
            "file.json: key 'limit': expected int or null, found str '7'",
        ),
        (
            {"inner": {"name": "x"}, "tokens": [], "count": 0},
            "file.json: key 'count': expected a positive count, found 0",
        ),
    ],
)
def test_bad_values_are_one_line_naming_the_file_and_the_key(data: Any, message: str) -> None:
    with pytest.raises(RecordError) as err:
        read(data)
    assert str(err.value) == message


def test_a_reader_may_skip_unknown_keys() -> None:
    class Lenient(Reader):
        ignore_unknown = True

    out = read_record(Inner, {"name": "x", "later": [1]}, Lenient(RecordError, "f"))
    assert out == Inner("x")


class Counts(TypedDict):
    tokens: int
    rate: float


@dataclass(frozen=True)
class WithCounts:
    by_name: dict[str, Counts]


def test_a_typeddict_reads_in_the_mapping_order_with_every_key_required() -> None:
    reader = Reader(RecordError, "f.json")
    out = read_record(WithCounts, {"by_name": {"a": {"rate": 2, "tokens": 3}}}, reader)
    assert out.by_name == {"a": {"rate": 2.0, "tokens": 3}} and list(out.by_name["a"]) == ["rate", "tokens"]
    assert isinstance(out.by_name["a"]["rate"], float)
    bad = {
        "f.json: key 'by_name.a': expected an object, found int 1": {"a": 1},
        "f.json: key 'by_name.a.tokens': expected int, found str '3'": {"a": {"tokens": "3", "rate": 1.0}},
        "f.json: unknown key 'by_name.a.x' (known keys in 'by_name.a': rate, tokens)": {
            "a": {"tokens": 3, "rate": 1.0, "x": 0}
        },
        "f.json: key 'by_name.a': expected the keys ['rate', 'tokens'], found ['tokens']": {
            "a": {"tokens": 3}
        },
    }
    for message, value in bad.items():
        with pytest.raises(RecordError) as err:
            read_record(WithCounts, {"by_name": value}, reader)
        assert str(err.value) == message
