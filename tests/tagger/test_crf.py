"""CRF and tag-scheme constraints: brute-force oracles, pytorch-crf parity, padding, autocast, errors."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torchcrf

from ner_app.tagger.crf.constraints import allowed_transitions
from ner_app.tagger.crf.crf import CRF, EMPTY_SENTENCE, FORBIDDEN, MASK_NOT_LEFT_ALIGNED

LENGTHS = [4, 1, 3, 2]  # rows of different lengths, T = 4


def make_batch(num_tags: int, lengths: list[int], seed: int = 0, scale: float = 1.0):
    """Random emissions (B, T, K), tags (B, T) (-100 at padding) and a left-aligned mask (B, T)."""
    gen = torch.Generator().manual_seed(seed)
    steps = max(lengths)
    emissions = torch.randn(len(lengths), steps, num_tags, generator=gen) * scale
    tags = torch.randint(num_tags, (len(lengths), steps), generator=gen)
    mask = torch.arange(steps)[None, :] < torch.tensor(lengths)[:, None]
    return emissions, tags.masked_fill(~mask, -100), mask


def make_crf(num_tags: int, allowed=None, seed: int = 1) -> CRF:
    torch.manual_seed(seed)
    crf = CRF(num_tags, allowed)
    with torch.no_grad():  # larger than the default init so that paths are clearly separated
        for p in crf.parameters():
            p.uniform_(-1.0, 1.0)
    return crf


def path_score(crf: CRF, emissions: torch.Tensor, path: tuple[int, ...]) -> float:
    """Unconstrained score of one path for one sentence (T', K), in float64."""
    em = emissions.double()
    start, trans, end = (
        p.detach().double() for p in (crf.start_transitions, crf.transitions, crf.end_transitions)
    )
    score = start[path[0]] + end[path[-1]] + sum(em[t, y] for t, y in enumerate(path))
    score += sum(trans[a, b] for a, b in itertools.pairwise(path))
    return float(score)


def is_allowed(allowed, path: tuple[int, ...]) -> bool:
    start, trans, end = allowed
    return bool(start[path[0]] and end[path[-1]] and all(trans[a, b] for a, b in itertools.pairwise(path)))


def oracle(crf: CRF, emissions: torch.Tensor, length: int, allowed=None):
    """Brute force over the (allowed) paths of one sentence: log Z, best path and score, marginals (T', K)."""
    k = emissions.size(-1)
    paths = [
        p for p in itertools.product(range(k), repeat=length) if allowed is None or is_allowed(allowed, p)
    ]
    scores = torch.tensor([path_score(crf, emissions[:length], p) for p in paths], dtype=torch.float64)
    log_z = torch.logsumexp(scores, dim=0)
    post = torch.exp(scores - log_z)
    marg = torch.zeros(length, k, dtype=torch.float64)
    for p, w in zip(paths, post, strict=True):
        marg[torch.arange(length), torch.tensor(p)] += w
    best = int(scores.argmax())
    return float(log_z), paths[best], float(scores[best]), marg


TAGS_BIO = ["O", "B-PER", "I-PER"]
TAGS_BIOES = ["O", "B-X", "I-X", "E-X", "S-X"]


@pytest.mark.parametrize(
    ("num_tags", "tags", "scheme"),
    [(3, None, None), (4, None, None), (3, TAGS_BIO, "BIO"), (5, TAGS_BIOES, "BIOES"), (3, TAGS_BIO, "IOB1")],
)
def test_brute_force(num_tags, tags, scheme):
    allowed = None if scheme is None else allowed_transitions(tags, scheme)
    crf = make_crf(num_tags, allowed)
    emissions, _, mask = make_batch(num_tags, LENGTHS)
    gold = torch.zeros_like(mask, dtype=torch.long)  # "O" everywhere: an allowed path in every scheme
    # one entity in row 0: S-X S-X (BIOES), I-X B-X (IOB1), B-X I-X (BIO and unconstrained)
    gold[0, 1:3] = torch.tensor({"BIOES": [4, 4], "IOB1": [2, 1]}.get(scheme, [1, 2]))
    with torch.no_grad():
        llh = crf(emissions, gold, mask)
        paths, best_scores = crf.decode(emissions, mask)
        marginals = crf.marginals(emissions, mask)
    for b, length in enumerate(LENGTHS):
        log_z, best_path, best_score, marg = oracle(crf, emissions[b], length, allowed)
        gold_path = tuple(gold[b, :length].tolist())
        expected_llh = path_score(crf, emissions[b], gold_path) - log_z
        assert llh[b].item() == pytest.approx(expected_llh, abs=1e-4)
        assert tuple(paths[b, :length].tolist()) == best_path
        assert paths[b, length:].eq(0).all()
        assert best_scores[b].item() == pytest.approx(best_score, abs=1e-4)
        torch.testing.assert_close(marginals[b, :length].double(), marg, atol=1e-5, rtol=1e-5)
        assert marginals[b, length:].eq(0).all()


@pytest.mark.parametrize(("tags", "scheme"), [(TAGS_BIO, "BIO"), (TAGS_BIOES, "BIOES"), (TAGS_BIO, "IOB1")])
def test_decode_never_forbidden(tags, scheme):
    """Emissions that strongly favour malformed paths still decode to allowed ones."""
    allowed = allowed_transitions(tags, scheme)
    crf = make_crf(len(tags), allowed)
    with torch.no_grad():  # unconstrained parameters that reward forbidden transitions
        crf.transitions.copy_(torch.where(allowed[1], -5.0, 5.0))
        crf.start_transitions.copy_(torch.where(allowed[0], -5.0, 5.0))
        crf.end_transitions.copy_(torch.where(allowed[2], -5.0, 5.0))
    emissions, _, mask = make_batch(len(tags), [6, 5, 1, 3] * 8, seed=3, scale=20.0)
    with torch.no_grad():
        paths, _ = crf.decode(emissions, mask)
    for row, length in zip(paths.tolist(), mask.sum(1).tolist(), strict=True):
        assert is_allowed(allowed, tuple(row[:length])), row[:length]


def test_against_pytorch_crf():
    num_tags, lengths = 5, [7, 3, 5, 1, 7, 2]
    ours = make_crf(num_tags)
    ref = torchcrf.CRF(num_tags, batch_first=True)
    with torch.no_grad():
        for name in ("start_transitions", "transitions", "end_transitions"):
            getattr(ref, name).copy_(getattr(ours, name))
    emissions, tags, mask = make_batch(num_tags, lengths, seed=5)
    tags = tags.clamp(min=0)  # pytorch-crf indexes with padded tags too
    em_ours, em_ref = emissions.clone().requires_grad_(), emissions.clone().requires_grad_()

    llh_ours = ours(em_ours, tags, mask)
    llh_ref = ref(em_ref, tags, mask, reduction="none")
    torch.testing.assert_close(llh_ours, llh_ref)
    llh_ours.sum().backward()
    llh_ref.sum().backward()
    torch.testing.assert_close(em_ours.grad, em_ref.grad)
    for name in ("start_transitions", "transitions", "end_transitions"):
        torch.testing.assert_close(getattr(ours, name).grad, getattr(ref, name).grad)

    with torch.no_grad():
        paths, _ = ours.decode(emissions, mask)
        ref_paths = ref.decode(emissions, mask)
    assert [row[:n] for row, n in zip(paths.tolist(), lengths, strict=True)] == ref_paths


@pytest.mark.parametrize("scheme", [None, "BIO"])
def test_alone_equals_padded(scheme):
    allowed = None if scheme is None else allowed_transitions(TAGS_BIO, scheme)
    crf = make_crf(3, allowed)
    emissions, tags, mask = make_batch(3, [2, 6, 4], seed=7, scale=3.0)
    emissions[~mask] = 1e3  # padding must not leak into the results
    with torch.no_grad():
        llh = crf(emissions, tags, mask)
        paths, scores = crf.decode(emissions, mask)
        marg = crf.marginals(emissions, mask)
        for b, n in enumerate([2, 6, 4]):
            em, tg = emissions[b : b + 1, :n], tags[b : b + 1, :n]
            torch.testing.assert_close(crf(em, tg), llh[b : b + 1])
            alone_path, alone_score = crf.decode(em)
            assert torch.equal(alone_path, paths[b : b + 1, :n])
            torch.testing.assert_close(alone_score, scores[b : b + 1])
            torch.testing.assert_close(crf.marginals(em), marg[b : b + 1, :n])


def test_marginals_sum_to_one():
    crf = make_crf(4)
    emissions, _, mask = make_batch(4, [5, 2, 3], seed=11)
    with torch.no_grad():
        total = crf.marginals(emissions, mask).sum(-1)
    torch.testing.assert_close(total, mask.float())


def log_space_marginals(crf: CRF, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The textbook forward-backward in log space, in float64: the reference for long sentences."""
    em, start, trans, end = (x.double() for x in crf._tempered(emissions))
    alphas = torch.stack(crf._alphas(em, mask, start, trans), dim=1)  # (B, T, K)
    log_z = torch.logsumexp(alphas[:, -1] + end, dim=1)  # (B,)
    probs = torch.exp(alphas + crf._betas(em, mask, trans, end) - log_z[:, None, None])
    return probs.masked_fill(~mask[:, :, None], 0.0)


@pytest.mark.parametrize("temperature", [1.0, 1.86])
def test_marginals_of_long_sentences_are_exact_to_float32_rounding(temperature: float) -> None:
    """200 tokens of sharp emissions under the BIO constraints: float32 log-sums drift by 1e-4 there."""
    tags = ["O", "B-A", "I-A", "B-B", "I-B"]
    crf = make_crf(len(tags), allowed_transitions(tags, "BIO"))
    crf.temperature = temperature
    emissions, _, mask = make_batch(len(tags), [200, 37, 1, 120], seed=17, scale=4.0)
    with torch.no_grad():
        found = crf.marginals(emissions, mask)
        expected = log_space_marginals(crf, emissions, mask)
    assert found.dtype == torch.float32
    torch.testing.assert_close(found.double(), expected, atol=1e-6, rtol=0)
    assert found.min() >= 0 and found.max() <= 1


def test_autocast_bf16_matches_fp32():
    crf = make_crf(4, allowed_transitions(["O", "B-A", "I-A", "B-B"], "BIO"))
    emissions, tags, mask = make_batch(4, LENGTHS, seed=13, scale=2.0)
    emissions = emissions.bfloat16()  # what a bf16 projection layer hands over
    with torch.no_grad():
        expected = (crf(emissions.float(), tags, mask), *crf.decode(emissions.float(), mask))
        expected_marg = crf.marginals(emissions.float(), mask)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            found = (crf(emissions, tags, mask), *crf.decode(emissions, mask))
            found_marg = crf.marginals(emissions, mask)
            found_fp32_input = crf(emissions.float(), tags, mask)
    for exp, got in zip((*expected, expected_marg), (*found, found_marg), strict=True):
        assert got.dtype == exp.dtype
        assert torch.equal(got, exp)
    assert torch.equal(found_fp32_input, expected[0])


def test_constrained_gradients_finite():
    allowed = allowed_transitions(TAGS_BIOES, "BIOES")
    crf = make_crf(5, allowed)
    emissions, _, mask = make_batch(5, LENGTHS, seed=17)
    emissions.requires_grad_()
    bad = torch.full_like(mask, 2, dtype=torch.long)  # I-X everywhere: a forbidden gold path
    crf(emissions, bad, mask).sum().backward()
    assert torch.isfinite(emissions.grad).all()
    assert crf.transitions.grad[~allowed[1]].eq(0).all()  # forbidden scores are constants


def test_mask_errors():
    crf = CRF(3)
    emissions = torch.zeros(2, 3, 3)
    tags = torch.zeros(2, 3, dtype=torch.long)
    holes = torch.tensor([[True, False, True], [True, True, False]])
    with pytest.raises(ValueError) as err:
        crf(emissions, tags, holes)
    assert str(err.value) == MASK_NOT_LEFT_ALIGNED
    assert MASK_NOT_LEFT_ALIGNED == (
        "mask must be left-aligned: each row must be a run of True followed only by False"
    )
    empty = torch.tensor([[True, True, False], [False, False, False]])
    for call in (lambda: crf(emissions, tags, empty), lambda: crf.decode(emissions, empty)):
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == "every sentence must have at least one token: mask[:, 0] must be all True"
    assert EMPTY_SENTENCE == "every sentence must have at least one token: mask[:, 0] must be all True"
    with pytest.raises(ValueError) as err:
        crf.marginals(emissions, torch.ones(2, 3, dtype=torch.uint8))
    assert str(err.value) == "mask must be a bool tensor, found dtype torch.uint8"


def test_checked_skips_only_the_reads_of_the_mask_values():
    """``checked=True`` (masks built valid, ``encode_batch``'s): the same paths and marginals without asking the
    device about the mask's values; shape and dtype errors still raise."""
    crf = make_crf(5, allowed_transitions(["O", "B-X", "I-X", "E-X", "S-X"], "BIOES"))
    emissions, _, mask = make_batch(5, [4, 1, 3])
    paths, scores = crf.decode(emissions, mask)
    fast_paths, fast_scores = crf.decode(emissions, mask, checked=True)
    assert torch.equal(paths, fast_paths) and torch.equal(scores, fast_scores)
    assert torch.equal(crf.marginals(emissions, mask), crf.marginals(emissions, mask, checked=True))
    holes = torch.tensor([[True, False, True, True]] * 3)
    with pytest.raises(ValueError, match="left-aligned"):
        crf.decode(emissions, holes)
    crf.decode(emissions, holes, checked=True)  # not asked: the caller vouched for the mask
    with pytest.raises(ValueError, match="bool tensor"):
        crf.marginals(emissions, mask.to(torch.uint8), checked=True)


@pytest.mark.parametrize("lengths", [[4, 1, 3], [5, 3, 4, 3], [2, 2]])
def test_full_steps_change_nothing(lengths):
    """``full_steps`` (the shortest row's length, known on the host) skips the padding selects of the steps real
    in every row: for each valid value the same paths, scores, marginals, log-likelihoods and gradients, bit for
    bit, as without it."""
    crf = make_crf(5, allowed_transitions(["O", "B-X", "I-X", "E-X", "S-X"], "BIOES"))
    emissions, tags, mask = make_batch(5, lengths, seed=3)
    known = mask.clone()
    known[0, 1] = False  # one unannotated position: the partial-annotation lattice too

    def outputs(full: int) -> list[torch.Tensor]:
        em = emissions.clone().requires_grad_(True)
        crf.zero_grad()
        likelihood = crf(em, tags, mask, full_steps=full)
        partial = crf(em, tags, mask, known, full_steps=full)
        (likelihood.sum() + partial.sum()).backward()
        grads = [em.grad, *(p.grad for p in crf.parameters())]
        decoded = crf.decode(emissions, mask, full_steps=full)
        return [likelihood, partial, *grads, *decoded, crf.marginals(emissions, mask, full_steps=full)]

    expected = outputs(0)
    for full in range(1, min(lengths) + 1):
        for found, want in zip(outputs(full), expected, strict=True):
            assert torch.equal(found, want)


def test_full_steps_errors():
    crf = CRF(3)
    emissions, tags, mask = make_batch(3, [4, 2])
    cases = [
        (lambda: crf.decode(emissions, mask, full_steps=-1), "full_steps must lie in [0, T=4], found -1"),
        (lambda: crf.marginals(emissions, mask, full_steps=5), "full_steps must lie in [0, T=4], found 5"),
        (lambda: crf(emissions, tags, mask, full_steps=3), "full_steps=3, but a row of the mask is shorter"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == message


def test_shape_errors():
    crf = CRF(3)
    mask = torch.ones(2, 4, dtype=torch.bool)
    cases = [
        (lambda: crf.decode(torch.zeros(2, 4, 5)), "emissions must have shape (B, T, K=3), found (2, 4, 5)"),
        (lambda: crf.decode(torch.zeros(4, 3)), "emissions must have shape (B, T, K=3), found (4, 3)"),
        (
            lambda: crf(torch.zeros(2, 4, 3), torch.zeros(2, 5, dtype=torch.long), mask),
            "tags must have shape (B, T) = (2, 4) like emissions, found (2, 5)",
        ),
        (
            lambda: crf.marginals(torch.zeros(2, 4, 3), mask[:1]),
            "mask must have shape (B, T) = (2, 4) like emissions, found (1, 4)",
        ),
        (
            lambda: crf(torch.zeros(2, 4, 3), torch.full((2, 4), 3), mask),
            "tags must lie in [0, 3) at unmasked positions",
        ),
        (
            lambda: CRF(3, (torch.ones(3, dtype=torch.bool),) * 3),
            "allowed masks must have shapes [(3,), (3, 3), (3,)], found [(3,), (3,), (3,)]",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == message


def test_allowed_transitions_bio():
    start, trans, end = allowed_transitions(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "BIO")
    assert start.tolist() == [True, True, False, True, False]
    assert end.tolist() == [True] * 5
    assert trans.int().tolist() == [
        # O  B-P I-P B-L I-L  <- next tag
        [1, 1, 0, 1, 0],  # O
        [1, 1, 1, 1, 0],  # B-PER
        [1, 1, 1, 1, 0],  # I-PER
        [1, 1, 0, 1, 1],  # B-LOC
        [1, 1, 0, 1, 1],  # I-LOC
    ]
    assert start.dtype == trans.dtype == end.dtype == torch.bool


def test_allowed_transitions_iob1():
    start, trans, end = allowed_transitions(["O", "I-PER", "B-PER", "I-LOC", "B-LOC"], "IOB1")
    assert start.tolist() == [True, True, False, True, False]
    assert end.tolist() == [True] * 5
    assert trans.int().tolist() == [
        # O  I-P B-P I-L B-L
        [1, 1, 0, 1, 0],  # O
        [1, 1, 1, 1, 0],  # I-PER
        [1, 1, 1, 1, 0],  # B-PER
        [1, 1, 0, 1, 1],  # I-LOC
        [1, 1, 0, 1, 1],  # B-LOC
    ]


def test_allowed_transitions_bioes():
    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC"]
    start, trans, end = allowed_transitions(tags, "BIOES")
    assert start.tolist() == [True, True, False, False, True, True, False]
    assert end.tolist() == [True, False, False, True, True, False, True]
    assert trans.int().tolist() == [
        # O  B-P I-P E-P S-P B-L E-L
        [1, 1, 0, 0, 1, 1, 0],  # O
        [0, 0, 1, 1, 0, 0, 0],  # B-PER
        [0, 0, 1, 1, 0, 0, 0],  # I-PER
        [1, 1, 0, 0, 1, 1, 0],  # E-PER
        [1, 1, 0, 0, 1, 1, 0],  # S-PER
        [0, 0, 0, 0, 0, 0, 1],  # B-LOC
        [1, 1, 0, 0, 1, 1, 0],  # E-LOC
    ]


BI = "B-<type>, I-<type>"
BIES = "B-<type>, E-<type>, I-<type>, S-<type>"


@pytest.mark.parametrize(
    ("tags", "scheme", "message"),
    [
        (["O", "E-PER"], "BIO", "tag 'E-PER' does not fit scheme 'BIO': expected 'O' or one of " + BI),
        (["S-PER"], "IOB1", "tag 'S-PER' does not fit scheme 'IOB1': expected 'O' or one of " + BI),
        (["PER"], "BIOES", "tag 'PER' does not fit scheme 'BIOES': expected 'O' or one of " + BIES),
        (["B-"], "BIO", "tag 'B-' does not fit scheme 'BIO': expected 'O' or one of " + BI),
        (["O"], "BILOU", "unknown tag scheme 'BILOU': expected one of BIO, BIOES, IOB1"),
    ],
)
def test_allowed_transitions_errors(tags, scheme, message):
    with pytest.raises(ValueError) as err:
        allowed_transitions(tags, scheme)
    assert str(err.value) == message


def test_uniform_init_and_buffers():
    crf = CRF(9, allowed_transitions(["O"] + [f"{p}-{t}" for t in "ABCD" for p in "BI"], "BIO"))
    for p in crf.parameters():
        assert p.abs().max() <= 0.1
    assert set(crf.state_dict()) == {"start_transitions", "transitions", "end_transitions"}
    assert math.isfinite(crf(torch.randn(2, 3, 9), torch.zeros(2, 3, dtype=torch.long)).sum().item())


# ------------------------------------------------------------------ partial annotation (known tags only)
def brute_partial(crf: CRF, emissions: torch.Tensor, tags, known, lengths, allowed=None) -> torch.Tensor:
    """Log of the summed probability of the allowed paths through each row's known tags, minus log Z, by
    enumerating all K^T paths (B,); differentiable in the emissions and the CRF's raw parameters."""
    k, out = emissions.size(-1), []
    for b, n in enumerate(lengths):
        paths = [
            p for p in itertools.product(range(k), repeat=n) if allowed is None or is_allowed(allowed, p)
        ]
        grid = torch.tensor(paths)  # (N, n)
        scores = (
            crf.start_transitions[grid[:, 0]]
            + emissions[b, torch.arange(n), grid].sum(1)
            + crf.transitions[grid[:, :-1], grid[:, 1:]].sum(1)
            + crf.end_transitions[grid[:, -1]]
        )  # (N,)
        fits = torch.tensor([all(p[t] == tags[b][t] for t in range(n) if known[b][t]) for p in paths])
        out.append(torch.logsumexp(scores[fits], 0) - torch.logsumexp(scores, 0))
    return torch.stack(out)


def partial_case(num_tags: int, allowed, lengths: list[int], seed: int):
    """Emissions (B, T, K) in float64, gold tags of a random allowed path per row (-100 where unknown or
    padded) and a random known mask (B, T) that is also random at padding."""
    emissions, _, mask = make_batch(num_tags, lengths, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    known = torch.rand(mask.shape, generator=gen) < 0.5
    tags = torch.full(mask.shape, -100, dtype=torch.long)
    for b, n in enumerate(lengths):
        paths = [
            p
            for p in itertools.product(range(num_tags), repeat=n)
            if allowed is None or is_allowed(allowed, p)
        ]
        path = torch.tensor(paths[int(torch.randint(len(paths), (1,), generator=gen))])
        tags[b, :n] = torch.where(known[b, :n], path, -100)
    return emissions.double(), tags, known, mask


@pytest.mark.parametrize(
    ("num_tags", "tags", "scheme"),
    [(3, None, None), (4, None, None), (3, TAGS_BIO, "BIO"), (5, TAGS_BIOES, "BIOES"), (3, TAGS_BIO, "IOB1")],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_partial_equals_brute_force_values_and_gradients(num_tags, tags, scheme, seed):
    allowed = None if scheme is None else allowed_transitions(tags, scheme)
    crf = make_crf(num_tags, allowed, seed=seed).double()
    lengths = [4, 1, 3, 2, 4]
    emissions, gold, known, mask = partial_case(num_tags, allowed, lengths, seed)
    ours_em, ref_em = emissions.clone().requires_grad_(), emissions.clone().requires_grad_()
    ours = crf(ours_em, gold, mask, known=known)
    ours.sum().backward()
    ours_grads = [p.grad.clone() for p in crf.parameters()]
    crf.zero_grad()
    ref = brute_partial(crf, ref_em, gold.tolist(), (known & mask).tolist(), lengths, allowed)
    ref.sum().backward()
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours_em.grad, ref_em.grad, atol=1e-10, rtol=1e-10)
    for found, param in zip(ours_grads, crf.parameters(), strict=True):
        torch.testing.assert_close(found, param.grad, atol=1e-10, rtol=1e-10)
    assert ours_em.grad[~mask].eq(0).all()  # padding takes no part
    # The known mask's values at padding change nothing.
    with torch.no_grad():
        assert torch.equal(crf(emissions, gold, mask, known=known | ~mask), ours.detach())


@pytest.mark.parametrize("scheme", [None, "BIOES"])
def test_partial_all_unknown_is_zero_and_all_known_is_forward(scheme):
    allowed = None if scheme is None else allowed_transitions(TAGS_BIOES, scheme)
    crf = make_crf(5, allowed)
    emissions, tags, mask = make_batch(5, LENGTHS, seed=19)
    tags = tags.masked_fill(~mask, 0).masked_fill(mask, 0)  # O everywhere: allowed in every scheme
    tags[0, 1:3] = torch.tensor([1, 3])  # B-X E-X
    em = emissions.clone().requires_grad_()
    nothing = crf(em, torch.full_like(tags, -100), mask, known=torch.zeros_like(mask))
    assert nothing.eq(0).all()
    nothing.sum().backward()
    assert em.grad.eq(0).all()
    for param in crf.parameters():
        torch.testing.assert_close(param.grad, torch.zeros_like(param))
    crf.zero_grad()

    full_em, part_em = emissions.clone().requires_grad_(), emissions.clone().requires_grad_()
    full = crf(full_em, tags, mask)
    full.sum().backward()
    full_grads = [p.grad.clone() for p in crf.parameters()]
    crf.zero_grad()
    every = crf(part_em, tags, mask, known=torch.ones_like(mask))
    every.sum().backward()
    assert torch.equal(every, full)  # the very same numbers, not merely close
    assert torch.equal(part_em.grad, full_em.grad)
    for found, param in zip(full_grads, crf.parameters(), strict=True):
        assert torch.equal(found, param.grad)
    # Fully known rows of a batch with a partial row keep forward's value exactly.
    known = torch.ones_like(mask)
    known[2, 1] = False
    with torch.no_grad():
        mixed = crf(emissions, tags, mask, known=known)
    assert torch.equal(mixed[[0, 1, 3]], full.detach()[[0, 1, 3]])
    assert mixed[2] > full[2]  # more paths fit: a larger probability


def test_partial_known_tags_no_allowed_path_holds():
    """I-X known after O under BIOES: no allowed path fits; the value is about FORBIDDEN, gradients finite."""
    allowed = allowed_transitions(TAGS_BIOES, "BIOES")
    crf = make_crf(5, allowed)
    emissions, _, mask = make_batch(5, [3], seed=23)
    emissions.requires_grad_()
    tags = torch.tensor([[0, 2, 0]])
    known = torch.tensor([[True, True, False]])
    llh = crf(emissions, tags, mask, known=known)
    llh.sum().backward()
    assert llh.item() < FORBIDDEN / 2
    assert torch.isfinite(emissions.grad).all()


def test_partial_known_errors():
    crf = CRF(3)
    emissions, tags = torch.zeros(2, 3, 3), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="known must be a bool tensor"):
        crf(emissions, tags, known=torch.ones(2, 3))
    with pytest.raises(ValueError, match="known must be a bool tensor"):
        crf(emissions, tags, known=torch.ones(2, 4, dtype=torch.bool))
    known = torch.tensor([[True, False, True]] * 2)
    with pytest.raises(ValueError, match="unmasked positions"):
        crf(emissions, tags.masked_fill(known, 7), known=known)
    assert torch.isfinite(crf(emissions, tags.masked_fill(~known, -100), known=known)).all()
