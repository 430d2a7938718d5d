"""``bilm-perplexity``: the exact held-out perplexity of a pretrain-bilm output folder
(``pretrain/perplexity.py``), per direction and context."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ner_app.cli.arguments import add_overwrite_argument, output_claim, positive_int
from ner_app.cli.common import is_stdout


class _JsonOrOldFile(argparse.Action):
    """``--json`` prints the results as JSON; ``--json FILE``, its former meaning, is ``--output FILE`` (one
    line on stderr says so)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            namespace.json = True
            return
        print(
            "note: bilm-perplexity --json FILE is now --output FILE (--json prints the JSON); the old form "
            "still works",
            file=sys.stderr,
        )
        namespace.output = values


def add_parser(commands: argparse._SubParsersAction) -> None:
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
    ppl.add_argument(
        "--json",
        nargs="?",
        default=False,
        action=_JsonOrOldFile,
        help="print the results as JSON instead of the table",
    )
    ppl.add_argument(
        "--output", metavar="FILE", help="also write the results as JSON here (- for standard output)"
    )
    add_overwrite_argument(ppl)


def run(args: argparse.Namespace) -> int:
    import json

    from ner_app.jobs.setup import set_threads
    from ner_app.pretrain.perplexity import heldout_perplexities

    set_threads(args.threads)
    if args.output:
        from ner_app.files import claim_file

        claim_file(args.output, output_claim(args))  # before the work: never a file it did not write
    results = heldout_perplexities(args.run_dir, args.heldout, args.context, args.max_sentences)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        # --output -: standard output holds the JSON, the table goes to stderr
        shown = sys.stderr if args.output and is_stdout(args.output) else sys.stdout
        print(
            "| held-out file | context | sentences | predicted per direction | forward | backward | mean |",
            file=shown,
        )
        print("|---|---|---:|---:|---:|---:|---:|", file=shown)
        for name, result in results.items():
            for context, r in result["contexts"].items():
                print(
                    f"| {name} | {context} | {result['sentences']:,} | {r['predicted_tokens']:,} | "
                    f"{r['forward']:.1f} | {r['backward']:.1f} | {r['mean']:.1f} |",
                    file=shown,
                )
    if args.output:
        from ner_app.files import write_text

        write_text(args.output, json.dumps(results, indent=2) + "\n", output_claim(args))
    return 0
