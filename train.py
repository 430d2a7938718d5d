"""Train and evaluate the [x; ELMo] BiLSTM-CRF tagger: ``python train.py --config configs/X.yaml [key=value ...]``."""

from __future__ import annotations

import argparse
import logging
import sys

from ner_app.config import ConfigError, load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, help="a YAML file in configs/")
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in output_dir from its last checkpoint"
    )
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        cfg = load_config(args.config, args.overrides)
    except (ConfigError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from ner_app.training.run import run_training  # heavy imports after the config is known to be valid

    try:
        metrics = run_training(cfg, resume=args.resume)
    except (FileNotFoundError, ValueError) as err:  # bad paths and files: one clear line, no traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"dev F1 {metrics['dev']['f1']:.2f}  test F1 {metrics['test']['f1']:.2f}  ({cfg.output_dir}/metrics.json)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
