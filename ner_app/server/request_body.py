"""The body of a ``POST /predict`` request, checked before it reaches the model (docs/serving.md).

A request is ``{"texts": ["...", ...]}``, with optionally ``"min_score"`` (a number in [0, 1]),
``"alternatives"`` (an integer >= 0) and ``"flag_missed"`` (a number in [0, 1]), as predict's options of those
names. Anything else (bytes that are not UTF-8, not JSON, another shape,
too many texts or characters, a lone surrogate that no response could encode) is a ``BadRequest``: the server
answers it with a 4xx and a one-line JSON error, and the request never joins a batch, so it cannot fail the
good requests batched with it.
"""

from __future__ import annotations

import json
from typing import Any

from ner_app.limits import SERVE_MAX_BODY_BYTES, SERVE_MAX_CHARS, SERVE_MAX_TEXTS

BAD_REQUEST, TOO_LARGE = 400, 413
OPTIONS = {"min_score": "probability", "alternatives": "integer", "flag_missed": "probability"}
MAX_ALTERNATIVES = 100  # alternatives per entity a request may ask for: each costs a pass over the sentence


class BadRequest(Exception):
    """A request the server refuses: an HTTP status and one line saying what was expected."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _kind(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array" if isinstance(value, list) else "an object"


def check_length(declared: str | None, limit: int = SERVE_MAX_BODY_BYTES) -> None:
    """A ``Content-Length`` over ``limit`` is refused before the body is read."""
    if declared is None:
        return
    if not declared.isdigit():
        raise BadRequest(BAD_REQUEST, f"Content-Length {declared[:40]!r} is not a number of bytes")
    if int(declared) > limit:
        raise BadRequest(TOO_LARGE, f"body of {int(declared):,} bytes; at most {limit:,}")


def parse_json(body: bytes, limit: int = SERVE_MAX_BODY_BYTES) -> Any:
    """A request body as JSON, or ``BadRequest`` saying in one line why it is not: too large, not UTF-8, not
    JSON, nested too deep, an integer too long to convert."""
    if len(body) > limit:
        raise BadRequest(TOO_LARGE, f"body of more than {limit:,} bytes")
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise BadRequest(
            BAD_REQUEST,
            f"body byte {err.start + 1} (0x{body[err.start]:02x}) is not UTF-8; send JSON in UTF-8",
        ) from None
    except json.JSONDecodeError as err:
        raise BadRequest(
            BAD_REQUEST, f"body is not JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
    except RecursionError:  # [[[[... : the parser's own depth limit
        raise BadRequest(BAD_REQUEST, "body is not a request: JSON nested too deep") from None
    except ValueError as err:  # an integer of more digits than Python converts (4300)
        raise BadRequest(BAD_REQUEST, f"body is not a request ({str(err)[:80]})") from None


def parse_texts(body: bytes) -> list[str]:
    """The texts of a request body, or ``BadRequest`` naming what is wrong and where."""
    document = parse_json(body)
    expected = 'expected {"texts": ["...", ...]} and optionally "min_score", "alternatives", "flag_missed"'
    if not isinstance(document, dict):
        raise BadRequest(BAD_REQUEST, f"body is {_kind(document)}; {expected}")
    unknown = sorted(set(document) - {"texts", *OPTIONS})
    if unknown or "texts" not in document:
        found = f"unknown key {json.dumps(unknown[0])[:60]}" if unknown else 'no "texts"'
        raise BadRequest(BAD_REQUEST, f"{found}; {expected}")
    texts = document["texts"]
    if not isinstance(texts, list):
        raise BadRequest(BAD_REQUEST, f'"texts" is {_kind(texts)}; expected an array of strings')
    if len(texts) > SERVE_MAX_TEXTS:
        raise BadRequest(TOO_LARGE, f"{len(texts):,} texts; at most {SERVE_MAX_TEXTS} in one request")
    total = 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise BadRequest(BAD_REQUEST, f'"texts"[{i}] is {_kind(text)}; expected a string')
        total += len(text)
        try:
            text.encode(
                "utf-8"
            )  # JSON's \ud800 escapes decode to lone surrogates, which no response can hold
        except UnicodeEncodeError as err:
            raise BadRequest(
                BAD_REQUEST, f'"texts"[{i}] character {err.start + 1} is a lone surrogate (not Unicode text)'
            ) from None
    if total > SERVE_MAX_CHARS:
        raise BadRequest(TOO_LARGE, f"{total:,} characters; at most {SERVE_MAX_CHARS:,} in one request")
    for name, what in OPTIONS.items():
        if name not in document:
            continue
        value = document[name]
        if what == "integer":
            good = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ALTERNATIVES
            wanted = f"an integer in [0, {MAX_ALTERNATIVES}]"
        else:
            good = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1
            wanted = "a number in [0, 1]"
        if not good:
            shown = json.dumps(value)[:40] if not isinstance(value, dict | list) else _kind(value)
            raise BadRequest(BAD_REQUEST, f'"{name}" is {shown}; expected {wanted}')
    return texts


def request_options(document: dict[str, Any]) -> dict[str, Any]:
    """The options of a request that ``parse_texts`` accepted, by name (those it leaves out are absent)."""
    return {name: document[name] for name in OPTIONS if name in document}
