"""``embed``: every biLM layer (or TF-Hub ELMo's named outputs) of every sentence of a text file, written to
hdf5 (``bilm/embed.py``, ``bilm/embed_outputs.py``)."""

from __future__ import annotations

import argparse
import sys

from ner_app.cli.arguments import Owned, add_overwrite_argument, output_claim, positive_int
from ner_app.errors import NerAppError


def add_parser(commands: argparse._SubParsersAction) -> None:
    embed = commands.add_parser(
        "embed",
        help="write every biLM layer of every sentence of a text file to hdf5",
        description="One sentence per line, tokens separated by single spaces (or raw text with --tokenize). "
        "The output hdf5 has one float32 dataset per input line, named by its 0-based line number, of shape "
        "(L+1, n_tokens, 2P).",
    )
    embed.add_argument("--options", help="biLM options.json (default: the shipped biLM, data/bilm)")
    embed.add_argument("--weights", help="biLM weights hdf5 (default: the shipped biLM, data/bilm)")
    embed.add_argument("--input", required=True, help="sentences, one per line")
    embed.add_argument(
        "--tokenize",
        action="store_true",
        help="read raw text and tokenise each line as predict does; each dataset gets 'tokens' and 'offsets' "
        "attributes (JSON)",
    )
    embed.add_argument("--output", required=True, help="output hdf5 file (- for standard output)")
    add_overwrite_argument(embed)
    embed.add_argument(
        "--batch-size",
        type=positive_int,
        default=Owned("ner_app.text.batching", "EMBED_BATCH_SIZE"),
        help="sentences per biLM call (default %(default)s)",
    )
    embed.add_argument(
        "--max-tokens",
        type=positive_int,
        default=Owned("ner_app.text.batching", "EMBED_MAX_TOKENS"),
        metavar="N",
        help="padded positions a biLM call reads at most: sentences x longest sentence (streams x longest stream "
        "with --context document); a longer sentence runs alone (default %(default)s)",
    )
    embed.add_argument(
        "--threads", type=positive_int, help="torch CPU threads (1 is fastest on a busy machine)"
    )
    embed.add_argument(
        "--stateful", action="store_true", help="carry LSTM state across batches (reference parity)"
    )
    embed.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    embed.add_argument(
        "--context",
        default="sentence",
        choices=["sentence", "document"],
        help="document: consecutive non-empty lines form a document read as one stream; an empty line ends it",
    )
    embed.add_argument(
        "--max-stream-positions",
        type=int,
        default=Owned("ner_app.text.batching", "MAX_POSITIONS"),
        help="document context: longer documents are read in chunks of whole sentences (tokens + 2 per sentence; "
        "default %(default)s)",
    )
    embed.add_argument(
        "--outputs",
        metavar="NAMES",
        help="write TF-Hub ELMo's named outputs instead: 'all' or a comma-separated subset of word_emb,"
        "lstm_outputs1,lstm_outputs2,elmo,default; one hdf5 group per line (docs/serving.md)",
    )
    embed.add_argument(
        "--scalar-mix",
        metavar="W0,W1,...",
        help="with --outputs: pre-softmax layer weights (default uniform)",
    )
    embed.add_argument("--gamma", type=float, help="with --outputs: the mix's scale (default 1)")
    embed.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16"],
        help="bf16: autocast on CPUs with AVX512-BF16/AMX or on a GPU (faster, not bit-exact); output stays float32",
    )


def run(args: argparse.Namespace) -> int:
    from ner_app.bilm.weights import load_bilm
    from ner_app.files import claim_file
    from ner_app.jobs.setup import check_device, set_threads

    claim = output_claim(args)
    claim_file(
        args.output, claim
    )  # a folder, a FIFO nobody reads, a file embed did not write: before the work
    set_threads(args.threads)
    check_device(args.device)
    from ner_app.bilm.embed import embed_file, inference_autocast
    from ner_app.predict.api import SHIPPED_BILM, bilm_files, shipped

    if (args.options is None) != (args.weights is None):
        raise NerAppError("--options and --weights go together (leave both out for the shipped biLM)")
    if args.options is None:
        args.options, args.weights = bilm_files(shipped(SHIPPED_BILM, "biLM (--options and --weights)"))
    bilm = load_bilm(args.options, args.weights, stateful=args.stateful, random_fills=False)
    if args.max_stream_positions < 2:
        raise NerAppError(
            f"--max-stream-positions: expected at least 2 (<S> and </S>), found {args.max_stream_positions}"
        )
    if args.outputs is not None:  # TF-Hub ELMo's named outputs (docs/serving.md)
        from ner_app.bilm.embed_outputs import embed_outputs_file, parse_mix, parse_outputs

        names = parse_outputs(args.outputs, bilm.num_layers - 1)
        mix = parse_mix(args.scalar_mix, args.gamma, bilm.num_layers)
        with inference_autocast(args.device, args.precision):
            count = embed_outputs_file(
                bilm,
                args.input,
                args.output,
                names,
                mix,
                batch_size=args.batch_size,
                device=args.device,
                context=args.context,
                max_stream_positions=args.max_stream_positions,
                tokenize_lines=args.tokenize,
                max_tokens=args.max_tokens,
                claim=claim,
            )
    elif args.scalar_mix is not None or args.gamma is not None:
        raise NerAppError("--scalar-mix and --gamma go with --outputs (the default layout has no mix)")
    else:
        count = embed_file(
            bilm,
            args.input,
            args.output,
            batch_size=args.batch_size,
            device=args.device,
            context=args.context,
            max_stream_positions=args.max_stream_positions,
            precision=args.precision,
            tokenize_lines=args.tokenize,
            max_tokens=args.max_tokens,
            claim=claim,
        )
    where = "standard output" if args.output == "-" else args.output
    print(f"wrote {count} sentences to {where}", file=sys.stderr)
    return 0
