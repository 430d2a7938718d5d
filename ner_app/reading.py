"""The one bounded JSON read and the one file digest.

Every JSON file a user could hand over (a ``tagger.json``, an ``options.json``, a metrics file, an annotation
export) is read by ``read_json``: within a byte bound and a nesting bound, so a forged or endless file is one
error naming it. Checksums of files and of JSON values come from here too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

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
