"""The handler of ``serve``: check the cheap things (LitServe installed, host, port) before the model loads."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ner_app.errors import NerAppError


def serve(args: argparse.Namespace) -> int:
    try:
        from ner_app.server import server
    except ImportError as err:
        if "litserve" not in str(err) and "starlette" not in str(err):
            raise
        raise NerAppError(
            f"serve needs LitServe, which is not installed here ({err}); pip install 'ner_app[serve]' "
            "(or pip install litserve)"
        ) from None
    from ner_app.cli.inference import check_device

    host = server.bind_address(args.host, args.allow_remote)
    if host != "127.0.0.1":
        print(
            f"warning: --host {host} --allow-remote: anyone who can reach this machine's port {args.port} "
            "can use the server (no authentication, no TLS)",
            file=sys.stderr,
        )
    if args.device == "cuda":  # check_device imports torch, which this process otherwise never needs
        check_device(args.device)
    model = Path(args.model) if args.model else None  # None: the shipped tagger, found by the worker
    if model is not None and not model.is_dir():
        raise NerAppError(f"--model {model}: not a folder (expected an export directory)")
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
