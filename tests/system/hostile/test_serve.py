"""Hostile and careless arguments to ``serve``: a bad port, a port in use, a model that is not an export, a
host other machines could reach, LitServe missing: each is one ``error:`` line (or argparse's) with exit code
2, and nothing is left listening or running. Hostile requests: tests/serve/test_server.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

import ner_app.serve
from ner_app.cli.commands import main
from tests.helpers import ROOT, TINY, one_error_line

pytest.importorskip("litserve", reason="serve needs LitServe (pip install -e '.[serve]')")


@pytest.mark.parametrize("port", ["0", "80", "1023", "65536", "http", "8000.5"])
def test_bad_port_names_the_option(tmp_path, capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--model", str(tmp_path), "--port", port])
    assert exit_.value.code == 2
    assert "argument --port: expected a port number in [1024, 65535]" in capsys.readouterr().err


def test_port_in_use_is_one_line(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--model", str(tmp_path), "--port", str(port)]) == 2
    one_error_line(capsys, f"--port {port}: cannot listen on 127.0.0.1:{port}", "choose another port")


@pytest.mark.parametrize(
    ("host", "extra", "parts"),
    [
        ("0.0.0.0", [], ["--host 0.0.0.0 is not a loopback address", "--allow-remote"]),
        ("::", [], ["--host :: is not a loopback address", "no authentication and no TLS"]),
        ("192.168.1.7", [], ["not a loopback address"]),
        ("example.com", [], ["not a loopback address"]),
        ("192.168.1.7", ["--allow-remote"], ["listens on 127.0.0.1, 0.0.0.0 (all IPv4 interfaces) or ::"]),
        ("127.0.0.2", [], ["LitServe listens on 127.0.0.1 for loopback"]),
    ],
)
def test_host_other_machines_reach_is_refused_without_allow_remote(tmp_path, capsys, host, extra, parts):
    assert main(["serve", "--model", str(tmp_path), "--host", host, *extra]) == 2
    one_error_line(capsys, *parts)


def test_model_that_is_a_file_is_one_line(capsys):
    assert main(["serve", "--model", str(TINY / "train.txt")]) == 2
    one_error_line(capsys, "train.txt: not a folder (expected an export directory)")


def test_model_folder_that_is_not_an_export_stops_the_server_in_one_line(tmp_path):
    """The worker that loads the model reports its error; the supervisor prints it and stops everything."""
    port = _free_port()
    done = subprocess.run([sys.executable, "-m", "ner_app", "serve", "--model", str(tmp_path), "--port", str(port),
                           "--threads", "1"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: {tmp_path}: not a ner_app export (missing tagger.json)"
    assert done.stdout == ""
    with socket.socket() as probe:  # the port is free again
        probe.bind(("127.0.0.1", port))


def test_without_litserve_serve_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "litserve", None)  # what an installation without the extra has
    monkeypatch.delitem(sys.modules, "ner_app.serve.server", raising=False)
    monkeypatch.delattr(ner_app.serve, "server", raising=False)  # so that the import runs again
    assert main(["serve", "--model", str(tmp_path)]) == 2
    one_error_line(capsys, "serve needs LitServe", "pip install 'ner_app[serve]'")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
