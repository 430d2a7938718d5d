"""read_conll: sentences, documents, line numbers and every error message."""

from __future__ import annotations

from pathlib import Path

import pytest

from ner_app.text.conll import ConllFormatError, Sentence, read_conll
from ner_app.train.corpus import load_local_splits

FOUR = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O
"""


def write(tmp_path: Path, text: str | bytes, name: str = "data.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_reads_sentences_documents_and_lines(tmp_path: Path) -> None:
    sentences = read_conll(write(tmp_path, FOUR))
    assert sentences == [
        Sentence(["EU", "rejects", "German"], ["I-ORG", "O", "I-MISC"], line=3, doc=0),
        Sentence(["Peter", "Blackburn"], ["I-PER", "I-PER"], line=7, doc=0),
        Sentence(["BRUSSELS", "1996-08-22"], ["I-LOC", "O"], line=12, doc=1),
    ]


def test_last_sentence_without_trailing_blank_line(tmp_path: Path) -> None:
    sentences = read_conll(write(tmp_path, "a O\nb B-X\n\n\n\nc I-Y"))
    assert [(s.tokens, s.tags, s.line) for s in sentences] == [
        (["a", "b"], ["O", "B-X"], 1),
        (["c"], ["I-Y"], 6),
    ]


def test_two_columns_tabs_and_crlf(tmp_path: Path) -> None:
    sentences = read_conll(write(tmp_path, "Paris\tS-LOC\r\nis\tO\r\n\r\nOK\tE-ORG\r\n"))
    assert [(s.tokens, s.tags) for s in sentences] == [(["Paris", "is"], ["S-LOC", "O"]), (["OK"], ["E-ORG"])]


def test_sentences_before_the_first_docstart_are_document_zero(tmp_path: Path) -> None:
    text = "a O\n\n-DOCSTART- O\n\nb O\n-DOCSTART- O\nc O\n"
    sentences = read_conll(write(tmp_path, text))
    # a -DOCSTART- right after a token line still ends the sentence
    assert [(s.tokens, s.doc) for s in sentences] == [(["a"], 0), (["b"], 1), (["c"], 2)]


def test_wrong_column_count(tmp_path: Path) -> None:
    path = write(tmp_path, "EU NNP I-NP I-ORG\n\nEU rejects O\n")
    with pytest.raises(ConllFormatError) as err:
        read_conll(path)
    assert str(err.value) == f"{path}:3: expected 4 columns (token ... tag), found 3: 'EU rejects O'"


def test_wrong_column_count_two_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "EU I-ORG\nrejects VBZ O\n")
    with pytest.raises(
        ConllFormatError, match=r":2: expected 2 columns \(token tag\), found 3: 'rejects VBZ O'$"
    ):
        read_conll(path)


def test_single_column(tmp_path: Path) -> None:
    path = write(tmp_path, "\nEU\n")
    with pytest.raises(ConllFormatError) as err:
        read_conll(path)
    assert str(err.value) == f"{path}:2: expected at least 2 columns (token ... tag), found 1: 'EU'"


@pytest.mark.parametrize("tag", ["B-", "X-PER", "b-PER", "PER", "0", "I_PER"])
def test_invalid_tag(tmp_path: Path, tag: str) -> None:
    path = write(tmp_path, f"EU NNP O\nrejects VBZ {tag}\n")
    with pytest.raises(ConllFormatError) as err:
        read_conll(path)
    assert str(err.value) == (
        f"{path}:2: expected a tag O, B-X, I-X, E-X, S-X or - in the last column, "
        f"found {tag!r}: 'rejects VBZ {tag}'"
    )


@pytest.mark.parametrize("text", ["", "\n\n  \n", "-DOCSTART- -X- O O\n\n-DOCSTART- -X- O O\n"])
def test_no_sentences(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConllFormatError) as err:
        read_conll(path)
    assert str(err.value) == (
        f"{path}: no sentences found (expected CoNLL format: token ... tag per line, blank line between sentences)"
    )


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, b"EU O\n\nM\xfcller I-PER\n")  # Latin-1 u-umlaut
    with pytest.raises(ConllFormatError) as err:
        read_conll(path)
    assert (
        str(err.value)
        == f"{path}:3: expected UTF-8 text, found byte 0xfc at column 2 that is not valid UTF-8"
    )


def test_utf8_tokens_are_fine(tmp_path: Path) -> None:
    assert read_conll(write(tmp_path, "Müller I-PER\n"))[0].tokens == ["Müller"]


def test_format_error_is_a_value_error() -> None:
    assert issubclass(ConllFormatError, ValueError)


def test_load_local_splits(tmp_path: Path) -> None:
    for name in ("train", "valid", "test"):
        write(tmp_path, FOUR, f"{name}.txt")
    splits = load_local_splits(str(tmp_path))
    assert set(splits) == {"train", "valid", "test"}
    assert splits["test"][2] == {"tokens": ["BRUSSELS", "1996-08-22"], "tags": ["I-LOC", "O"], "doc": 1}


def test_load_local_splits_names_the_missing_file(tmp_path: Path) -> None:
    write(tmp_path, FOUR, "train.txt")
    write(tmp_path, FOUR, "test.txt")
    with pytest.raises(FileNotFoundError) as err:
        load_local_splits(str(tmp_path))
    assert str(err.value) == (
        f"{tmp_path / 'valid.txt'}: not found (data.dir must hold a train, a valid and a test file; valid's may "
        "be named valid.txt, valid.conll, valid.conllu, valid.jsonl, valid.json, valid/ (a brat folder); "
        "ner-app split makes the three from one export)"
    )
