"""``pretrain-bilm``: a biLM pretrained on raw text (``pretrain/run.py``) and exported in the public ELMo
format."""

from __future__ import annotations

import argparse

from ner_app.cli.arguments import positive_int
from ner_app.cli.common import until_sigterm


def add_parser(commands: argparse._SubParsersAction) -> None:
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


def run(args: argparse.Namespace) -> int:

    from ner_app.config.checks import check_pretrain_config
    from ner_app.config.load import BilmPretrainConfig, load_config
    from ner_app.errors import SIGTERM_EXIT

    overrides = [*args.overrides, *([f"train.threads={args.threads}"] if args.threads else [])]
    cfg = load_config(args.config, overrides, schema=BilmPretrainConfig)
    check_pretrain_config(cfg)  # before torch and Lightning: a bad value is one line in a second
    from ner_app.progress import console_logging

    console_logging()
    from ner_app.pretrain.run import run_pretraining  # heavy imports after the config is known to be valid

    metrics = until_sigterm(lambda: run_pretraining(cfg, resume=args.resume), cfg.output_dir)
    if metrics is None:
        return SIGTERM_EXIT
    if not metrics:  # a DDP rank other than 0: rank 0 reports
        return 0
    for name, result in metrics["heldout"].items():
        print(
            f"{name} ({result['context']} context): perplexity forward {result['forward']:.2f} "
            f"backward {result['backward']:.2f} mean {result['mean']:.2f}"
        )
    print(f"{metrics['steps']} steps; biLM written to {cfg.output_dir} (metrics.json)")
    return 0
