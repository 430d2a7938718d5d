"""``python -m ner_app COMMAND``: the command-line entry point."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _embed(args: argparse.Namespace) -> int:
    from ner_app.bilm.weights import load_bilm
    from ner_app.embed import embed_file

    bilm = load_bilm(args.options, args.weights, stateful=args.stateful)
    count = embed_file(bilm, args.input, args.output, batch_size=args.batch_size, device=args.device)
    print(f"wrote {count} sentences to {args.output}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ner_app", description="ELMo BiLSTM-CRF named-entity tagging."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    embed = commands.add_parser(
        "embed",
        help="write every biLM layer of every sentence of a text file to hdf5",
        description="One sentence per line, tokens separated by single spaces. The output hdf5 has one float32 "
        "dataset per input line, named by its 0-based line number, of shape (L+1, n_tokens, 2P).",
    )
    embed.add_argument("--options", required=True, help="biLM options.json")
    embed.add_argument("--weights", required=True, help="biLM weights hdf5")
    embed.add_argument("--input", required=True, help="sentences, one per line")
    embed.add_argument("--output", required=True, help="output hdf5 file")
    embed.add_argument("--batch-size", type=int, default=64)
    embed.add_argument(
        "--stateful", action="store_true", help="carry LSTM state across batches (reference parity)"
    )
    embed.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    embed.set_defaults(run=_embed)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, OSError, KeyError) as err:
        # Bad input is reported as one clear line, not a traceback.
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
