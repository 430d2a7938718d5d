"""``serve``: an export behind HTTP (``server/server.py``); the cheap things (LitServe installed, host, port)
are checked before the model loads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ner_app.cli.arguments import (
    Owned,
    add_model_arguments,
    port_number,
    positive_int,
    positive_seconds,
)
from ner_app.errors import NerAppError


def add_parser(commands: argparse._SubParsersAction) -> None:
    """``serve``: the tagger behind HTTP (docs/serving.md#serving-over-http)."""
    serve = commands.add_parser(
        "serve",
        help='serve an exported tagger over HTTP: POST /predict {"texts": [...]}, requests batched together',
        description='Loads the export once and answers POST /predict with {"results": [one predict object per '
        "text]}; requests arriving together are tagged in one batch. Listens on 127.0.0.1 only unless "
        "--allow-remote. SIGTERM answers the requests in flight, then stops (docs/serving.md).",
    )
    spec = "ner_app.server.serve_spec"  # ServeSpec owns the defaults
    serve.add_argument(
        "--host",
        default=Owned(spec, "ServeSpec.host"),
        help="%(default)s (default); 0.0.0.0 or :: with --allow-remote",
    )
    serve.add_argument(
        "--port",
        type=port_number,
        default=Owned(spec, "ServeSpec.port"),
        help="TCP port, 1024-65535 (default %(default)s)",
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="let --host be 0.0.0.0 or ::, so other machines can connect (no authentication, no TLS)",
    )
    serve.add_argument(
        "--max-batch-size",
        type=positive_int,
        default=Owned(spec, "ServeSpec.max_batch_size"),
        help="requests tagged together at most (default %(default)s; 32-64 give more throughput with an ELMo "
        "tagger)",
    )
    serve.add_argument(
        "--batch-timeout",
        type=positive_seconds,
        default=Owned(spec, "ServeSpec.batch_timeout"),
        help="the longest a batch waits for requests that are due: as many as the last batch had, plus those "
        "that queued meanwhile (default %(default)s s)",
    )
    for option, field, what in (
        (
            "--header-timeout",
            "header_timeout",
            "a request's head may take, from the connection or the last answer",
        ),
        ("--body-timeout", "body_timeout", "a /predict body may take once its head is in"),
    ):
        serve.add_argument(
            option,
            type=positive_seconds,
            default=Owned(spec, f"ServeSpec.{field}"),
            help=f"seconds {what}; then 408 and the connection is closed (default %(default)s s)",
        )
    serve.add_argument(
        "--max-connections",
        type=positive_int,
        default=Owned(spec, "ServeSpec.max_connections"),
        help="connections open at once; past them a request gets 503 (default %(default)s)",
    )
    add_model_arguments(
        serve,
        Owned(spec, "ServeSpec.batch_size"),
        None,
        "torch CPU threads of the model worker (1 is fastest on a busy machine)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        from ner_app.server import server
    except ImportError as err:
        if "litserve" not in str(err) and "starlette" not in str(err):
            raise
        raise NerAppError(
            f"serve needs LitServe, which is not installed here ({err}); pip install 'ner_app[serve]' "
            "(or pip install litserve)"
        ) from None
    from ner_app.predict.loading import check_device, check_model_device

    host = server.bind_address(args.host, args.allow_remote)
    if host != "127.0.0.1":
        print(
            f"warning: --host {host} --allow-remote: anyone who can reach this machine's port {args.port} "
            "can use the server (no authentication, no TLS)",
            file=sys.stderr,
        )
    model = Path(args.model) if args.model else None  # None: the shipped tagger, found by the worker
    if model is not None and not model.is_dir():
        raise NerAppError(f"--model {model}: not a folder (expected an export directory or an ONNX folder)")
    if (
        args.device == "cuda"
    ):  # a torch export's check imports torch, which this process otherwise never needs
        check_model_device(model, args.device) if model else check_device(args.device)
    spec = server.ServeSpec(
        model=model,
        host=host,
        port=args.port,
        device=args.device,
        threads=args.threads,
        batch_size=args.batch_size,
        max_batch_size=args.max_batch_size,
        batch_timeout=args.batch_timeout,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        max_connections=args.max_connections,
    )
    return server.serve(spec)
