"""Prediction on Ray Data with an ONNX export: files of raw text in, predict's JSON objects out, one actor a CPU.

``OnnxTagBatch`` is the callable class for ``Dataset.map_batches``: each Ray actor loads the ONNX tagger once
(``OnnxPredictor``) and turns a batch with a ``text`` column into the same batch with an ``entities`` column,
each line's entities as ``predict --format jsonl`` prints them. ``read_text_lines`` reads files (local paths or
any filesystem Ray reads: ``s3://``, ``gs://``, ...) into rows ``{"path", "line", "text"}`` split as predict
splits its input (``text/lines.py``: on ``\\n`` only, strict UTF-8, empty lines kept), so that every output
row names the file and line it came from: Ray gives no order across blocks. ``predict_dataset`` joins the two,
``write_predictions`` writes JSON-lines files into a folder (a local one appears whole, by one rename).
Ray is optional: without it every entry point stops with one line naming ``pip install "ray[data]"``.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ner_app.errors import NerAppError, run_reporting_errors
from ner_app.files import Claim, atomic_folder, claim_folder
from ner_app.limits import MAX_RAY_FILE_BYTES
from ner_app.onnx.predictor import OnnxPredictor
from ner_app.text.batching import PREDICT_BATCH_SIZE, PREDICT_MAX_TOKENS
from ner_app.text.lines import InputTextError, decoded_lines

RAY_INSTALL = 'pip install "ray[data]"'
BATCH_LINES = 256  # lines a map_batches call tags: large enough for full tagger batches, small for balance
COMMAND = "ray_batch"  # the name in the marker of a folder this module wrote (docs/reliability.md)

LIGHT = {"num_cpus": 0}  # the writing tasks: no CPU slot (read_text_lines says why)


class RayMissingError(NerAppError):
    """Ray Data is not installed."""


def ray_data() -> Any:
    """The ``ray.data`` module, or one line saying how to install it."""
    try:
        import ray.data
    except ImportError:
        raise RayMissingError(f"Ray Data is not installed: {RAY_INSTALL}") from None
    return ray.data


def _entity_type() -> Any:
    """The Arrow type of one line's entities: a list of predict's entity objects, the same type in every
    batch (an inferred one would be list<null> for a batch without entities)."""
    import pyarrow as pa

    fields = [("start", pa.int64()), ("end", pa.int64()), ("type", pa.string()), ("text", pa.string())]
    return pa.list_(pa.struct([*fields, ("score", pa.float64())]))


def _columns(batch: Any) -> dict[str, list[Any]]:
    """A pyarrow Table, a pandas DataFrame or a dict of numpy arrays as plain Python lists by column."""
    if hasattr(batch, "to_pydict"):  # pyarrow
        return dict(batch.to_pydict())
    if hasattr(batch, "to_dict") and hasattr(batch, "columns"):  # pandas
        return {str(name): batch[name].tolist() for name in batch.columns}
    return {str(name): list(values.tolist()) for name, values in batch.items()}


class OnnxTagBatch:
    """``map_batches(OnnxTagBatch, fn_constructor_kwargs={"model": DIR}, concurrency=N)``: N actors, each
    loading the ONNX export ``model`` once (``threads``: onnxruntime's threads per graph; 1 suits one actor a
    CPU). A call takes a batch with a ``text`` column and returns a pyarrow Table of the batch's columns and
    ``entities``: each line's ``predict --format jsonl`` entities."""

    def __init__(
        self,
        model: str,
        threads: int | None = 1,
        batch_size: int = PREDICT_BATCH_SIZE,
        max_tokens: int | None = PREDICT_MAX_TOKENS,
    ) -> None:
        self.predictor = OnnxPredictor(model, batch_size=batch_size, threads=threads, max_tokens=max_tokens)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        columns = _columns(batch)
        if "text" not in columns:
            raise NerAppError(
                f"a batch without a 'text' column (it has {sorted(columns)}); name the lines 'text'"
            )
        texts = [str(t) for t in columns["text"]]
        found = [line["entities"] for line in self.predictor.predict_texts(texts)]
        arrays = {name: pa.array(values) for name, values in columns.items() if name != "text"}
        return pa.table(
            {**arrays, "text": pa.array(texts, pa.string()), "entities": pa.array(found, _entity_type())}
        )


