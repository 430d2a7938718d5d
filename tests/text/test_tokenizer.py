"""CoNLL-2003-style tokenisation of raw text: one table per rule, exact offsets, sentences, speed."""

from __future__ import annotations

import dataclasses
import random

import pytest

from ner_app.text.tokenizer import Token, sentences, tokenize


def texts(text: str) -> list[str]:
    return [t.text for t in tokenize(text)]


def assert_offsets(text: str, tokens: list[Token]) -> None:
    """Every token is a non-empty, whitespace-free slice of text, in increasing, non-overlapping order."""
    end = 0
    for t in tokens:
        assert text[t.start : t.end] == t.text
        assert t.text and not any(c.isspace() for c in t.text)
        assert t.start >= end
        end = t.end


def table(*rows: tuple[str, str]) -> list:
    """Rows of (raw text, expected tokens joined by single spaces)."""
    return [pytest.param(raw, expected.split(" "), id=raw) for raw, expected in rows]


CONLL = table(
    ("EU rejects German call to boycott British lamb.", "EU rejects German call to boycott British lamb ."),
    ("Peter Blackburn", "Peter Blackburn"),
    ("BRUSSELS 1996-08-22", "BRUSSELS 1996-08-22"),
    (
        "The European Commission said on Thursday it disagreed with German advice to consumers to shun "
        "British lamb until scientists determine whether mad cow disease can be transmitted to sheep.",
        "The European Commission said on Thursday it disagreed with German advice to consumers to shun "
        "British lamb until scientists determine whether mad cow disease can be transmitted to sheep .",
    ),
)
PUNCTUATION = table(
    ("Hello, world!", "Hello , world !"),
    ("Wait; what: now?", "Wait ; what : now ?"),
    ("(a) [b] {c}", "( a ) [ b ] { c }"),
    ('He said "yes."', 'He said " yes . "'),
    ("'quoted' `tick`", "' quoted ' ` tick `"),
    ("“curly” ‘single’ «guillemets»", "“ curly ” ‘ single ’ « guillemets »"),
    ("``Treebank quotes''", "`` Treebank quotes ''"),
    ("Wait... what", "Wait ... what"),
    ("end.", "end ."),
)
ABBREVIATIONS = table(
    ("Mr. Smith and Mrs. Jones", "Mr. Smith and Mrs. Jones"),
    ("J. R. Ewing", "J. R. Ewing"),
    ("the U.S. and U.K. at 5 a.m.", "the U.S. and U.K. at 5 a.m."),
    ("Dr. Prof. St. Jr. Sr. Inc. Ltd. Bros.", "Dr. Prof. St. Jr. Sr. Inc. Ltd. Bros."),
    ("Gen. Gov. Sen. Rep. Lt. Col. Sgt. Capt. Mt.", "Gen. Gov. Sen. Rep. Lt. Col. Sgt. Capt. Mt."),
    (
        "Jan. Feb. Mar. Apr. Aug. Sep. Sept. Oct. Nov. Dec.",
        "Jan. Feb. Mar. Apr. Aug. Sep. Sept. Oct. Nov. Dec.",
    ),
    ("Mon. Tue. Wed. Thu. Fri. Sat. Sun.", "Mon. Tue. Wed. Thu. Fri. Sat. Sun."),
    ("apples vs. pears, etc.", "apples vs. pears , etc."),
    ("e.g., this", "e.g. , this"),
    ("He works at Acme Corp.", "He works at Acme Corp."),
    ("ACME CORP. said", "ACME CORP. said"),
    ("Co. Ltd. said", "Co. Ltd. said"),
    ("No. 5 but No.", "No. 5 but No ."),
    ("etc...", "etc ..."),
)
NUMBERS = table(
    ("3.5 1,000 10:30 1/2", "3.5 1,000 10:30 1/2"),
    ("1,000,000.50 and 22/08/1996", "1,000,000.50 and 22/08/1996"),
    ("-5 +3.5 (-2)", "-5 +3.5 ( -2 )"),
    ("rose 3.", "rose 3 ."),
    ("1,2, 3", "1,2 , 3"),
    ("3.5%", "3.5 %"),
)
HYPHENS = table(
    ("bio-identical far-reaching 1-0", "bio-identical far-reaching 1-0"),
    ("a 2-1 win", "a 2-1 win"),
    ("yes -- no", "yes -- no"),
    ("yes--no", "yes -- no"),
    ("yes - no", "yes - no"),
    ("pre- and post-war", "pre - and post-war"),
)
CLITICS = table(
    ("don't can't won't isn't", "do n't ca n't wo n't is n't"),
    ("DON'T", "DO N'T"),
    ("it's we're they've she'll he'd I'm", "it 's we 're they 've she 'll he 'd I 'm"),
    ("JOHN'S", "JOHN 'S"),
    ("U.S.'s", "U.S. 's"),
    ("the players' union", "the players ' union"),
    ("O'Neill's rock'n'roll", "O'Neill 's rock'n'roll"),
    ("don’t John’s", "do n’t John ’s"),
    ("'s alone", "' s alone"),
)
URLS = table(
    ("see http://example.com/a?b=1&c=2.", "see http://example.com/a?b=1&c=2 ."),
    ("(https://x.org/path)", "( https://x.org/path )"),
    ("www.x.com, ok", "www.x.com , ok"),
    ("mail a@b.com or first.last+tag@mail.co.uk.", "mail a@b.com or first.last+tag@mail.co.uk ."),
    ("Amazon.com said", "Amazon.com said"),
)
SYMBOLS = table(
    ("$5 and 50% off", "$ 5 and 50 % off"),
    ("US$1.5m", "US $ 1.5m"),
    ("AT&T R&D", "AT&T R&D"),
    ("salt & pepper", "salt & pepper"),
    ("#NLP @user_1", "#NLP @user_1"),
)
UNICODE = table(
    ("Zürich São 東京", "Zürich São 東京"),
    ("Zu\u0308rich", "Zu\u0308rich"),  # decomposed ü: the combining mark stays in the word
    ("Ελλάδα Москва हिन्दी", "Ελλάδα Москва हिन्दी"),
    ("Émile É. Zola", "Émile É. Zola"),
    ("hi😀there", "hi 😀 there"),
    ("👍🏽 👨\u200d👩\u200d👧 🇩🇪😀😀", "👍🏽 👨\u200d👩\u200d👧 🇩🇪 😀 😀"),
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    CONLL + PUNCTUATION + ABBREVIATIONS + NUMBERS + HYPHENS + CLITICS + URLS + SYMBOLS + UNICODE,
)
def test_tokens(raw: str, expected: list[str]) -> None:
    tokens = tokenize(raw)
    assert [t.text for t in tokens] == expected
    assert_offsets(raw, tokens)


