"""LitServe's internals that ``serve`` uses (``ner_app/server/litserve_compat.py``) are there, and mean what the
module takes them to mean, in the installed LitServe, whose version must be in the range pyproject allows.
A LitServe that changes any of them fails here, naming the part, before a server misbehaves."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

litserve = pytest.importorskip("litserve", reason="serve needs LitServe (pip install -e '.[serve]')")

from litserve.loops import base, simple_loops  # noqa: E402

from ner_app.server import litserve_compat  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def pyproject_range() -> str:
    """The range of the ``serve`` extra (and of ``dev``, which must say the same)."""
    found = set(re.findall(r'"litserve([^"]*)"', (ROOT / "pyproject.toml").read_text()))
    assert len(found) == 1, found
    return found.pop()


def test_the_installed_litserve_is_in_the_supported_range():
    assert litserve_compat.SUPPORTED == pyproject_range()
    installed = Version(litserve.__version__)
    assert installed in SpecifierSet(litserve_compat.SUPPORTED), (
        f"litserve {installed} is outside {litserve_compat.SUPPORTED}: check ner_app/server/litserve_compat.py "
        "against it, then widen the range in pyproject.toml and in the module"
    )


def test_queue_items_are_what_the_collecting_loop_unpacks():
    """A request queue holds ``(response_queue_id, uid, timestamp, payload)`` tuples, or the sentinel that
    stops a loop (``CollectingLoop`` unpacks the one and skips the other)."""
    assert litserve_compat.SENTINEL is base._SENTINEL_VALUE == (None, None, None, None)
    assert "response_queue_id, uid, timestamp, x_enc = request_data" in inspect.getsource(base)
    assert "if request_data == _SENTINEL_VALUE:" in inspect.getsource(simple_loops)
    assert litserve_compat.BatchedLoop is simple_loops.BatchedLoop


def test_the_batched_loop_asks_for_batches_as_the_collecting_loop_answers():
    """``CollectingLoop.get_batch_requests(lit_api, request_queue, transport) -> (batch, timed_out)``."""
    params = list(inspect.signature(simple_loops.BatchedLoop.get_batch_requests).parameters)
    assert params[:4] == ["self", "lit_api", "request_queue", "transport"]
    source = inspect.getsource(simple_loops.BatchedLoop)
    assert re.search(r"batches, timed_out_uids = self\.get_batch_requests\(", source), source[:2000]


def test_run_calls_the_hooks_the_server_overrides():
    """``run()`` waits for the workers with ``verify_worker_status``, starts the HTTP processes with
    ``_start_server``, starts LitServe's watch only when ``_monitor_workers`` is set, then waits on
    ``_shutdown_event``."""
    run = inspect.getsource(litserve.LitServer.run)
    order = [
        "self.verify_worker_status()",
        "self._start_server(",
        "if self._monitor_workers:",
        "self._shutdown_event.wait()",
    ]
    places = [run.find(part) for part in order]
    assert -1 not in places and places == sorted(places), dict(zip(order, places, strict=True))
    assert "return dict(enumerate(workers))" in inspect.getsource(litserve.LitServer._start_server)
    assert "self._shutdown_event = manager.Event()" in inspect.getsource(litserve.LitServer._init_manager)


def test_the_compat_server_turns_litserve_s_watch_off_and_calls_on_listening(monkeypatch):
    api = litserve.test_examples.SimpleLitAPI()
    server = litserve_compat.CompatServer(api)
    assert server._monitor_workers is False and server._shutdown_event is None
    server.request_stop()  # before run(): nothing to stop, no error
    seen = []
    monkeypatch.setattr(litserve.LitServer, "_start_server", lambda self, *a, **k: {0: "http"})
    monkeypatch.setattr(server, "on_listening", seen.append)
    assert server._start_server(8000, 1, "warning", [], "process") == {0: "http"}
    assert seen == [{0: "http"}]


def test_worker_setup_status_names():
    assert litserve_compat.WorkerSetupStatus.READY == "ready"
    assert litserve_compat.WorkerSetupStatus.ERROR == "error"
