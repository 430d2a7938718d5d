"""``download-elmo`` against a real HTTP server on 127.0.0.1 (Range requests, S3-style ETags) serving a biLM of
the published "small" architecture with random weights: a good download, corrupted files refused, a cut
connection resumed (in the same run and in the next), and a closed port."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ner_app.bilm import download, elmo_models
from ner_app.bilm.options import BilmOptions
from ner_app.bilm.weights import save_bilm
from ner_app.cli.commands import main
from tests.helpers import TINY_OPTIONS

pytestmark = pytest.mark.system  # starts local HTTP servers, some slow on purpose: out of the fast lane

SMALL = elmo_models.MODELS["small"]
OPTIONS_URL_PATH = f"/elmo/{SMALL.folder}/{SMALL.options.name}"
WEIGHTS_URL_PATH = f"/elmo/{SMALL.folder}/{SMALL.weights.name}"
# The published small ELMo's shape (allennlp.org/elmo: 1024/128, 1 highway layer, 13.6M parameters).
SMALL_OPTIONS = BilmOptions(
    char_dim=16,
    filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)),
    n_highway=1,
    activation="relu",
    lstm_dim=1024,
    projection_dim=128,
    n_layers=2,
    cell_clip=3.0,
    proj_clip=3.0,
    use_skip_connections=True,
)


class Site:
    """What the server serves: bytes per path, the ETag it announces, and connections it cuts."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.etags = {path: f'"{hashlib.md5(data).hexdigest()}"' for path, data in files.items()}
        self.cuts: dict[str, list[int]] = {}  # path -> bytes to send before dropping, one entry per request
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.hostile: dict[str, str] = {}  # path -> "endless", "huge" or "trickle"
        self.shift: dict[str, int] = {}  # path -> bytes a Range answer is off by (its header still says N-)


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep the test output clean
            pass

        def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
            site.requests.append((self.path, self.headers.get("Range")))
            if self.path in site.hostile:
                self.misbehave(site.hostile[self.path])
                return
            data = site.files.get(self.path)
            if data is None:
                self.send_error(404)
                return
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            start = int(match.group(1)) if match else 0
            if start >= len(data) and match:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206 if match else 200)
            if match:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            if site.etags.get(self.path):
                self.send_header("ETag", site.etags[self.path])
            self.end_headers()
            cuts = site.cuts.get(self.path)
            begin = start + (site.shift.get(self.path, 0) if match else 0)
            body = data[begin : begin + cuts.pop(0)] if cuts else data[begin:]
            if begin != start and not cuts:  # shifted: still as many bytes as announced
                body = body.ljust(len(data) - start, b"\0")
            self.wfile.write(body)
            self.wfile.flush()
            if len(body) < len(data) - start:  # drop the connection mid-file
                self.connection.shutdown(socket.SHUT_RDWR)

        def misbehave(self, mode: str) -> None:
            """endless: no length, bytes for ever; huge: announces 1 TB; trickle: one byte at a time."""
            self.send_response(200)
            if mode == "huge":
                self.send_header("Content-Length", str(10**12))
            self.end_headers()
            try:
                for _ in range(10**6):
                    self.wfile.write(b"[" * 65536 if mode != "trickle" else b"[")
                    self.wfile.flush()
                    if mode == "trickle":
                        threading.Event().wait(0.05)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
                pass

    return Handler


@pytest.fixture(scope="module")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    options, weights = save_bilm(SMALL_OPTIONS.build(), tmp_path_factory.mktemp("small"))
    return {OPTIONS_URL_PATH: options.read_bytes(), WEIGHTS_URL_PATH: weights.read_bytes()}


