"""``python -m ner_app download-elmo NAME --output DIR``: the public AllenNLP ELMo files, resumable and checked.

Each file streams into ``DIR/<name>.part`` (an interrupted download continues there with an HTTP Range request,
in this run or the next) and takes its final name by an atomic rename only after every check passed:

- size: the server's declared length, and the published size where one is known;
- checksum: the published SHA-256 where one is known; otherwise the server's ETag when it is an MD5 (Amazon S3,
  which serves these files, gives a single-part upload's MD5 as its ETag);
- structure: options.json must parse (``read_options``) and describe the published architecture; the weights
  must fill that biLM dataset by dataset (``load_bilm``: every shape, dtype and value) with the published
  parameter count.

The models, their published architectures and the structure checks are in ``elmo_models.py``; no size or
checksum of them is published that we found (docs/serving.md).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ner_app.bilm.elmo_models import MODELS, ElmoModel, PublishedFile, check_options, check_weights
from ner_app.errors import NerAppError
from ner_app.records import sha256_file

if TYPE_CHECKING:  # imported where a download runs: every command's parser reads MODELS (60 ms less)
    from urllib.error import URLError

DEFAULT_BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
CHUNK = 1 << 20  # bytes per read
ATTEMPTS = 3  # connections per file in one run before giving up (the .part stays for the next run)
TIMEOUT_S = 60  # a silent connection this long counts as lost
MIN_RATE = 16 * 1024  # bytes/s a connection must average once GRACE_S have passed (a trickle is a lost one)
GRACE_S = 30.0


class _Interrupted(Exception):
    """The connection ended before the whole file came."""


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _unreachable(url: str, err: URLError | OSError) -> NerAppError:
    """One line for an offline machine, a failed DNS lookup, a refused or a timed-out connection."""
    from urllib.error import URLError

    reason = err.reason if isinstance(err, URLError) else err
    host = urlsplit(url).netloc
    if isinstance(reason, socket.gaierror):
        what = f"cannot resolve host {urlsplit(url).hostname} (offline, or no DNS)"
    elif isinstance(reason, ConnectionRefusedError):
        what = f"connection refused by {host}"
    elif isinstance(reason, TimeoutError | socket.timeout):
        what = f"no answer from {host} within {TIMEOUT_S} s"
    else:
        what = f"cannot connect to {host} ({reason})"
    return NerAppError(f"{url}: {what}; check the network, or give a reachable mirror with --base-url")


def _http_advice(code: int) -> str:
    """What to do about an HTTP error status, in words."""
    if code == 404:
        return "the server has no such file: check --base-url (it must hold FOLDER/FILE as the address shows)"
    if code in (401, 403):
        return "the server refuses access to it: use a mirror that serves it with --base-url"
    if code == 429 or code >= 500:
        return (
            "the server is failing or busy: run the same command again later, or use a mirror with --base-url"
        )
    return "the server refused the request: check --base-url"


def _content_range_total(value: str | None) -> int | None:
    match = re.fullmatch(r"bytes (?:\d+-\d+|\*)/(\d+)", (value or "").strip())
    return int(match.group(1)) if match else None


def _too_large(url: str, part: Path, size: int, limit: int, how: str) -> NerAppError:
    part.unlink(missing_ok=True)
    return NerAppError(
        f"{url}: {how} {size:,} bytes, more than the {limit:,} this file can be; refused (nothing kept)"
    )


def _open_part(part: Path, append: bool) -> int:
    """The ``.part`` file's descriptor: a regular file inside the output folder, never a link followed out."""
    if part.is_symlink() or (part.exists() and not part.is_file()):
        raise NerAppError(
            f"{part}: not a regular file (a symlink or a special file); remove it and run again"
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_APPEND if append else os.O_TRUNC)
    return os.open(part, flags, 0o644)


def _fetch_once(url: str, part: Path, limit: int) -> tuple[int | None, str | None]:
    """Append the rest of ``url`` to ``part`` (at most ``limit`` bytes in all, at least ``MIN_RATE`` bytes/s
    once ``GRACE_S`` have passed); returns (the file's full size if declared, the ETag)."""
    import http.client
    from urllib.error import HTTPError, URLError
    from urllib.request import Request, urlopen

    from ner_app.progress import progress_bar

    if part.is_symlink() or (part.exists() and not part.is_file()):
        raise NerAppError(
            f"{part}: not a regular file (a symlink or a special file); remove it and run again"
        )
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "ner_app-download-elmo", "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        response = urlopen(Request(url, headers=headers), timeout=TIMEOUT_S)
    except HTTPError as err:
        total = _content_range_total(err.headers.get("Content-Range"))
        if err.code == 416 and have and total == have:  # the .part already holds the whole file
            return total, err.headers.get("ETag")
        if err.code == 416 and have:  # a .part longer than the file: start over
            part.unlink()
            return _fetch_once(url, part, limit)
        raise NerAppError(f"{url}: HTTP {err.code} {err.reason}; {_http_advice(err.code)}") from None
    except (URLError, OSError) as err:
        raise _unreachable(url, err) from None
    with response:
        etag = response.headers.get("ETag")
        if response.status == 206:
            start = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
            if start is None or int(start.group(1)) != have:  # not the range asked for: start over
                part.unlink()
                return _fetch_once(url, part, limit)
            total = _content_range_total(response.headers.get("Content-Range"))
        else:  # 200: the whole file (a server without Range support), so the .part starts over
            have = 0
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        if total is not None and total > limit:
            raise _too_large(url, part, total, limit, "the server announces")
        if have:
            _say(f"{part.name}: resuming at byte {have:,}")
        bar = progress_bar(total, part.name[: -len(".part")], unit="B")
        bar.update(have)
        start_time, received = time.monotonic(), 0
        try:
            with os.fdopen(_open_part(part, bool(have)), "ab" if have else "wb") as out:
                # read1: whatever has arrived, so that a trickling server cannot hold one read for ever
                while chunk := response.read1(CHUNK):
                    received += len(chunk)
                    if have + received > limit:
                        raise _too_large(url, part, have + received, limit, "the server sent more than")
                    out.write(chunk)
                    bar.update(len(chunk))
                    elapsed = time.monotonic() - start_time
                    if elapsed > GRACE_S and received / elapsed < MIN_RATE:
                        raise _Interrupted(f"slower than {MIN_RATE // 1024} KiB/s after {elapsed:.0f} s")
        except (http.client.HTTPException, ConnectionError, TimeoutError) as err:
            raise _Interrupted(str(err) or type(err).__name__) from None
        finally:
            bar.close()
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Interrupted(f"{size:,} of {total:,} bytes")
    return total, etag


