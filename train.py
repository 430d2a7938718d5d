"""Train and evaluate the [x; ELMo] BiLSTM-CRF tagger: ``python train.py --config configs/X.yaml [key=value ...]``.

The same code as ``python -m ner_app train``: one entry point, one error policy.
"""

from __future__ import annotations

import sys

from ner_app.cli.main import main as cli_main


def main(argv: list[str] | None = None) -> int:
    return cli_main(["train", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
