"""The argument types and shared arguments of the command line, and ``Owned``: a default that a module of the
package owns (a batch size, a token budget, a port) is named, never restated, and imported only when the command
reads it (``OwnedNamespace``) or its help is shown, so parsing the command line imports nothing heavy.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ner_app.files import Claim


class Owned:
    """The default of another module, one without torch (``--help`` shows it): a name
    (``Owned("ner_app.text.batching", "EMBED_MAX_TOKENS")``), a dataclass field (``"ServeSpec.port"``) or a
    function's parameter (``"f.batch_size"``)."""

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


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, found {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, found {value}")
    return value


def probability(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1], found {text!r}") from None
    if not 0.0 <= value <= 1.0:  # nan fails this too
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1], found {text!r}")
    return value


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


def add_model_arguments(
    parser: argparse.ArgumentParser, batch_size: Owned, max_tokens_help: str | None, threads_help: str = ""
) -> None:
    """--model, --batch-size, --threads, --device (and --max-tokens unless its help is None) of the commands
    that tag with an export."""
    parser.add_argument(
        "--model",
        help="an export directory or an ONNX folder (export --onnx; runs without torch) (default: the shipped "
        "CoNLL-2003 tagger, data/models/conll2003)",
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


class OldSpelling(argparse.Action):
    """An option's former name, still accepted: the value goes to the new option's ``dest``, the spelling used
    to ``<dest>_option`` (errors name what was typed), and one line on stderr names the new spelling."""

    def __init__(self, option_strings: list[str], dest: str, new: str, command: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.new, self.command = new, command

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"note: {self.command} {option_string} is now {self.new}; the old name still works",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_option", option_string)


def add_gold_argument(parser: argparse.ArgumentParser, command: str, old: str) -> None:
    """``--gold FILE`` (required), the gold file of every command that scores against gold tags, its former
    name ``old`` (``args.gold_option`` is the spelling used), and ``--from FORMAT`` (``args.fmt``), its format as
    ``convert`` and training read it (default: detected)."""
    from ner_app.text.annotations.registry import format_names

    gold = parser.add_mutually_exclusive_group(required=True)
    gold.add_argument(
        "--gold",
        metavar="FILE",
        help="gold data in any format training reads: CoNLL (tags in the last column), a Label Studio, doccano, "
        "Prodigy, CoNLL-U or JSONL export, or a brat folder",
    )
    gold.add_argument(old, dest="gold", metavar="FILE", action=OldSpelling, new="--gold", command=command)
    parser.add_argument(
        "--from", dest="fmt", choices=format_names(), help="the gold file's format (default: detected)"
    )
    parser.set_defaults(gold_option="--gold")


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    """``--overwrite``, the same on every command that writes (docs/reliability.md#the-output-policy)."""
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing output that this command did not write, or that was changed since it wrote "
        "it (default: refused in one line; a folder's other files are never removed)",
    )


def output_claim(args: argparse.Namespace, option: str = "--output", *also: str) -> Claim:
    """The ``files.Claim`` of this command's output named by ``option``: its name and ``--overwrite``
    (``also``: other commands whose unchanged output it may replace)."""
    from ner_app.files import Claim

    return Claim(args.command, bool(getattr(args, "overwrite", False)), option, also)
