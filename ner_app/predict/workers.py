"""``predict --workers N``: N worker processes sharing one loaded export, tagging a large input in input
order with the same results as one process.

Raw text lines go out in tasks of ``LINES_PER_TASK`` lines, a multiple of ``Predictor.tag_lines``'s chunk, so
that a worker batches exactly the sentences one process would batch together: the records are the same, to the
last digit of every score. CoNLL sentences are batched as ``Predictor.tag`` batches the whole file
(``budget_batches``, by length), and whole batches go out, so each batch is again the one a single process runs.

Workers are started with ``forkserver``: a clean single-threaded server process imports torch and loads the
export once (``worker_preload.py``, with one torch thread) and forks the workers from it, so the imports and
the load are paid once, not once per worker, the weights are shared copy-on-write, and no thread, lock or open
file of the main process is copied into them (``fork`` of the main process would copy torch's thread pool
state). A worker that dies (killed, out of memory) breaks the pool: the next result raises ``WorkerDied``,
one line.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

from ner_app.errors import NerAppError, raise_if_stopped
from ner_app.predict.fork_server import (
    load_predictor,
    model_request,
    request_model,
    start_fork_server,
    stop_fork_server,
)
from ner_app.predict.loading import model_kind
from ner_app.text.batching import budget_batches
from ner_app.text.pieces import Tagged, join_pieces, split_pieces
from ner_app.text.predictions import TaggedLine
from ner_app.text.readings import ReadingOptions
from ner_app.text.tags import convert

TAG_CHUNK = 512  # Predictor.tag_lines's default chunk (a test keeps the two equal)
LINES_PER_TASK = TAG_CHUNK  # raw lines a worker tags at a time: a multiple of TAG_CHUNK, so batches match;
# small, so that the last tasks end close together (the pickling per task is a small part of its tagging)
GROUPS_PER_TASK = 8  # CoNLL: batches a worker runs at a time
TASKS_AHEAD = 4  # tasks in flight per worker: enough to keep each busy, few enough to bound memory

T = TypeVar("T")
R = TypeVar("R")


class WorkerDied(NerAppError):
    """A worker process ended before its work was done (killed, out of memory)."""


@dataclass(frozen=True)
class WorkerModel:
    """What the main process needs of the model the workers loaded: its tags, schemes, batch budget, and
    whether its biLM reads whole documents."""

    tags: tuple[str, ...]
    scheme: str
    source_scheme: str
    batch_size: int
    max_tokens: int | None
    document_context: bool
    shared: bool  # whether the worker uses the fork server's loaded export (False: it loaded its own)


# ------------------------------------------------------------------ inside a worker
_predictor: Any = None
_load_error: NerAppError | None = None
_shared = False


def _load(request: str, threads: int) -> None:
    """The worker's initializer: torch with ``threads`` threads and the export of ``request``: the fork
    server's (already loaded, shared) when it loaded the same, else loaded here. A user's mistake (a bad
    export) is kept and raised by the first task, so that the main process reports it in one line."""
    global _predictor, _load_error, _shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to report (worker_preload.py)
    if model_kind(request_model(request)) == "torch":  # an ONNX folder's threads are its sessions'
        import torch

        torch.set_num_threads(threads)
    from ner_app.predict import worker_preload

    if worker_preload.loaded is not None and worker_preload.loaded[0] == request:
        _predictor, _shared = worker_preload.loaded[1], True
        return
    try:
        _predictor = load_predictor(request, threads)
    except NerAppError as err:
        _load_error = NerAppError(str(err))  # the base class: any subclass's message, and it always pickles


def _loaded() -> Any:
    if _load_error is not None:
        raise _load_error
    return _predictor


def worker_predictor() -> Any:
    """Inside a worker: its loaded export, for tasks defined by a job (``jobs/predict_folder.py``)."""
    return _loaded()


def _describe(_: None) -> WorkerModel:
    p = _loaded()
    return WorkerModel(
        tuple(p.tags.itos),
        p.scheme,
        p.source_scheme,
        p.batch_size,
        p.max_tokens,
        p.document_context,
        _shared,
    )


def _tag_text(task: tuple[list[str], ReadingOptions]) -> list[TaggedLine]:
    lines, options = task
    return list(_loaded().tag_lines(lines, TAG_CHUNK, options))


def _tag_groups(groups: list[list[list[str]]]) -> list[list[Tagged]]:
    # one group is one batch of Predictor.tag's plan: tagged alone it is that batch again (same order, budget)
    return [_loaded().tag(group) for group in groups]


# ------------------------------------------------------------------ in the main process
def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class WorkerPool:
    """``workers`` processes with the export ``model`` loaded, each with ``threads`` torch threads. The fork
    server starts here, loading the export while the caller reads its input."""

    def __init__(
        self,
        workers: int,
        model: str,
        device: str = "cpu",
        batch_size: int | None = None,
        max_tokens: int | None = None,
        threads: int = 1,
    ) -> None:
        context = multiprocessing.get_context("forkserver")
        request = model_request(model, device, batch_size, max_tokens)
        start_fork_server(request)
        self.workers = workers
        self._known: dict[int, Any] = {}
        self._executor = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_load, initargs=(request, threads)
        )

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _processes(self) -> dict[int, Any]:
        """The worker processes started so far, by pid (kept here too: a broken pool forgets them)."""
        self._known.update(getattr(self._executor, "_processes", None) or {})
        return self._known

    def close(self) -> None:
        """Stop at once: queued work is dropped, running workers are ended (nothing of theirs is kept), and the
        fork server with its copy of the model."""
        processes = list(self._processes().values())
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5)  # their exit codes come through the fork server: before it ends
        self._executor.shutdown(wait=False, cancel_futures=True)
        stop_fork_server()

    def pids(self) -> list[int]:
        """The worker processes' ids (those started so far)."""
        return sorted(self._processes())

    def _died(self) -> WorkerDied:
        processes = list(self._processes().values())
        for process in processes:
            process.join(timeout=1)  # the pool ends the others with SIGTERM: the first to die is the cause
        codes = [p.exitcode for p in processes if p.exitcode]
        # The cause first: a signal other than the pool's own SIGTERM (a kill, the OOM killer), then an exit
        # code other than that SIGTERM's (the survivors of a broken pool may exit with 255 meanwhile).
        signalled = [c for c in codes if c < 0 and c != -15]
        first = next(iter(signalled), next((c for c in codes if c != -15), codes[0] if codes else None))
        how = ""
        if first is not None and first < 0:
            how = f" (ended by signal {-first})"
        elif first is not None:
            how = f" (exit code {first})"
        return WorkerDied(
            f"--workers: a worker process ended before its work was done{how}; nothing was written"
        )

    def _result(self, future: Future[R]) -> R:
        try:
            return future.result()
        except BrokenProcessPool:
            raise self._died() from None

    def ordered(self, function: Callable[[T], R], tasks: Iterable[T]) -> Iterator[R]:
        """``function(task)`` for every task, run by the workers, yielded in the tasks' order; at most
        ``TASKS_AHEAD`` tasks per worker are read ahead, so a large input streams."""
        pending: deque[Future[R]] = deque()
        for task in tasks:
            raise_if_stopped()  # a Ctrl-C or SIGTERM whose first raise Python dropped
            try:
                pending.append(self._executor.submit(function, task))
                self._processes()
            except BrokenProcessPool:
                raise self._died() from None
            if len(pending) >= TASKS_AHEAD * self.workers:
                yield self._result(pending.popleft())
        while pending:
            raise_if_stopped()
            yield self._result(pending.popleft())

    def describe(self) -> WorkerModel:
        """The loaded model (a bad export is raised here, one line). One question per worker: the pool starts
        a process for each question that finds none idle, so all of them start, and load, at once."""
        return list(self.ordered(_describe, [None] * self.workers))[0]

    def tag_text(self, lines: Iterable[str], options: ReadingOptions | None = None) -> Iterator[TaggedLine]:
        """``Predictor.tag_lines`` of every line with ``options`` (``predict``'s), in order."""
        tasks = ((chunk, options or ReadingOptions()) for chunk in _chunks(lines, LINES_PER_TASK))
        for tagged in self.ordered(_tag_text, tasks):
            yield from tagged


