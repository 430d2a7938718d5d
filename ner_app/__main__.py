"""``python -m ner_app COMMAND``: the command-line entry point."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ner_app.errors import NerAppError, run_reporting_errors


def _train(args: argparse.Namespace) -> int:
    import logging

    from ner_app.config import load_config

    cfg = load_config(args.config, args.overrides)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from ner_app.training.run import run_training  # heavy imports after the config is known to be valid

    metrics = run_training(cfg, resume=args.resume)
    if not metrics:  # a DDP rank other than 0: rank 0 reports
        return 0
    print(
        f"dev F1 {metrics['dev']['f1']:.2f}  test F1 {metrics['test']['f1']:.2f}  ({cfg.output_dir}/metrics.json)"
    )
    return 0


def _embed(args: argparse.Namespace) -> int:
    import torch

    from ner_app.bilm.weights import load_bilm

    if args.threads:
        torch.set_num_threads(args.threads)
    from ner_app.embed import embed_file, inference_autocast
    from ner_app.errors import NerAppError

    bilm = load_bilm(args.options, args.weights, stateful=args.stateful)
    if args.max_stream_positions < 2:
        raise NerAppError(
            f"--max-stream-positions: expected at least 2 (<S> and </S>), found {args.max_stream_positions}"
        )
    if args.outputs is not None:  # TF-Hub ELMo's named outputs (docs/tfhub_outputs.md)
        from ner_app.embed_outputs import embed_outputs_file, parse_mix, parse_outputs

        names = parse_outputs(args.outputs, bilm.num_layers - 1)
        mix = parse_mix(args.scalar_mix, args.gamma, bilm.num_layers)
        with inference_autocast(args.device, args.precision):
            count = embed_outputs_file(bilm, args.input, args.output, names, mix, batch_size=args.batch_size,
                                       device=args.device, context=args.context,
                                       max_stream_positions=args.max_stream_positions)  # fmt: skip
    elif args.scalar_mix is not None or args.gamma is not None:
        raise NerAppError("--scalar-mix and --gamma go with --outputs (the default layout has no mix)")
    else:
        count = embed_file(bilm, args.input, args.output, batch_size=args.batch_size, device=args.device,
                           context=args.context, max_stream_positions=args.max_stream_positions,
                           precision=args.precision)  # fmt: skip
    print(f"wrote {count} sentences to {args.output}", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    from ner_app.export import export_checkpoint

    out = export_checkpoint(args.checkpoint, args.output)
    print(f"exported {args.checkpoint} to {out}", file=sys.stderr)
    return 0


def _predict(args: argparse.Namespace) -> int:
    import json

    import torch

    from ner_app.predict.predictor import Predictor, predict_conll
    from ner_app.predict.text_input import decoded_lines

    if args.threads:
        torch.set_num_threads(args.threads)
    predictor = Predictor.from_export(args.model, device=args.device, batch_size=args.batch_size)
    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and Path(args.input).is_dir():
        raise NerAppError(f"--input {args.input}: is a folder, expected a text file or -")
    source = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    with source:
        lines = decoded_lines(source, name)  # split on \n only: one output per input line
        if args.format == "conll":
            for line in predict_conll(predictor, lines):
                print(line)
        elif args.format == "html":
            from ner_app.report.predictions_html import entity_types, predictions_html

            types = entity_types(predictor.tags.itos)
            for piece in predictions_html(predictor.predict_texts(lines), types, title=f"Entities in {name}"):
                sys.stdout.write(piece)
        else:
            for result in predictor.predict_texts(lines):
                # JSON leaves these raw, and line readers split on them: escape them to keep one line per object
                line = json.dumps(result, ensure_ascii=False)
                print(
                    line.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
                )
    return 0


def _compare(args: argparse.Namespace) -> int:
    import os

    from ner_app.report.compare import group_runs, read_run
    from ner_app.report.compare_tables import compare_tables, markdown

    runs, seen = [], set()
    for folder in args.runs:
        if Path(folder).resolve() not in seen:  # a folder named twice (overlapping globs) counts once
            seen.add(Path(folder).resolve())
            runs.append(read_run(folder))
    groups = group_runs(runs)
    tables = compare_tables(groups)
    print(markdown(tables), end="")
    if args.html:
        from ner_app.report.compare_html import compare_html

        out = Path(args.html)
        if out.is_dir():
            raise NerAppError(f"--html {out}: is a folder, expected a file name")
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(compare_html(groups, tables), encoding="utf-8")
        os.replace(tmp, out)  # a reader never sees half a page
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _pretrain_bilm(args: argparse.Namespace) -> int:
    import logging

    from ner_app.config import BilmPretrainConfig, load_config

    overrides = [*args.overrides, *([f"train.threads={args.threads}"] if args.threads else [])]
    cfg = load_config(args.config, overrides, schema=BilmPretrainConfig)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from ner_app.pretrain.run import run_pretraining  # heavy imports after the config is known to be valid

    metrics = run_pretraining(cfg, resume=args.resume)
    if not metrics:  # a DDP rank other than 0: rank 0 reports
        return 0
    for name, result in metrics["heldout"].items():
        print(f"{name} ({result['context']} context): perplexity forward {result['forward']:.2f} "
              f"backward {result['backward']:.2f} mean {result['mean']:.2f}")  # fmt: skip
    print(f"{metrics['steps']} steps; biLM written to {cfg.output_dir} (metrics.json)")
    return 0


def _bilm_perplexity(args: argparse.Namespace) -> int:
    import json

    from ner_app.pretrain.perplexity import heldout_perplexities

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    results = heldout_perplexities(args.run_dir, args.heldout, args.context, args.max_sentences)
    print("| held-out file | context | sentences | predicted per direction | forward | backward | mean |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        for context, r in result["contexts"].items():
            print(f"| {name} | {context} | {result['sentences']:,} | {r['predicted_tokens']:,} | "
                  f"{r['forward']:.1f} | {r['backward']:.1f} | {r['mean']:.1f} |")  # fmt: skip
    if args.json:
        from ner_app.bilm.weights import atomic_path

        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def _report(args: argparse.Namespace) -> int:
    from ner_app.report import write_report

    out = write_report(args.run_dir, args.output)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _download_elmo(args: argparse.Namespace) -> int:
    from ner_app.download import download_elmo

    options, weights = download_elmo(args.model, args.output, args.base_url)
    print(f"elmo.options={options}\nelmo.weights={weights}")  # the overrides (or config lines) that use them
    return 0


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
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ner_app", description="ELMo BiLSTM-CRF named-entity tagging."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    train = commands.add_parser(
        "train",
        help="train and evaluate the tagger (the same as python train.py)",
        description="Trains on train.txt, keeps the epoch with the best dev entity F1, evaluates it on dev and "
        "test, and writes reports, metrics, checkpoints and an export into output_dir.",
    )
    add_train_arguments(train)
    train.set_defaults(run=_train)

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
    embed.add_argument("--batch-size", type=positive_int, default=64)
    embed.add_argument(
        "--threads", type=positive_int, help="torch CPU threads (1 is fastest on a busy machine)"
    )
    embed.add_argument(
        "--stateful", action="store_true", help="carry LSTM state across batches (reference parity)"
    )
    embed.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    embed.add_argument(
        "--context", default="sentence", choices=["sentence", "document"],
        help="document: consecutive non-empty lines form a document read as one stream; an empty line ends it",
    )  # fmt: skip
    embed.add_argument(
        "--max-stream-positions", type=int, default=2048,
        help="document context: longer documents are read in chunks of whole sentences (tokens + 2 per sentence)",
    )  # fmt: skip
    embed.add_argument(
        "--outputs", metavar="NAMES",
        help="write TF-Hub ELMo's named outputs instead: 'all' or a comma-separated subset of word_emb,"
        "lstm_outputs1,lstm_outputs2,elmo,default; one hdf5 group per line (docs/tfhub_outputs.md)",
    )  # fmt: skip
    embed.add_argument(
        "--scalar-mix",
        metavar="W0,W1,...",
        help="with --outputs: pre-softmax layer weights (default uniform)",
    )
    embed.add_argument("--gamma", type=float, help="with --outputs: the mix's scale (default 1)")
    embed.add_argument(
        "--precision", default="fp32", choices=["fp32", "bf16"],
        help="bf16: autocast on CPUs with AVX512-BF16/AMX or on a GPU (faster, not bit-exact); output stays float32",
    )  # fmt: skip
    embed.set_defaults(run=_embed)

    export = commands.add_parser(
        "export",
        help="export a train.py checkpoint: safetensors weights, JSON vocabularies and spec, the biLM files",
        description="Writes DIR/model.safetensors, DIR/tagger.json and DIR/bilm/{options.json,weights.hdf5}; "
        "loading it runs no pickle.",
    )
    export.add_argument("--checkpoint", required=True, help="a checkpoint from RUN/checkpoints/")
    export.add_argument("--output", required=True, help="the export directory")
    export.set_defaults(run=_export)

    predict = commands.add_parser(
        "predict",
        help="tag raw text (JSON lines with character offsets) or CoNLL tokens with an exported model",
        description="text: each input line is tokenised like CoNLL-2003 and gives one JSON object "
        '{"text", "entities": [{"start", "end", "type", "text", "score"}]} with line[start:end] == text. '
        "conll: one token per line (first column), blank line between sentences; the predicted tag is appended.",
    )
    predict.add_argument("--model", required=True, help="an export directory")
    predict.add_argument("--input", required=True, help="a file, or - for standard input")
    predict.add_argument(
        "--format", default="text", choices=["text", "conll", "html"],
        help="html: one self-contained page, the text with its entities highlighted by type",
    )  # fmt: skip
    predict.add_argument("--batch-size", type=positive_int, default=64)
    predict.add_argument(
        "--threads", type=positive_int, help="torch CPU threads (1 is fastest on a busy machine)"
    )
    predict.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    predict.set_defaults(run=_predict)

    compare = commands.add_parser(
        "compare",
        help="compare finished runs: dev/test F1 mean +/- std per config, per entity type, paired by seed",
        description="Groups the run folders by config (seed, output_dir, threads, logging and cache keys left "
        "out) and data, and prints Markdown tables: F1 mean +/- sample std over seeds, per entity type, and "
        "per-seed differences between configs that share seeds (docs/compare_and_predict_html.md).",
    )
    compare.add_argument("runs", nargs="+", metavar="RUN_DIR", help="train.py output folders")
    compare.add_argument("--html", metavar="FILE", help="also write the tables and a chart to one HTML file")
    compare.set_defaults(run=_compare)

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
    pretrain.set_defaults(run=_pretrain_bilm)

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
    ppl.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ppl.set_defaults(run=_bilm_perplexity)

    report = commands.add_parser(
        "report",
        help="write a run folder's self-contained HTML report (curves, per-type scores, errors, ELMo weights)",
        description="Reads metrics.json, logs/metrics.csv, predictions_{dev,test}.conll and the trained weights "
        "of a train.py run folder and writes one HTML file with its images embedded (docs/report.md).",
    )
    report.add_argument("run_dir", metavar="RUN_DIR", help="a train.py output_dir")
    report.add_argument("--output", help="the HTML file (default RUN_DIR/report.html)")
    report.set_defaults(run=_report)

    from ner_app.download import DEFAULT_BASE_URL, MODELS  # no torch at import: cheap for every command

    download = commands.add_parser(
        "download-elmo",
        help="download a public AllenNLP ELMo (options.json and weights hdf5), resumable and checked",
        description="Fetches the options and weights of an AllenNLP ELMo into --output (an interrupted download "
        "resumes from DIR/NAME.part), checks size, checksum where one is known, and structure, then prints the "
        "elmo.options=... and elmo.weights=... overrides that use them (docs/download.md).",
    )
    download.add_argument("model", choices=list(MODELS), help="which ELMo")
    download.add_argument("--output", required=True, help="the folder to download into")
    download.add_argument("--base-url", default=DEFAULT_BASE_URL, help="a mirror with the same layout")
    download.set_defaults(run=_download_elmo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        # Overrides may come before or after --resume, which argparse only allows outside subparsers.
        parser = argparse.ArgumentParser(prog="python -m ner_app train", description=__doc__)
        add_train_arguments(parser)
        args = parser.parse_intermixed_args(argv[1:])
        args.run = _train
    else:
        args = build_parser().parse_args(argv)
    # One policy for every command: a user's mistake is one line and exit 2, a bug keeps its traceback.
    return run_reporting_errors(lambda: args.run(args))


if __name__ == "__main__":
    sys.exit(main())