def _file_lines(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One file's row of ``read_binary_files`` as its lines: ``{"path", "line" (from 1), "text"}``."""
    path, raw = str(row["path"]), row["bytes"]
    if len(raw) > MAX_RAY_FILE_BYTES:
        raise InputTextError(
            f"{path}: {len(raw):,} bytes, more than {MAX_RAY_FILE_BYTES:,} in one file; split it into "
            "smaller files (each file is read whole by one task)"
        )
    lines = decoded_lines(io.BytesIO(raw), path)  # bytes iterate by b"\n", as predict reads a file
    return [{"path": path, "line": n, "text": text} for n, text in enumerate(lines, start=1)]


def read_text_lines(paths: str | Sequence[str]) -> Any:
    """A lazy Ray Dataset of every line of ``paths`` (files or folders, local or any filesystem Ray reads) as
    rows ``{"path", "line", "text"}``, split as ``predict`` splits its input. Ray's own ``read_text`` drops
    empty lines and splits on every Unicode line break, so its rows would not match predict's lines."""
    names = paths if isinstance(paths, str) else list(paths)
    # reading and splitting take no CPU slot: actors on every CPU would otherwise leave them none, and the
    # dataset would wait forever (Ray schedules by slots, not by load)
    data = ray_data()
    # a user's error in a task (a file that is not UTF-8) reaches the caller as itself, not as Ray's
    # UserCodeException, so that it can be one line (write_predictions)
    data.DataContext.get_current().raise_original_map_exception = True
    files = data.read_binary_files(names, include_paths=True, num_cpus=0)
    return files.flat_map(_file_lines, num_cpus=0)


def predict_dataset(
    paths: str | Sequence[str],
    model: str | Path,
    actors: int = 1,
    batch_lines: int = BATCH_LINES,
    threads: int = 1,
    check: bool = True,
) -> Any:
    """A lazy Ray Dataset of rows ``{"path", "line", "text", "entities"}`` for every line of ``paths``, tagged
    by ``actors`` actors of ``threads`` CPUs each, each holding the ONNX export ``model``. The export is loaded
    here once first (``check``), so that a wrong folder is one line before any actor starts."""
    for name, value in (("actors", actors), ("batch_lines", batch_lines), ("threads", threads)):
        if value < 1:
            raise NerAppError(f"{name} {value}: expected a positive number")
    if check:
        OnnxPredictor(model, threads=1)  # every check of the export, in this process
    return read_text_lines(paths).map_batches(
        OnnxTagBatch,
        fn_constructor_kwargs={"model": str(model), "threads": threads},
        batch_size=batch_lines,
        batch_format="pyarrow",
        compute=ray_data().ActorPoolStrategy(size=actors),
        num_cpus=threads,
    )


def _user_error(err: BaseException) -> NerAppError | None:
    """The NerAppError a Ray task raised, found in the exceptions Ray wraps it in (None: a bug)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        found = todo.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, NerAppError):  # Ray's RayTaskError(InputTextError) holds the original as cause
            inner = getattr(found, "cause", None)
            error = inner if isinstance(inner, NerAppError) else found
            # Ray appends its retry advice to the message; ours is one line
            return type(error)(str(error).split("\n", 1)[0])
        todo += [found.__cause__, found.__context__, getattr(found, "cause", None)]
    return None


def write_predictions(dataset: Any, output: str | Path, overwrite: bool = False) -> str:
    """Run ``dataset`` and write its rows as JSON lines (several files, in no order) into ``output``: a local
    folder, which appears whole by one rename (absent, empty, an earlier output of this module, or
    ``overwrite``), or a URI Ray writes to (``s3://bucket/predictions``). A user's error raised in a Ray task
    (a file that is not UTF-8) comes back as itself, one line."""
    name = str(output)
    try:
        if "://" in name:
            dataset.write_json(name, ray_remote_args=LIGHT)
            return name
        claim = Claim(COMMAND, overwrite=overwrite)
        claim_folder(Path(name), claim)
        with atomic_folder(Path(name), claim) as tmp:
            dataset.write_json(str(tmp), ray_remote_args=LIGHT)
    except Exception as err:
        user = _user_error(err)
        if user is None:
            raise
        raise user from None
    return name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ner_app.onnx.ray_batch",
        description="Tag text files with an ONNX export on Ray Data; writes predict's JSON objects, each with "
        "the file and line it came from, as JSON-lines files into a folder.",
    )
    parser.add_argument("inputs", nargs="+", help="text files or folders (local, or s3://, gs://, ...)")
    parser.add_argument("--model", required=True, help="an ONNX export folder (ner-app export --onnx)")
    parser.add_argument("--output", required=True, help="the folder written (a local path or a URI)")
    parser.add_argument("--actors", type=int, default=1, help="tagger actors, each loading the model once")
    parser.add_argument("--threads", type=int, default=1, help="CPUs (onnxruntime threads) of each actor")
    parser.add_argument("--batch-lines", type=int, default=BATCH_LINES, help="lines of one map_batches call")
    parser.add_argument(
        "--address", help="a running Ray cluster (ray.init(address=...)); default: start one here"
    )
    parser.add_argument("--num-cpus", type=int, help="CPUs of the Ray started here (default: all)")
    parser.add_argument("--overwrite", action="store_true", help="replace what a local --output holds")
    return parser


def run(args: argparse.Namespace) -> int:
    """Tag ``args.inputs`` on a Ray cluster (a local one started here unless ``--address``)."""
    if "://" not in args.output:
        claim_folder(Path(args.output), Claim(COMMAND, overwrite=args.overwrite))  # before Ray starts
    ray_data()
    import ray

    OnnxPredictor(args.model, threads=1)  # a wrong folder is one line before a cluster starts

    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:  # a private cluster of this machine, reachable from it alone
        ray.init(
            num_cpus=args.num_cpus,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
        )
    try:
        dataset = predict_dataset(
            args.inputs, args.model, args.actors, args.batch_lines, args.threads, check=False
        )
        written = write_predictions(dataset, args.output, args.overwrite)
    finally:
        ray.shutdown()
    print(f"predictions written to {written}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return run_reporting_errors(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