class GroupTagger:
    """``Predictor.tag`` and ``to_source`` for ``tag_conll``, the batches run by the workers: the same plan
    (``split_pieces``, ``budget_batches``), the same batches, the same results."""

    def __init__(self, pool: WorkerPool, model: WorkerModel) -> None:
        if model.document_context:
            raise NerAppError(
                "--workers: this tagger's biLM reads whole documents (elmo.context: document), which one process "
                "batches across the file; leave --workers out for --format conll, or tag raw text"
            )
        self.pool, self.model = pool, model

    def tag(self, sentences: Sequence[Sequence[str]], documents: Sequence[int] | None = None) -> list[Tagged]:
        pieces = split_pieces(sentences)
        groups = budget_batches([len(t) for _, t in pieces], self.model.batch_size, self.model.max_tokens)
        tasks = [groups[i : i + GROUPS_PER_TASK] for i in range(0, len(groups), GROUPS_PER_TASK)]
        results: dict[int, Tagged] = {}
        payloads = ([[pieces[p][1] for p in group] for group in task] for task in tasks)
        for task, answers in zip(tasks, self.pool.ordered(_tag_groups, payloads), strict=True):
            for group, tagged in zip(task, answers, strict=True):
                results.update(zip(group, tagged, strict=True))
        return join_pieces(pieces, results, len(sentences))

    def to_source(self, tags: Sequence[str]) -> list[str]:
        return convert(tags, self.model.scheme, self.model.source_scheme)


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
