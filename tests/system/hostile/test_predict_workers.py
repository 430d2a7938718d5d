"""``predict --workers N``: the same bytes as one process for every format, in input order, across task
boundaries; bad N, more workers than cores, text that is not UTF-8 and a worker killed mid-run each end in one
clear line, with nothing half-written on standard output."""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ner_app.cli.commands import main
from ner_app.jobs.predict_workers import worker_count
from ner_app.predict import fork_server, workers
from ner_app.predict.predictor import Predictor
from ner_app.report.formats import FORMATS
from tests.helpers import ROOT, TINY, one_error_line

WORDS = ["Alice", "Bob", "flew", "to", "Paris", "and", "Berlin", "EU", "said", "Smith", ".", "Zürich"]


def raw_lines(count: int) -> list[str]:
    """Lines of different lengths (so that batches mix lengths), a few empty and one very long."""
    lines = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 23)) for i in range(count)]
    lines[5], lines[17] = "", " ".join(WORDS * 30)  # an empty line, and one of 360 tokens (two pieces)
    return lines


def predict_out(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["predict", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_tasks_are_whole_chunks_of_tag_lines():
    """A task of raw lines is tagged as one process tags them only if it starts where a chunk starts."""
    default = inspect.signature(Predictor.tag_lines).parameters["chunk"].default
    assert workers.TAG_CHUNK == default and workers.LINES_PER_TASK % default == 0


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_workers_write_what_one_process_writes(trained, tmp_path, capsys, fmt):
    export = str(trained / "export")
    if FORMATS[fmt].reads == "conll":
        source = tmp_path / "in.conll"
        source.write_bytes((TINY / "test.txt").read_bytes() * 40)  # thousands of sentences, many batches
    else:
        source = tmp_path / "in.txt"
        source.write_text("\n".join(raw_lines(workers.LINES_PER_TASK + 700)) + "\n", encoding="utf-8")
    common = ["--model", export, "--input", str(source), "--format", fmt, "--threads", "1"]
    if FORMATS[fmt].files is not None:  # a folder of files (brat): both write one, compared file by file
        written = []
        for name, extra in (("one", []), ("two", ["--workers", "2"])):
            code, _, _ = predict_out(capsys, *common, "--output", str(tmp_path / name), *extra)
            assert code == 0
            written.append({f.name: f.read_bytes() for f in (tmp_path / name).iterdir()})
        assert written[0] == written[1] and len(written[0]) > 1
        return
    code, one, _ = predict_out(capsys, *common)
    assert code == 0 and one
    code, two, err = predict_out(capsys, *common, "--workers", "2")
    assert code == 0 and err == ""
    assert two == one


@pytest.mark.slow
def test_workers_pass_the_reading_options_and_write_output(trained, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(raw_lines(workers.LINES_PER_TASK + 50)) + "\n", encoding="utf-8")
    common = ["--model", str(trained / "export"), "--input", str(source), "--threads", "1"]
    options = ["--min-score", "0.2", "--alternatives", "2", "--flag-missed", "0.9"]
    code, one, _ = predict_out(capsys, *common, *options)
    assert code == 0 and '"flagged"' in one
    code, out, _ = predict_out(
        capsys, *common, *options, "--workers", "2", "--output", str(tmp_path / "o.jsonl")
    )
    assert code == 0 and out == ""
    assert (tmp_path / "o.jsonl").read_text(encoding="utf-8") == one


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_bad_worker_counts_name_the_option(trained, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--model", str(trained / "export"), "--input", "-", "--workers", bad])
    assert exit_.value.code == 2
    assert "argument --workers: expected an integer >= 1" in capsys.readouterr().err


def test_more_workers_than_cores_run_one_per_core(capsys):
    assert worker_count(16, cores=2) == 2
    assert (
        "--workers 16: this machine lets predict use 2 CPU core(s); running 2 workers"
        in capsys.readouterr().err
    )
    assert worker_count(2, cores=2) == 2 and capsys.readouterr().err == ""


def test_more_workers_than_cores_still_tag(trained, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(raw_lines(50)) + "\n", encoding="utf-8")
    common = ["--model", str(trained / "export"), "--input", str(source), "--threads", "1"]
    _, one, _ = predict_out(capsys, *common)
    code, many, err = predict_out(capsys, *common, "--workers", str(workers.usable_cores() + 3))
    assert code == 0 and many == one and "CPU core(s)" in err


def test_invalid_utf8_names_the_line_and_writes_nothing(trained, tmp_path, capsys):
    source = tmp_path / "in.txt"
    good = "\n".join(raw_lines(workers.LINES_PER_TASK + 10)).encode()
    source.write_bytes(good + b"\nParis\nBer\xfflin\nok\n")  # past the first task: work is already under way
    code, out, err = predict_out(
        capsys, "--model", str(trained / "export"), "--input", str(source), "--workers", "2"
    )
    line = workers.LINES_PER_TASK + 10 + 2
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: {source}:{line}: byte 4 (0xff) is not UTF-8; convert the input to UTF-8 (e.g. iconv -f latin1 -t "
        "utf-8)"
    )


@pytest.mark.system
def test_a_bad_export_is_one_line(tmp_path, capsys):
    assert main(["predict", "--model", str(TINY / "train.txt"), "--input", "-", "--workers", "2"]) == 2
    one_error_line(capsys, "not a folder")


def _descendants(pid: int) -> dict[int, int]:
    """Every process below ``pid``, with its depth (1: a child)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found: dict[int, int] = {}
    frontier, depth = [pid], 0
    while frontier:
        depth += 1
        frontier = [p for p, parent in parents.items() if parent in frontier]
        found.update((p, depth) for p in frontier)
    return found


def _workers_process(trained, **popen) -> subprocess.Popen:
    """``predict --workers 2`` of the trained export on standard input, its three streams piped."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "ner_app", "predict", "--model", str(trained / "export"), "--input", "-"]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen([*command, "--workers", "2"], env=env, **pipes, **popen)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the workers in /proc")
def test_a_killed_worker_ends_the_command_in_one_line(trained, tmp_path):
    """SIGKILL to a worker while the input is still coming: one line, exit 2, nothing on standard output."""
    process = _workers_process(trained)
    assert process.stdin is not None
    try:
        process.stdin.write(("\n".join(raw_lines(workers.LINES_PER_TASK + 5)) + "\n").encode())
        process.stdin.flush()
        deadline, victims = time.monotonic() + 120, []
        while time.monotonic() < deadline and len(victims) < 2:  # the forkserver's children: the workers
            victims = [p for p, depth in _descendants(process.pid).items() if depth == 2]
            time.sleep(0.2)
        assert len(victims) == 2, "the workers never started"
        os.kill(victims[0], signal.SIGKILL)
        process.stdin.write(b"more text\n" * 100)
    except BrokenPipeError:  # the command already ended: its answer is checked below
        pass
    stdin, process.stdin = process.stdin, None  # communicate only reads: the input ends here
    with contextlib.suppress(BrokenPipeError):
        stdin.close()
    out, err = process.communicate(timeout=120)
    lines = err.decode().strip().splitlines()
    assert process.returncode == 2, err
    assert out == b""
    # The cause is told when the dead worker is still found (the pool may have reaped it already: then the
    # survivors' exit code is what is left to tell).
    assert len(lines) == 1 and re.fullmatch(
        r"error: --workers: a worker process ended before its work was done"
        r"( \((ended by signal 9|exit code -?\d+)\))?; nothing was written",
        lines[0],
    ), lines


def test_workers_share_the_model_the_fork_server_loaded(trained):
    """The fork server loads the export once; every worker is a fork of it and uses that model."""
    fork_server.stop_fork_server()  # a server left by another user of forkserver in this process
    with workers.WorkerPool(2, str(trained / "export")) as pool:
        models = list(pool.ordered(workers._describe, [None] * 4))
        assert len(pool.pids()) == 2
    assert all(model.shared for model in models)
    default = inspect.signature(Predictor.__init__).parameters["batch_size"].default
    assert {model.batch_size for model in models} == {default}  # None: the predictor's own default
    with workers.WorkerPool(2, str(trained / "export"), batch_size=7, max_tokens=300) as pool:
        model = pool.describe()
    assert model.shared and (model.batch_size, model.max_tokens) == (7, 300)


def test_workers_load_their_own_model_when_the_server_holds_another(trained, tmp_path, capsys):
    """A fork server that is already running with another export is kept: the workers load theirs."""
    export = str(trained / "export")
    fork_server.stop_fork_server()
    fork_server.start_fork_server(fork_server.model_request(export, "cpu", 7, None))
    lines = raw_lines(workers.LINES_PER_TASK + 30)
    with workers.WorkerPool(2, export) as pool:
        assert not pool.describe().shared
        tagged = list(pool.tag_text(lines))
    assert tagged == list(Predictor.from_export(export).tag_lines(lines))


def test_the_main_process_does_not_import_torch(trained, tmp_path):
    """The main process only reads, orders and writes: torch is imported and the model loaded in the fork
    server, once."""
    source = tmp_path / "in.txt"
    source.write_text("\n".join(raw_lines(20)) + "\n", encoding="utf-8")
    code = (
        "import sys\nfrom ner_app.cli.commands import main\n"
        f"code = main(['predict', '--model', {str(trained / 'export')!r}, '--input', {str(source)!r}, "
        "'--workers', '2', '--output', sys.argv[1]])\n"
        "print(code, 'torch' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "out.jsonl")], capture_output=True, text=True, env=env
    )
    assert done.stdout.split() == ["0", "False"], done.stderr
    assert len((tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 20


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the processes in /proc")
@pytest.mark.parametrize("when", ["starting", "tagging"])
def test_ctrl_c_ends_the_command_in_one_line(trained, when):
    """Ctrl-C reaches the whole process group (the main process, the fork server, the workers), while the
    server still loads the model or while the workers tag: one line, exit 130, no traceback, nothing written."""
    process = _workers_process(
        trained,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdin is not None
    depth, count = (
        (1, 2) if when == "starting" else (2, 2)
    )  # the resource tracker and the server; the workers
    try:
        process.stdin.write(("\n".join(raw_lines(workers.LINES_PER_TASK * 3)) + "\n").encode())
        process.stdin.flush()
        deadline, found = time.monotonic() + 120, []
        while time.monotonic() < deadline and len(found) < count:
            found = [p for p, d in _descendants(process.pid).items() if d == depth]
            time.sleep(0.01)
        assert len(found) >= count, "the processes never started"
        os.killpg(process.pid, signal.SIGINT)
    except BrokenPipeError:
        pass
    stdin, process.stdin = process.stdin, None
    with contextlib.suppress(BrokenPipeError):
        stdin.close()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert out == b""
    assert err.decode().strip().splitlines() == [
        "interrupted by Ctrl-C before the command finished; files it was writing were removed"
    ]