@pytest.mark.parametrize("raw", ["", " ", "\t\n\r ", "\u00a0\u3000\u2028", "\u200b\ufeff"])
def test_empty_and_whitespace_only(raw: str) -> None:
    assert tokenize(raw) == []
    assert sentences(raw) == []


def test_whitespace_of_any_kind_separates() -> None:
    raw = "a\tb\nc  d\u00a0e\u3000f\u2029g\r\nh"
    assert texts(raw) == list("abcdefgh")


@pytest.mark.parametrize(
    "raw",
    [
        "He said, \"It's the U.S. team's day\" -- and won 3-1 (2.5%)!",
        "“Curly” ‘quotes’ and 'straight' \"ones\" don’t change",
        "Zürich  Zürich\tZürich\nZürich: São Paulo, 東京… 😀 👍🏽!",
        "the the the. the, the; the",
        "  leading and trailing\t\n",
        "mixed\u00a0spaces\u3000and\u200bzero-width",
    ],
)
def test_offsets_are_exact(raw: str) -> None:
    tokens = tokenize(raw)
    assert_offsets(raw, tokens)
    assert "".join(t.text for t in tokens) == "".join(c for c in raw if not c.isspace() and c != "\u200b")


def test_repeated_words_get_their_own_offsets() -> None:
    tokens = tokenize("the cat the cat")
    assert [(t.start, t.end) for t in tokens] == [(0, 3), (4, 7), (8, 11), (12, 15)]


def test_token_is_frozen() -> None:
    token = tokenize("word")[0]
    assert token == Token("word", 0, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        token.text = "other"  # type: ignore[misc]


ALPHABET = (
    "abcXYZ019" + " \t\n" + ".,;:!?()[]{}\"'`-/$%&#@+_*" + "“”‘’«»–—…" + "éüßçÉ東京Жя\u0301" + "😀🏽\u200d"
)


def test_random_strings_keep_every_character() -> None:
    rng = random.Random(2003)
    for _ in range(200):
        raw = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80)))
        tokens = tokenize(raw)
        assert_offsets(raw, tokens)
        assert "".join(t.text for t in tokens) == "".join(c for c in raw if not c.isspace())


def test_sentences_split_at_terminals_before_capitals_and_quotes() -> None:
    raw = 'He left. She stayed! Why? "Because." Then Mr. Smith came at 5 p.m. and left. ok'
    got = [" ".join(t.text for t in s) for s in sentences(raw)]
    assert got == [
        "He left .",
        "She stayed !",
        "Why ?",
        '" Because . "',
        "Then Mr. Smith came at 5 p.m. and left . ok",
    ]


def test_sentences_keep_glued_closing_quotes() -> None:
    got = [" ".join(t.text for t in s) for s in sentences('He said "no." Then (he left.) And?! Yes')]
    assert got == ['He said " no . "', "Then ( he left . )", "And ? !", "Yes"]


def test_sentences_accept_tokens_and_keep_offsets() -> None:
    raw = "One. Two."
    tokens = tokenize(raw)
    assert sentences(tokens) == sentences(raw) == [tokens[:2], tokens[2:]]


def test_sentences_cap_at_max_tokens() -> None:
    pieces = sentences("a b c d e f g. H", max_tokens=3)
    assert [[t.text for t in p] for p in pieces] == [["a", "b", "c"], ["d", "e", "f"], ["g", "."], ["H"]]
    with pytest.raises(ValueError):
        sentences("a", max_tokens=0)


def test_fifty_thousand_token_line() -> None:
    words = ["lamb", "U.S.", "1,000", "don't", "far-reaching", "Zürich", ",", "the"]
    raw = " ".join(words[i % len(words)] for i in range(50_000))
    tokens = tokenize(raw)
    assert len(tokens) == 50_000 + 50_000 // len(words)  # "don't" is two tokens
    pieces = sentences(tokens)
    assert all(0 < len(p) <= 250 for p in pieces)
    assert [t for p in pieces for t in p] == tokens
    assert all(len(p) <= 64 for p in sentences(tokens, max_tokens=64))


@pytest.mark.parametrize("unit", ["a.", "a+", "a-", "1.", "x'", "'s", "a.b", "@a", "U.S.", "www.", "n't"])
def test_long_runs_that_several_rules_could_start_on(unit: str) -> None:
    # Inputs that made an earlier pattern backtrack quadratically; speed itself is measured in benchmarks.
    raw = unit * (30_000 // len(unit))
    tokens = tokenize(raw)
    assert "".join(t.text for t in tokens) == raw
    assert all(raw[t.start : t.end] == t.text for t in tokens)
