"""The command line's argparse tree: every command, its arguments and help (``python -m ner_app --help``).

A default that a module of the package owns (a batch size, a token budget, a port) is named here as ``Owned``,
never restated: it is imported when the command reads it (``OwnedNamespace``) or its help is shown, so
parsing the command line imports nothing heavy.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from typing import Any

from ner_app.cli.convert import add_convert_parser
from ner_app.report.formats import format_help, format_names


class Owned:
    """The default of another module: ``Owned("ner_app.serve.embed", "EMBED_MAX_TOKENS")``, a dataclass field
    (``"ServeSpec.port"``) or a function's parameter (``"embed_file.batch_size"``)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def value(self) -> Any:
        found: Any = importlib.import_module(self.module)
        for part in self.name.split("."):
            if inspect.isfunction(found):
                found = inspect.signature(found).parameters[part].default
            else:
                found = getattr(found, part)
        return found

    def __str__(self) -> str:  # what help's %(default)s shows
        return str(self.value())


class OwnedNamespace(argparse.Namespace):
    """Parsed arguments whose ``Owned`` defaults turn into their values when first read: in the handler, after
    its own imports (``serve`` first says that LitServe is missing, in one line)."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if isinstance(value, Owned):
            value = value.value()
            setattr(self, name, value)
        return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse names the option and exits with 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, found {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, found {value}")
    return value


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``train`` (shared with ``train.py``)."""
    parser.add_argument("--config", required=True, help="a YAML file in configs/")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in output_dir from its last checkpoint"
    )
    parser.add_argument(
        "--seeds",
        metavar="SPEC",
        help="one run per seed (1-5, 1,3,5 or 1-3,7), each in output_dir/seedN, then their compare table; "
        "run again, it skips finished seeds and continues interrupted ones",
    )
    parser.add_argument(
        "--parallel",
        type=positive_int,
        metavar="N",
        help="with --seeds: train N seeds at a time, as child processes of one thread each",
    )
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


TRAIN_DESCRIPTION = (
    "Trains on train.txt, keeps the epoch with the best dev entity F1, evaluates it on dev and test, and writes "
    "reports, metrics, checkpoints, an export and report.html into output_dir. key.sub=value arguments override "
    "the config (docs/configuration.md)."
)


PREDICTOR = "ner_app.serve.predictor"  # owns predict's and evaluate's defaults


def add_model_arguments(
    parser: argparse.ArgumentParser, batch_size: Owned, max_tokens_help: str | None, threads_help: str = ""
) -> None:
    """--model, --batch-size, --threads, --device (and --max-tokens unless its help is None) of the commands
    that tag with an export."""
    parser.add_argument(
        "--model", help="an export directory (default: the shipped CoNLL-2003 tagger, data/models/conll2003)"
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=batch_size,
        help="sentences per forward pass (default %(default)s)",
    )
    if max_tokens_help is not None:
        parser.add_argument(
            "--max-tokens",
            type=positive_int,
            default=Owned("ner_app.text.batching", "PREDICT_MAX_TOKENS"),
            metavar="N",
            help=max_tokens_help,
        )
    parser.add_argument(
        "--threads",
        type=positive_int,
        help=threads_help or "torch CPU threads (1 is fastest on a busy machine)",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])