def _verify(url: str, part: Path, file: PublishedFile, total: int | None, etag: str | None) -> str:
    """Size and checksum of a finished ``part``; returns what was checked. A failure removes it."""
    size, problem, checked = part.stat().st_size, "", []
    for expected, source in ((total, "the server's Content-Length"), (file.size, "the published size")):
        if expected is not None:
            checked.append(f"size ({source})")
            problem = problem or (
                f"{size:,} bytes, expected {expected:,} from {source}" if size != expected else ""
            )
    tag = (etag or "").strip('"')
    if file.sha256:
        found, checked = sha256_file(part, "sha256"), [*checked, "published SHA-256"]
        problem = problem or (f"SHA-256 {found}, expected {file.sha256}" if found != file.sha256 else "")
    elif re.fullmatch(r"[0-9a-f]{32}", tag):
        found, checked = sha256_file(part, "md5"), [*checked, "MD5 (the server's ETag)"]
        problem = problem or (f"MD5 {found}, expected {tag} from the server's ETag" if found != tag else "")
    if problem:
        part.unlink()
        raise NerAppError(f"{url}: the download does not match: {problem}; removed it, run the command again")
    return ", ".join(checked) or "nothing (the server gave no size)"


def fetch(url: str, dest: Path, file: PublishedFile, limit: int) -> str:
    """Download ``url`` into ``dest.part`` (resuming), at most ``limit`` bytes; check size and checksum;
    returns what was checked. The caller renames the .part into place once the content checks passed too."""
    part = dest.with_name(dest.name + ".part")
    for attempt in range(1, ATTEMPTS + 1):
        try:
            total, etag = _fetch_once(url, part, limit)
            return _verify(url, part, file, total, etag)
        except _Interrupted as err:
            if attempt == ATTEMPTS:
                raise NerAppError(
                    f"{url}: the download stopped {ATTEMPTS} times, each time resumed (last: {err}); {part} keeps "
                    "what came, run the same command again to resume"
                ) from None
            _say(f"{url}: connection lost ({err}); resuming")
            time.sleep(attempt - 1)
    raise AssertionError("unreachable")


def _place(url: str, part: Path, dest: Path, check: Callable[[], object]) -> None:
    """Rename ``part`` to ``dest`` if ``check`` (of the part's content) passes; otherwise remove the part. The
    error names the address the content came from, not the ``.part`` file, which is gone."""
    try:
        check()
    except NerAppError as err:
        part.unlink()
        problem = str(err).removeprefix(str(part)).lstrip(": ")
        raise NerAppError(
            f"{url}: what the server sent is not the file expected ({problem}); the download was refused and "
            "removed: check --base-url"
        ) from None
    os.replace(part, dest)


def download_elmo(name: str, output: str | Path, base_url: str = DEFAULT_BASE_URL) -> tuple[Path, Path]:
    """Fetch and check the options and weights of ELMo ``name`` into ``output``; returns both paths."""
    if name not in MODELS:
        raise NerAppError(f"unknown ELMo model {name!r}; expected one of {', '.join(MODELS)}")
    if urlsplit(base_url).scheme not in ("http", "https"):
        raise NerAppError(f"--base-url {base_url}: expected an http:// or https:// address")
    model, folder = MODELS[name], Path(output)
    if str(output) == "-":
        raise NerAppError("--output -: the download is a folder of two files, and standard output is not one")
    if folder.exists() and not folder.is_dir():
        raise NerAppError(f"--output {folder}: is a file, expected a folder")
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return _download_into(folder, model, name, base_url)
    except BaseException:
        for made in created:  # a failed first download leaves no empty folders behind (a .part stays)
            try:
                made.rmdir()
            except OSError:
                break  # not empty: it keeps a part to resume from, or something else appeared
        raise


def _download_into(folder: Path, model: ElmoModel, name: str, base_url: str) -> tuple[Path, Path]:
    options_path, weights_path = folder / model.options.name, folder / model.weights.name
    for file, dest in ((model.options, options_path), (model.weights, weights_path)):
        if dest.exists():
            _say(f"{dest}: already downloaded; checking it")
            try:
                if file is model.options:
                    check_options(dest, model, name)
                else:
                    check_weights(options_path, dest, model, name)
            except NerAppError as err:
                raise NerAppError(f"{err} (delete it to download it again)") from None
            continue
        url = model.url(base_url, file)
        _say(f"{url} -> {dest}")
        checked = fetch(url, dest, file, model.max_bytes(file))
        part = dest.with_name(dest.name + ".part")
        if file is model.options:
            _place(url, part, dest, partial(check_options, part, model, name))
        else:
            _place(url, part, dest, partial(check_weights, options_path, part, model, name))
        _say(f"{dest}: checked {checked}, and its content")
    return options_path.resolve(), weights_path.resolve()
