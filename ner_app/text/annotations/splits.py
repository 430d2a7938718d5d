"""Training data in any supported format: the file of each split in a folder, read into CoNLL sentences.

A split ``NAME`` (``train``, ``valid``, ``test``) is ``NAME.txt`` (CoNLL, as always), or ``NAME`` with a
suffix of some format of the registry (``Format.suffixes``: ``NAME.conll``, ``NAME.conllu``, ``NAME.jsonl``,
``NAME.json``, or a brat folder ``NAME/``), looked up in the registry's order. Span formats go through the same
conversion as ``convert`` (its policies: ``data.align``, ``data.overlap``, ``data.labels``, ``data.types``,
``data.outside``, ``data.keep_unannotated``), and its audit is logged.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

from ner_app.text.annotations.convert import Options, convert_files
from ner_app.text.annotations.model import DISAGREE, LEFT_OUT, AnnotationFormatError, Audit
from ner_app.text.annotations.registry import detect_format, span_formats, split_suffixes
from ner_app.text.annotations.resolve import Policy, retag
from ner_app.text.conll import Sentence, read_conll
from ner_app.text.tags import detect_scheme

log = logging.getLogger("ner_app")


def split_file(folder: Path, name: str, fmt: str | None) -> Path | None:
    """The file (a folder, for brat) of split ``name`` in ``folder``, or None. Two of them (a stale
    ``train.txt`` beside the ``train.jsonl`` meant) are refused naming both: neither silently wins."""
    found = []
    for suffix in split_suffixes(fmt):
        path = folder / f"{name}{suffix}"
        # not is_file(): a FIFO or device under a split's name is found, and its reader names it as such
        exists = path.is_dir() if suffix == "" else path.exists() and not path.is_dir()
        if exists and (suffix or any(path.rglob("*.ann"))):
            found.append(path)
    if len(found) > 1:
        raise AnnotationFormatError(
            f"{found[0]} and {found[1]}: two files of split {name} in {folder}; expected one (move the other "
            "away, or name the format: data.format, check-data --format)"
        )
    if found and not found[0].resolve().is_relative_to(folder.resolve()):  # read as given: nothing outside
        raise AnnotationFormatError(
            f"{found[0]}: a symbolic link to {found[0].resolve()}, outside {folder}; a data folder's splits are "
            "read from inside it: copy the file in, or name its own folder as data.dir"
        )
    return found[0] if found else None


def is_brat_folder(path: Path, fmt: str | None) -> bool:
    """Whether ``path`` is a folder of brat files read as such (``fmt`` brat, or None: detected)."""
    return fmt in (None, "brat") and path.is_dir() and any(path.rglob("*.ann"))


def accepted_names(name: str, fmt: str | None = None) -> str:
    """The names the file of split ``name`` may have in format ``fmt`` (None: any), in lookup order, for
    messages: ``train.txt, train.conll, ..., train/ (a brat folder)``."""
    return ", ".join(f"{name}{s}" if s else f"{name}/ (a brat folder)" for s in split_suffixes(fmt))


def split_suffix(fmt: str) -> str:
    """How the split files of ``fmt`` end (a brat split is a folder: ``/``)."""
    return split_suffixes(fmt)[0] or "/"


def split_files(path: Path) -> list[Path]:
    """Every file whose bytes are the data of a split file (a brat folder: its .ann and .txt files)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".ann", ".txt") and p.is_file())
    return [path]


def split_format(path: Path, fmt: str | None, option: str = "data.format") -> str:
    """The format of a split file: ``fmt``, else CoNLL for ``.txt``, else detected (``option`` names the
    format in a message when nothing fits)."""
    return fmt or ("conll" if path.suffix == ".txt" else detect_format(path, option))


def read_split(
    path: Path,
    fmt: str | None,
    tag_column: int = -1,
    options: Options | None = None,
    audit: Audit | None = None,
) -> list[Sentence]:
    """The sentences of one split file; CoNLL tags as in the file, other formats' in ``options.scheme``. Span
    formats are converted with ``options`` (default: ``convert``'s defaults); the changed spans go to
    ``audit``, or are logged as warnings when none is given."""
    options = options or Options(Policy({}, None), tag_column=tag_column, format_option="data.format")
    fmt = split_format(path, fmt, options.format_option)
    if fmt == "conll":
        if options.outside != "O":
            raise AnnotationFormatError(
                f"{path}: outside unknown is for span formats; a CoNLL file marks each token that was not "
                "annotated with the tag - (set data.outside: O)"
            )
    logged = audit is None
    audit = Audit() if audit is None else audit
    if fmt == "conll":
        tagged = _policy_applied(read_conll(path, options.tag_column), str(path), options.policy, audit)
        for line in audit.lines if logged else []:
            log.warning("%s", line)
        return tagged
    converted = convert_files(fmt, [path], options, audit)
    records = audit.records_summary(options.keep_unannotated, "data.keep_unannotated: true")
    if logged:
        for line in [*audit.lines, *audit.records.get(DISAGREE, [])]:
            log.warning("%s", line)
        if audit.lines:
            log.warning("%s: %d spans moved, cut or dropped (listed above)", path, audit.changed)
        if records:
            log.warning("%s: %s", path, records)
    placed = fmt in span_formats()  # a document of raw text is one place: a task, a line, a brat file
    sentences: list[Sentence] = []
    for doc, document in enumerate(converted):
        found = re.search(r":(\d+)", document.where[len(str(path)) :])
        first = (
            int(found.group(1)) if found else 1
        )  # the document's line (its sentences have none of their own)
        where = document.where if placed else None
        sentences.extend(
            Sentence(tokens, tags, first, doc, where) for tokens, tags in document.sentences if tokens
        )
    if not sentences:
        raise AnnotationFormatError(f"{path}: no sentences in it" + (f" ({records})" if records else ""))
    return sentences


def _policy_applied(sentences: list[Sentence], path: str, policy: Policy, audit: Audit) -> list[Sentence]:
    """CoNLL sentences with ``data.labels`` and ``data.types`` applied tag by tag, as to every other format
    (the file's scheme and its ``-`` tags kept); the entities left out named in ``audit``."""
    if not policy.labels and policy.types is None:
        return sentences
    scheme = detect_scheme(s.tags for s in sentences)
    out = []
    for s in sentences:
        tags, left_out = retag(s.tags, scheme, policy, f"{path}:{s.line}")
        for kind, start, end in left_out:
            shown = " ".join(s.tokens[start:end])
            audit.report(
                f"{path}:{s.line + start}",
                LEFT_OUT,
                shown,
                kind,
                "its type is not among --types (data.types)",
            )
        out.append(dataclasses.replace(s, tags=tags))
    return out