def add_train_parser(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="train and evaluate the tagger (the same as python train.py)",
        description=TRAIN_DESCRIPTION,
    )
    add_train_arguments(train)


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
        default=Owned("ner_app.serve.embed", "embed_file.batch_size"),
        help="sentences per biLM call (default %(default)s)",
    )
    embed.add_argument(
        "--max-tokens",
        type=positive_int,
        default=Owned("ner_app.serve.embed", "EMBED_MAX_TOKENS"),
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
        "DIR/crf.npz and DIR/onnx.json, which ner_app.serve.onnx_predictor runs with onnxruntime and numpy, "
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
    add_model_arguments(
        evaluate,
        Owned(PREDICTOR, "Predictor.__init__.batch_size"),
        "padded tokens a batch holds at most, as predict's (default %(default)s)",
    )


def add_compare_parser(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare",
        help="compare finished runs: dev/test F1 mean +/- std per config, per entity type, paired by seed",
        description="Groups the run folders by config (seed, output_dir, threads, logging and cache keys left "
        "out) and data, and prints Markdown tables: F1 mean +/- sample std over seeds, per entity type, and "
        "per-seed differences between configs that share seeds; tables wider than 100 characters are cut into "
        "parts (docs/reports.md).",
    )
    compare.add_argument("runs", nargs="+", metavar="RUN_DIR", help="train.py output folders")
    compare.add_argument(
        "--html",
        metavar="FILE",
        help="also write the tables and a chart to one HTML file (- for standard output)",
    )
    compare.add_argument(
        "--json",
        action="store_true",
        help="print the comparison as one JSON document instead of the tables (keys: docs/reports.md)",
    )


def add_pretrain_bilm_parser(commands: argparse._SubParsersAction) -> None:
    pretrain = commands.add_parser(
        "pretrain-bilm",
        help="pretrain a biLM on raw text and export it in the public ELMo format",
        description="Trains forward and backward LMs with a shared sampled softmax (the bilm-tf recipe), then "
        "writes options.json, weights.hdf5, softmax.hdf5, vocab.txt and metrics.json into output_dir.",
    )
    pretrain.add_argument("--config", required=True, help="a YAML file such as configs/bilm_news.yaml")
    pretrain.add_argument(
        "--resume", action="store_true", help="continue the run in output_dir from its last checkpoint"
    )
    pretrain.add_argument("--threads", type=positive_int, help="torch CPU threads (same as train.threads=N)")
    pretrain.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


def add_bilm_perplexity_parser(commands: argparse._SubParsersAction) -> None:
    ppl = commands.add_parser(
        "bilm-perplexity",
        help="exact held-out perplexity of a pretrain-bilm output folder, per direction and context",
        description="Scores held-out files (one sentence a line, blank lines between documents, or CoNLL files) "
        "with the exported LMs (options.json, weights.hdf5, softmax.hdf5, vocab.txt) and the full softmax, each "
        "sentence alone and/or each document as one stream (docs/pretraining.md).",
    )
    ppl.add_argument("run_dir", metavar="RUN_DIR", help="a pretrain-bilm output_dir")
    ppl.add_argument("--heldout", nargs="+", required=True, metavar="FILE", help="held-out text files")
    ppl.add_argument(
        "--context", nargs="+", choices=["sentence", "document"], default=["sentence", "document"]
    )
    ppl.add_argument("--max-sentences", type=positive_int, help="only the first N sentences of each file")
    ppl.add_argument("--threads", type=positive_int, help="torch CPU threads")
    ppl.add_argument("--json", metavar="FILE", help="also write the results as JSON (- for standard output)")


def add_report_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser(
        "report",
        help="write a run folder's self-contained HTML report (curves, per-type scores, errors, ELMo weights)",
        description="Reads metrics.json, logs/metrics.csv, predictions_{dev,test}.conll and the trained weights "
        "of a train.py run folder and writes one HTML file with its images embedded (docs/reports.md).",
    )
    report.add_argument("run_dir", metavar="RUN_DIR", help="a train.py output_dir")
    report.add_argument("--output", help="the HTML file (default RUN_DIR/report.html; - for standard output)")


def add_download_elmo_parser(commands: argparse._SubParsersAction) -> None:
    from ner_app.serve.download import DEFAULT_BASE_URL, MODELS  # no torch at import: cheap for every command

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


def build_parser() -> argparse.ArgumentParser:
    """Every command of ``ner-app``, one ``add_*_parser`` each."""
    parser = argparse.ArgumentParser(
        prog="ner-app", description="ELMo BiLSTM-CRF named-entity tagging (also: python -m ner_app)."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        add_train_parser,
        add_embed_parser,
        add_export_parser,
        add_predict_parser,
        add_evaluate_parser,
        add_compare_parser,
        add_pretrain_bilm_parser,
        add_bilm_perplexity_parser,
        add_report_parser,
        add_download_elmo_parser,
        add_serve_parser,
        add_convert_parser,
    ):
        add(commands)
    return parser


def port_number(text: str) -> int:
    """argparse type: a TCP port a user may listen on, 1024-65535 (LitServe refuses the privileged ones)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number in [1024, 65535], found {text!r}") from None
    if not 1024 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number in [1024, 65535], found {value}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, found {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, found {text!r}")
    return value


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    """``serve``: the tagger behind HTTP (docs/serving.md#serving-over-http)."""
    serve = commands.add_parser(
        "serve",
        help='serve an exported tagger over HTTP: POST /predict {"texts": [...]}, requests batched together',
        description='Loads the export once and answers POST /predict with {"results": [one predict object per '
        "text]}; requests arriving together are tagged in one batch. Listens on 127.0.0.1 only unless "
        "--allow-remote. SIGTERM answers the requests in flight, then stops (docs/serving.md).",
    )
    spec = "ner_app.serve.server"  # ServeSpec owns the defaults
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
    add_model_arguments(
        serve,
        Owned(spec, "ServeSpec.batch_size"),
        None,
        "torch CPU threads of the model worker (1 is fastest on a busy machine)",
    )