@pytest.fixture
def site(small_files: dict[str, bytes]) -> Iterator[tuple[Site, str]]:
    """A served copy of the small files and the base URL to give to --base-url."""
    served = Site(small_files)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(served))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}/elmo"
    server.shutdown()
    server.server_close()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["download-elmo", "small", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_good_download_prints_the_overrides(site, tmp_path: Path, capsys) -> None:
    served, base = site
    code, out, err = run(capsys, "--output", str(tmp_path / "elmo"), "--base-url", base)
    assert code == 0, err
    options, weights = tmp_path / "elmo" / SMALL.options.name, tmp_path / "elmo" / SMALL.weights.name
    assert out.splitlines() == [f"elmo.options={options}", f"elmo.weights={weights}"]
    assert options.read_bytes() == served.files[OPTIONS_URL_PATH]
    assert weights.read_bytes() == served.files[WEIGHTS_URL_PATH]
    assert sorted(p.name for p in (tmp_path / "elmo").iterdir()) == sorted([options.name, weights.name])
    assert "MD5 (the server's ETag)" in err and "\r" not in err
    assert len([line for line in err.splitlines() if "% (" in line]) <= 2 * 10  # at most one line per 10%
    # a second run finds both files, checks them, and asks the server for nothing
    before = len(served.requests)
    code, out2, err = run(capsys, "--output", str(tmp_path / "elmo"), "--base-url", base)
    assert code == 0 and out2 == out and len(served.requests) == before and "already downloaded" in err


def test_corrupted_weights_are_refused_and_removed(site, tmp_path: Path, capsys) -> None:
    served, base = site
    good = served.files[WEIGHTS_URL_PATH]
    middle = len(good) // 2
    served.files[WEIGHTS_URL_PATH] = good[:middle] + bytes([good[middle] ^ 0xFF]) + good[middle + 1 :]
    code, out, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    assert code == 2 and out == ""
    assert re.search(
        r"^error: http://\S+_weights\.hdf5: the download does not match: MD5 [0-9a-f]{32}, expected "
        r"[0-9a-f]{32} from the server's ETag; removed it",
        err,
        re.M,
    )
    assert not (tmp_path / SMALL.weights.name).exists() and not list(tmp_path.glob("*.part"))


def test_published_checksum_and_structure(site, tmp_path: Path, capsys, monkeypatch) -> None:
    served, base = site
    good = served.files[WEIGHTS_URL_PATH]
    # A published SHA-256 and size (here those of the served file) are checked instead of the ETag.
    published = dataclasses.replace(SMALL.weights, size=len(good), sha256=hashlib.sha256(good).hexdigest())
    monkeypatch.setitem(elmo_models.MODELS, "small", dataclasses.replace(SMALL, weights=published))
    served.etags[WEIGHTS_URL_PATH] = ""  # no ETag: the published SHA-256 alone must catch the bad byte
    served.files[WEIGHTS_URL_PATH] = good[:-1] + bytes([good[-1] ^ 1])
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    assert code == 2 and "SHA-256" in err and not (tmp_path / SMALL.weights.name).exists()
    served.files[WEIGHTS_URL_PATH] = good
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    assert code == 0 and "the published size), published SHA-256" in err
    # options.json of another architecture, served intact, fails the structure check and is not kept
    tiny_options, _ = save_bilm(TINY_OPTIONS.build(), tmp_path / "tiny")
    served.files[OPTIONS_URL_PATH] = tiny_options.read_bytes()
    served.etags[OPTIONS_URL_PATH] = f'"{hashlib.md5(served.files[OPTIONS_URL_PATH]).hexdigest()}"'
    code, _, err = run(capsys, "--output", str(tmp_path / "other"), "--base-url", base)
    assert code == 2 and "not the small ELMo" in err and "refused and removed" in err
    assert not (tmp_path / "other").exists()  # refused, removed, and the folder it made went too


def test_cut_connection_resumes(site, tmp_path: Path, capsys) -> None:
    served, base = site
    size = len(served.files[WEIGHTS_URL_PATH])
    served.cuts[WEIGHTS_URL_PATH] = [size // 3]  # the first connection breaks after a third
    code, _, err = run(capsys, "--output", str(tmp_path / "a"), "--base-url", base)
    assert code == 0, err
    ranges = [r for path, r in served.requests if path == WEIGHTS_URL_PATH]
    assert ranges == [None, f"bytes={size // 3}-"] and f"resuming at byte {size // 3:,}" in err
    assert (tmp_path / "a" / SMALL.weights.name).read_bytes() == served.files[WEIGHTS_URL_PATH]
    # Every connection of a run breaks: the .part keeps what came, and the next run continues from there.
    served.requests.clear()
    served.cuts[WEIGHTS_URL_PATH] = [1000, 1000, 1000]
    code, _, err = run(capsys, "--output", str(tmp_path / "b"), "--base-url", base)
    assert code == 2 and "run the same command again to resume" in err
    part = tmp_path / "b" / (SMALL.weights.name + ".part")
    assert part.stat().st_size == 3000 and not (tmp_path / "b" / SMALL.weights.name).exists()
    code, _, err = run(capsys, "--output", str(tmp_path / "b"), "--base-url", base)
    assert code == 0, err
    assert [r for p, r in served.requests if p == WEIGHTS_URL_PATH][-1] == "bytes=3000-"
    assert (tmp_path / "b" / SMALL.weights.name).read_bytes() == served.files[WEIGHTS_URL_PATH]
    assert not part.exists()


def test_closed_port_is_one_clear_line(tmp_path: Path, capsys) -> None:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, out, err = run(capsys, "--output", str(tmp_path), "--base-url", f"http://127.0.0.1:{port}/elmo")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and out == "" and len(errors) == 1
    assert f"connection refused by 127.0.0.1:{port}; check the network" in errors[0]
    assert list(tmp_path.iterdir()) == []
    # a folder the failed command made (and its new parents) goes again; one that was there stays
    code, _, _ = run(
        capsys, "--output", str(tmp_path / "new" / "elmo"), "--base-url", f"http://127.0.0.1:{port}/e"
    )
    assert code == 2 and list(tmp_path.iterdir()) == []


# -------------------------------------------------------------------------------- every download is bounded
@pytest.mark.parametrize("mode", ["endless", "huge"])
def test_a_response_larger_than_the_file_can_be_is_cut_and_removed(
    site, tmp_path: Path, capsys, mode
) -> None:
    served, base = site
    path = OPTIONS_URL_PATH if mode == "endless" else WEIGHTS_URL_PATH
    served.hostile[path] = mode
    code, out, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    limit = SMALL.max_bytes(SMALL.options if mode == "endless" else SMALL.weights)
    assert code == 2 and out == "" and len(errors) == 1 and "this file can be; refused" in errors[0]
    assert ("announces 1,000,000,000,000 bytes" if mode == "huge" else "sent more than") in errors[0]
    assert f"{limit:,} this file" in errors[0]
    name = SMALL.options.name if mode == "endless" else SMALL.weights.name
    assert not (tmp_path / name).exists() and not (tmp_path / (name + ".part")).exists()
    assert sum(f.stat().st_size for f in tmp_path.iterdir()) < 1 << 20  # the options, at most


def test_a_trickling_server_is_given_up(site, tmp_path: Path, capsys, monkeypatch) -> None:
    served, base = site
    served.hostile[OPTIONS_URL_PATH] = "trickle"
    monkeypatch.setattr(download, "GRACE_S", 0.5)  # 30 s in use; the rule is the same
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    assert code == 2 and "slower than 16 KiB/s" in err and "run the same command again to resume" in err


def test_a_part_file_that_is_a_link_is_not_followed(site, tmp_path: Path, capsys) -> None:
    _, base = site
    outside = tmp_path / "outside.txt"
    outside.write_text("not the download's")
    folder = tmp_path / "elmo"
    folder.mkdir()
    (folder / (SMALL.options.name + ".part")).symlink_to(outside)
    code, _, err = run(capsys, "--output", str(folder), "--base-url", base)
    assert (
        code == 2 and "not a regular file (a symlink" in err and outside.read_text() == "not the download's"
    )


def test_a_deeply_nested_options_file_is_one_line(site, tmp_path: Path, capsys) -> None:
    served, base = site
    served.files[OPTIONS_URL_PATH] = b"[" * 30_000 + b"]" * 30_000  # 60 KB: within the size cap
    served.etags[OPTIONS_URL_PATH] = ""
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert (
        code == 2
        and len(errors) == 1
        and "nested deeper than" in errors[0]
        and "refused and removed" in errors[0]
    )


def test_a_resumed_range_the_server_shifts_is_refused_and_the_next_run_recovers(site, tmp_path: Path, capsys):
    """The server answers "bytes N-" with bytes from elsewhere: the .part is whole in size but corrupt; the
    content check refuses it in one line and removes it, so the next run does not trip on it again."""
    served, base = site
    served.etags[WEIGHTS_URL_PATH] = ""  # no checksum: only the content check can tell
    size = len(served.files[WEIGHTS_URL_PATH])
    served.cuts[WEIGHTS_URL_PATH] = [size // 2]
    served.shift[WEIGHTS_URL_PATH] = 4096
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "refused and removed" in errors[0]
    assert not list(tmp_path.glob("*.part")) and not (tmp_path / SMALL.weights.name).exists()
    served.shift.clear()
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    assert code == 0, err
    assert (tmp_path / SMALL.weights.name).read_bytes() == served.files[WEIGHTS_URL_PATH]


def test_http_errors_and_wrong_content_say_what_to_do(site, tmp_path: Path, capsys) -> None:
    """An HTTP status alone ("HTTP 404 Not Found") said nothing of what to change; content that is not the file
    (a login page served as options.json) named a removed ``.part`` file instead of the address."""
    served, base = site
    code, _, err = run(capsys, "--output", str(tmp_path / "a"), "--base-url", base + "/wrong")
    line = one_error_line_of(err)
    assert code == 2 and "HTTP 404 Not Found; the server has no such file: check --base-url" in line
    served.files[OPTIONS_URL_PATH] = b"<!doctype html><title>Sign in</title>"
    served.etags[OPTIONS_URL_PATH] = ""
    code, _, err = run(capsys, "--output", str(tmp_path / "b"), "--base-url", base)
    line = one_error_line_of(err)
    assert code == 2 and line.startswith(
        f"error: {base}{OPTIONS_URL_PATH.removeprefix('/elmo')}: what the server sent"
    )
    assert "the download was refused and removed: check --base-url" in line and ".part" not in line
    assert not (tmp_path / "b").exists() or not list((tmp_path / "b").iterdir())


def test_a_slow_server_is_not_called_a_broken_connection(site, tmp_path: Path, capsys, monkeypatch) -> None:
    served, base = site
    served.hostile[OPTIONS_URL_PATH] = "trickle"
    monkeypatch.setattr(download, "GRACE_S", 0.5)
    code, _, err = run(capsys, "--output", str(tmp_path), "--base-url", base)
    line = one_error_line_of(err)
    assert code == 2 and "the download stopped 3 times, each time resumed (last: slower than 16 KiB/s" in line
    assert "connection broke" not in line


def test_output_dash_is_refused_in_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """``-`` means standard output wherever an output path is taken; a folder output cannot be one."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--output", "-", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "--output -: the download is a folder" in one_error_line_of(err)
    assert list(tmp_path.iterdir()) == []


def one_error_line_of(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]
