"""Character ids exactly as docs/bilm_reference.md section 1 describes them."""

import torch

from ner_app.bilm.char_mapper import MAX_CHARS, batch_to_ids, token_to_ids

BOW, EOW, PAD = 259, 260, 261  # after the +1 shift


def expected(byte_values: list[int]) -> list[int]:
    ids = [BOW] + [b + 1 for b in byte_values] + [EOW]
    return ids + [PAD] * (MAX_CHARS - len(ids))


def test_ascii_token():
    assert list(token_to_ids("Hi")) == expected([72, 105])


def test_multibyte_utf8_uses_bytes():
    assert list(token_to_ids("é")) == expected([0xC3, 0xA9])
    assert list(token_to_ids("東京")) == expected(list("東京".encode()))


def test_emoji_is_four_bytes():
    ids = token_to_ids("😀")
    assert list(ids) == expected([0xF0, 0x9F, 0x98, 0x80])


def test_long_token_cut_at_48_bytes():
    token = "a" * 60
    ids = token_to_ids(token)
    assert len(ids) == MAX_CHARS
    assert list(ids) == [BOW] + [ord("a") + 1] * 48 + [EOW]


def test_cut_inside_multibyte_character_keeps_partial_bytes():
    token = "a" * 47 + "é"  # 49 bytes: the cut at 48 keeps only the first byte of é
    assert list(token_to_ids(token)) == [BOW] + [ord("a") + 1] * 47 + [0xC3 + 1] + [EOW]


def test_sentence_boundaries():
    assert list(token_to_ids("<S>")) == [BOW, 257, EOW] + [PAD] * 47
    assert list(token_to_ids("</S>")) == [BOW, 258, EOW] + [PAD] * 47


def test_empty_string_is_a_real_token():
    assert list(token_to_ids("")) == [BOW, EOW] + [PAD] * 48


def test_batch_pads_with_zeros():
    ids = batch_to_ids([["a", "b", "c"], ["d"], []])
    assert ids.shape == (3, 3, MAX_CHARS)
    assert ids.dtype == torch.long
    assert torch.equal(ids[1, 1:], torch.zeros(2, MAX_CHARS, dtype=torch.long))
    assert torch.equal(ids[2], torch.zeros(3, MAX_CHARS, dtype=torch.long))
    assert list(ids[0, 2]) == expected([ord("c")])
