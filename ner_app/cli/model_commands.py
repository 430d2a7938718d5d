"""The commands that use a trained model or biLM: embed, export, predict, evaluate, serve and download-elmo."""

from __future__ import annotations

import argparse

from ner_app.cli.arguments import (
    PREDICTOR,
    Owned,
    add_model_arguments,
    nonnegative_int,
    port_number,
    positive_int,
    positive_seconds,
    probability,
)
from ner_app.report.formats import format_help, format_names


def add_embed_parser(commands: argparse._SubParsersAction) -> None:
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
    embed.add_argument(
        "--batch-size",
        type=positive_int,
        default=Owned("ner_app.bilm.embed", "embed_file.batch_size"),
        help="sentences per biLM call (default %(default)s)",
    )
    embed.add_argument(
        "--max-tokens",
        type=positive_int,
        default=Owned("ner_app.bilm.embed", "EMBED_MAX_TOKENS"),
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
        default=Owned("ner_app.bilm.document", "MAX_POSITIONS"),
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


def add_export_parser(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export",
        help="export a train.py checkpoint: safetensors weights, JSON vocabularies and spec, the biLM files; "
        "or, with --onnx, an export as ONNX graphs",
        description="Writes DIR/model.safetensors, DIR/tagger.json and DIR/bilm/{options.json,weights.hdf5}; "
        "loading it runs no pickle. With --onnx: converts the export --model into DIR/tagger.onnx, DIR/bilm.onnx, "
        "DIR/crf.npz and DIR/onnx.json, which ner_app.onnx.predictor runs with onnxruntime and numpy, "
        "without torch (docs/serving.md).",
    )
    export.add_argument("--checkpoint", help="a checkpoint from RUN/checkpoints/ (required without --onnx)")
    export.add_argument("--output", required=True, help="the export directory")
    export.add_argument(
        "--onnx",
        action="store_true",
        help="convert the export --model to ONNX graphs (needs onnxruntime: pip install 'ner_app[onnx]')",
    )
    export.add_argument(
        "--quantize",
        choices=["int8"],
        help="with --onnx: store the graphs' weights as int8 (onnxruntime dynamic quantization; smaller and "
        "faster on CPU, the shipped tagger's int8 tags agree with fp32 on 99.98%% of CoNLL-2003 dev tokens: docs/performance.md)",
    )
    export.add_argument(
        "--model",
        help="with --onnx: an export directory (default: the shipped CoNLL-2003 tagger, data/models/conll2003)",
    )


def add_predict_parser(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict",
        help="tag raw text (JSON lines with character offsets) or CoNLL tokens with an exported model",
        description="jsonl: each input line is tokenised like CoNLL-2003 and gives one JSON object "
        '{"text", "entities": [{"start", "end", "type", "text", "score"}]} with line[start:end] == text. '
        "conll: one token per line (first column), blank line between sentences; the predicted tag is appended.",
    )
    predict.add_argument("--input", required=True, help="a file, or - for standard input")
    predict.add_argument("--format", default="jsonl", choices=format_names(), help=format_help())
    predict.add_argument(
        "--output",
        metavar="PATH",
        help="write here instead of standard output, at once by an atomic rename (a folder for --format brat)",
    )
    predict.add_argument(
        "--min-score",
        type=probability,
        default=0.0,
        metavar="S",
        help="leave out entities whose score (the probability of the entity) is below S (default %(default)s)",
    )
    predict.add_argument(
        "--alternatives",
        type=nonnegative_int,
        default=0,
        metavar="K",
        help='give each entity its K most probable other readings that overlap it ("alternatives": another '
        "type and/or boundaries moved by at most 2 tokens), each with its probability",
    )
    predict.add_argument(
        "--flag-missed",
        type=probability,
        metavar="P",
        help='flag the tokens tagged O whose probability of O is below P ("flagged"), each with the most '
        "probable entity reading that covers it",
    )
    predict.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help="tag in N worker processes (each loads the model once, 1 torch thread unless --threads); the output "
        "is the same as one process's, in input order, and is written once all of it is done (at most one "
        "worker per CPU core)",
    )
    add_model_arguments(
        predict,
        Owned(PREDICTOR, "Predictor.__init__.batch_size"),
        "padded tokens a batch holds at most: pieces x longest piece (sentences are tagged in pieces of at most 250 "
        "tokens; default %(default)s)",
    )


def add_evaluate_parser(commands: argparse._SubParsersAction) -> None:
    evaluate = commands.add_parser(
        "evaluate",
        help="score an exported model on a gold CoNLL file: entity precision, recall and F1 per type",
        description="Tags every sentence of a CoNLL file (token ... gold-tag lines, IOB1 or IOB2) and scores "
        "the predicted entities against the gold ones as conlleval does (seqeval default mode, the scores of "
        "metrics.json); --predictions writes the token gold predicted lines conlleval reads.",
    )
    evaluate.add_argument("--input", required=True, help="a CoNLL file with gold tags in the last column")
    evaluate.add_argument("--json", action="store_true", help="print the scores as JSON (for scripts)")
    evaluate.add_argument(
        "--predictions",
        metavar="FILE",
        help="also write token gold predicted lines here (- for standard output; the scores then go to stderr)",
    )
    evaluate.add_argument(
        "--case-views",
        action="store_true",
        help="also score the file lower-cased and upper-cased (gold tags unchanged): a view, P, R, F1 table, "
        "and case_views in --json; --predictions holds the view as written",
    )
    add_model_arguments(
        evaluate,
        Owned(PREDICTOR, "Predictor.__init__.batch_size"),
        "padded tokens a batch holds at most, as predict's (default %(default)s)",
    )


def add_download_elmo_parser(commands: argparse._SubParsersAction) -> None:
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


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    """``serve``: the tagger behind HTTP (docs/serving.md#serving-over-http)."""
    serve = commands.add_parser(
        "serve",
        help='serve an exported tagger over HTTP: POST /predict {"texts": [...]}, requests batched together',
        description='Loads the export once and answers POST /predict with {"results": [one predict object per '
        "text]}; requests arriving together are tagged in one batch. Listens on 127.0.0.1 only unless "
        "--allow-remote. SIGTERM answers the requests in flight, then stops (docs/serving.md).",
    )
    spec = "ner_app.server.server"  # ServeSpec owns the defaults
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
