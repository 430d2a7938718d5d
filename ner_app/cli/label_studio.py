"""``label-studio``: ner_app as Label Studio's model backend (``server/label_studio_http.py``,
docs/label_studio.md): predictions for its tasks, and a new model trained from its annotations."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from ner_app.cli.arguments import Owned, port_number, positive_int, positive_seconds, probability
from ner_app.errors import NerAppError

SPEC = "ner_app.server.label_studio_backend"  # BackendSpec owns the defaults


def add_parser(commands: argparse._SubParsersAction) -> None:
    """``label-studio``: the backend Label Studio's Model settings connect to."""
    backend = commands.add_parser(
        "label-studio",
        help="be Label Studio's model backend: predictions for its tasks, new models from its annotations",
        description="Answers Label Studio's ML backend requests (/health, /setup, /predict, /webhook) on "
        "127.0.0.1: each task's entities with their probabilities and the task's confidence; on annotation "
        "events, trains from the serving model on the project's annotations in the background and serves the "
        "new model only if it does at least as well on held-out tasks (docs/label_studio.md).",
    )
    backend.add_argument(
        "--model",
        help="the export to start from (default: the shipped CoNLL-2003 tagger, data/models/conll2003)",
    )
    backend.add_argument(
        "--workdir",
        required=True,
        help="a new or empty folder for the versions, their training data and logs",
    )
    backend.add_argument(
        "--config",
        help="the training config, whose architecture must be the model's (default: the repository's "
        "configs/own_data_continue.yaml, which continues the shipped tagger)",
    )
    backend.add_argument("--port", type=port_number, default=9090, help="TCP port (default %(default)s)")
    backend.add_argument(
        "--label-studio-url",
        default=os.environ.get("LABEL_STUDIO_URL"),
        help="Label Studio's address, for its annotations (default: $LABEL_STUDIO_URL, else the one it sends)",
    )
    backend.add_argument(
        "--api-key",
        default=os.environ.get("LABEL_STUDIO_API_KEY"),
        help="a Label Studio access token (default: $LABEL_STUDIO_API_KEY, else the one it sends)",
    )
    backend.add_argument(
        "--labels", help='project labels that are other types, e.g. "Person=PER,Organisation=ORG"'
    )
    backend.add_argument(
        "--task-score",
        choices=("mnlp", "least-confidence", "margin", "min-entity"),
        default=Owned(SPEC, "BackendSpec.task_score"),
        help="each task's score, its confidence (lowest first: the order to annotate in; default %(default)s)",
    )
    backend.add_argument(
        "--heldout",
        type=probability,
        default=Owned(SPEC, "BackendSpec.heldout"),
        help="share of annotated tasks held out, by task id, to judge each new model (default %(default)s)",
    )
    backend.add_argument(
        "--min-heldout",
        type=positive_int,
        default=Owned(SPEC, "BackendSpec.min_heldout"),
        help="no training until this many tasks are held out (default %(default)s)",
    )
    backend.add_argument(
        "--max-epochs",
        type=positive_int,
        default=Owned(SPEC, "BackendSpec.max_epochs"),
        help="epochs of each training at most (default %(default)s)",
    )
    backend.add_argument(
        "--threads",
        type=positive_int,
        default=Owned(SPEC, "BackendSpec.threads"),
        help="torch threads of training",
    )
    backend.add_argument(
        "--train-timeout",
        type=positive_seconds,
        default=Owned(SPEC, "BackendSpec.train_timeout"),
        help="seconds a training may take; then it is stopped (default %(default)s)",
    )
    backend.add_argument(
        "--partial",
        action="store_true",
        help="text outside the annotated spans is not annotated (partial annotation, data.outside=unknown)",
    )
    backend.add_argument("--no-train", action="store_true", help="predict only: never train")


def run(args: argparse.Namespace) -> int:
    from ner_app.predict.shipped import REPOSITORY, SHIPPED_MODEL, shipped
    from ner_app.server.label_studio_backend import Backend, BackendSpec
    from ner_app.server.label_studio_http import run_server
    from ner_app.server.server import check_port
    from ner_app.text.annotations.convert import label_map

    model = Path(args.model) if args.model else shipped(SHIPPED_MODEL, "CoNLL-2003 tagger")
    if not (model / "tagger.json").is_file():
        raise NerAppError(f"--model {model}: not an export (expected a folder with tagger.json)")
    config = Path(args.config) if args.config else REPOSITORY / "configs" / "own_data_continue.yaml"
    if not config.is_file():
        raise NerAppError(
            f"--config {config}: not found (a training config; see configs/own_data_continue.yaml)"
        )
    if args.heldout <= 0 or args.heldout >= 1:
        raise NerAppError(f"--heldout {args.heldout:g}: expected a share between 0 and 1, e.g. 0.2")
    check_port("127.0.0.1", args.port)
    spec = BackendSpec(
        model=model,
        workdir=Path(args.workdir),
        config=config,
        label_studio_url=args.label_studio_url,
        api_key=args.api_key,
        labels=label_map(args.labels, "--labels") or None,
        task_score=args.task_score,
        heldout=args.heldout,
        min_heldout=args.min_heldout,
        max_epochs=args.max_epochs,
        threads=args.threads,
        partial=args.partial,
        train=not args.no_train,
        train_timeout=args.train_timeout,
    )

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    backend = Backend(spec, log)
    log(
        f"serving {backend.current.model_version} on http://127.0.0.1:{args.port} (work folder {spec.workdir})"
    )
    run_server(backend, "127.0.0.1", args.port)
    return 0
