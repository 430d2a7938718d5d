"""``download-elmo``: a public AllenNLP ELMo downloaded, resumable and checked (``bilm/download.py``)."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    from ner_app.bilm.download import DEFAULT_BASE_URL  # no torch at import: cheap for every command
    from ner_app.bilm.elmo_models import MODELS

    download = commands.add_parser(
        "download-elmo",
        help="download a public AllenNLP ELMo (options.json and weights hdf5), resumable and checked",
        description="Fetches the options and weights of an AllenNLP ELMo into --output (an interrupted download "
        "resumes from DIR/NAME.part), checks size, checksum where one is known, and structure, then prints the "
        "elmo.options=... and elmo.weights=... overrides that use them (docs/serving.md).",
    )
    download.add_argument("model", choices=list(MODELS), help="which ELMo")
    download.add_argument("--output", required=True, help="the folder to download into")
    download.add_argument("--base-url", default=DEFAULT_BASE_URL, help="a mirror with the same layout")


def run(args: argparse.Namespace) -> int:
    from ner_app.bilm.download import download_elmo

    options, weights = download_elmo(args.model, args.output, args.base_url)
    print(f"elmo.options={options}\nelmo.weights={weights}")  # the overrides (or config lines) that use them
    return 0
