"""Linear-chain conditional random field over tag sequences (Lafferty et al. 2001; Lample et al. 2016).

Batch-first throughout: emissions ``(B, T, K)``, tags and mask ``(B, T)``. The mask is bool and
left-aligned (each row a run of True then False) and every row has at least one token.

Partial annotation (Tsuboi et al. 2008): with a bool ``known`` (B, T), the log-likelihood of a sentence is
the log of the summed probability of every tag path that agrees with its known tags (unknown positions
free, the transition constraints respected): log-sum-exp over that constrained lattice minus log Z.
``log_partition`` gives the same constrained log-sum for any per-position set of allowed tags, on the tempered
potentials: the probability of an entity reading (``readings.py``) is one such lattice.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ner_app.tagger.crf.marginals import scaled_marginals
from ner_app.tagger.crf.viterbi import viterbi

# Score of a forbidden transition: finite (unlike -inf) so that log-sum-exp and its gradients never see
# inf - inf, yet low enough that exp() of it is exactly 0 in fp32 and Viterbi never picks it.
FORBIDDEN = -1e4

MASK_NOT_LEFT_ALIGNED = "mask must be left-aligned: each row must be a run of True followed only by False"
EMPTY_SENTENCE = "every sentence must have at least one token: mask[:, 0] must be all True"


class CRF(nn.Module):
    """Linear-chain CRF with optional hard transition constraints (see ``constraints.allowed_transitions``).

    ``transitions[i, j]`` is the score of tag i followed by tag j; ``start_transitions`` and
    ``end_transitions`` score the first and the last tag of a sentence.
    """

    start_allowed: Tensor | None  # bool buffers (K,), (K, K), (K,), or None without constraints
    trans_allowed: Tensor | None
    end_allowed: Tensor | None

    def __init__(self, num_tags: int, allowed: tuple[Tensor, Tensor, Tensor] | None = None) -> None:
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, found {num_tags}")
        self.num_tags = num_tags
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.reset_parameters()
        masks: tuple[Tensor | None, ...] = (None, None, None)
        if allowed is not None:
            expected = [(num_tags,), (num_tags, num_tags), (num_tags,)]
            found = [tuple(a.shape) for a in allowed]
            if len(allowed) != 3 or found != expected:
                raise ValueError(f"allowed masks must have shapes {expected}, found {found}")
            masks = tuple(a.detach().to(torch.bool) for a in allowed)
        # Not persistent: the constraints follow from the tag vocabulary, which is rebuilt at load time.
        self.register_buffer("start_allowed", masks[0], persistent=False)
        self.register_buffer("trans_allowed", masks[1], persistent=False)
        self.register_buffer("end_allowed", masks[2], persistent=False)
        # Calibration (temperature scaling): probabilities (``marginals`` and everything built on them) use
        # every potential divided by ``temperature``; the Viterbi path is unchanged. 1.0 is uncalibrated. It
        # is set from the export, never trained.
        self.temperature = 1.0

    def reset_parameters(self) -> None:
        for param in (self.start_transitions, self.transitions, self.end_transitions):
            nn.init.uniform_(param, -0.1, 0.1)

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, constrained={self.trans_allowed is not None}"

    def _scores(self) -> tuple[Tensor, Tensor, Tensor]:
        """Start (K,), transition (K, K) and end (K,) scores with forbidden entries set to ``FORBIDDEN``."""
        start, trans, end = self.start_transitions, self.transitions, self.end_transitions
        if self.start_allowed is None or self.trans_allowed is None or self.end_allowed is None:
            return start, trans, end
        # torch.where, not in-place masking: the forbidden parameters simply get zero gradient.
        return (
            torch.where(self.start_allowed, start, FORBIDDEN),
            torch.where(self.trans_allowed, trans, FORBIDDEN),
            torch.where(self.end_allowed, end, FORBIDDEN),
        )

    def _tempered(self, emissions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Emissions (fp32 or wider) and start, transition and end scores, each divided by ``temperature``:
        the potentials that probabilities are computed from."""
        start, trans, end = self._scores()
        t = self.temperature
        return self._fp32(emissions) / t, start / t, trans / t, end / t

    def _check(
        self,
        emissions: Tensor,
        mask: Tensor | None,
        tags: Tensor | None = None,
        known: Tensor | None = None,
        values: bool = True,
        full_steps: int = 0,
    ) -> Tensor:
        """Validate shapes, the mask, ``known`` and ``full_steps``; return the mask (all True when None).
        ``values=False`` skips the checks of the mask's values (each waits for the device: for batches built
        to be valid)."""
        if emissions.dim() != 3 or emissions.size(2) != self.num_tags:
            raise ValueError(
                f"emissions must have shape (B, T, K={self.num_tags}), found {tuple(emissions.shape)}"
            )
        bt = tuple(emissions.shape[:2])
        if tags is not None and tuple(tags.shape) != bt:
            raise ValueError(f"tags must have shape (B, T) = {bt} like emissions, found {tuple(tags.shape)}")
        if known is not None and (tuple(known.shape) != bt or known.dtype != torch.bool):
            raise ValueError(
                f"known must be a bool tensor of shape (B, T) = {bt}, found {known.dtype} {tuple(known.shape)}"
            )
        if mask is None:
            mask = torch.ones(bt, dtype=torch.bool, device=emissions.device)
        if tuple(mask.shape) != bt:
            raise ValueError(f"mask must have shape (B, T) = {bt} like emissions, found {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor, found dtype {mask.dtype}")
        if bt[1] == 0:
            raise ValueError(EMPTY_SENTENCE)
        if not 0 <= full_steps <= bt[1]:
            raise ValueError(f"full_steps must lie in [0, T={bt[1]}], found {full_steps}")
        if not values:
            return mask
        if not bool(mask[:, 0].all()):
            raise ValueError(EMPTY_SENTENCE)
        if bool((mask[:, 1:] & ~mask[:, :-1]).any()):
            raise ValueError(MASK_NOT_LEFT_ALIGNED)
        if full_steps and not bool(mask[:, :full_steps].all()):
            raise ValueError(f"full_steps={full_steps}, but a row of the mask is shorter")
        return mask

    @staticmethod
    def _fp32(emissions: Tensor) -> Tensor:
        # bf16/fp16 emissions would make log-sum-exp over long sentences inaccurate; fp64 stays fp64.
        return emissions.to(torch.promote_types(emissions.dtype, torch.float32))

    def _alphas(
        self, emissions: Tensor, mask: Tensor, start: Tensor, trans: Tensor, full_steps: int = 0
    ) -> list[Tensor]:
        """Forward variables, one (B, K) per step: log-sum of all prefixes ending in each tag at step t.

        Past a row's end the variable is carried unchanged, so the last one holds each row's own end. The
        first ``full_steps`` steps, real in every row, need no select (the same values and gradients).
        """
        # unbind: one view per step whose backward is a single stack, not a zero-filled copy per step
        steps, step_masks = emissions.unbind(1), mask[:, :, None].unbind(1)  # T x (B, K), T x (B, 1)
        alpha = start + steps[0]  # (B, K)
        alphas = [alpha]
        for t in range(1, len(steps)):
            # (B, K, 1) + (K, K) -> log-sum over the previous tag i for each next tag j
            nxt = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + steps[t]
            alpha = nxt if t < full_steps else torch.where(step_masks[t], nxt, alpha)
            alphas.append(alpha)
        return alphas

    def forward(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor | None = None,
        known: Tensor | None = None,
        checked: bool = False,
        full_steps: int = 0,
    ) -> Tensor:
        """Log-likelihood (B,) of each gold tag sequence: its score minus the log partition function.

        Tags at padded positions are ignored (any value, e.g. -100, is fine). ``known`` (B, T) bool marks the
        positions whose gold tag is known; a row with unknown positions gets the log of the summed
        probability of every path through its known tags (all unknown: 0). None, or every position known:
        exactly the full-annotation value, computed as without ``known``. A row whose known tags no allowed
        path can hold scores about ``FORBIDDEN``, like a gold path with a forbidden transition. ``checked``: the
        mask and tags are known to be valid (``encode_batch`` builds them so), and their values are not checked
        again: those checks wait for the device, a few times a training step. ``full_steps``: how many leading
        steps are real in every row, known on the host (the batch's shortest length; 0 when unknown): the
        recursion skips its padding selects there.
        """
        mask = self._check(emissions, mask, tags, known, values=not checked, full_steps=full_steps)
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            emissions = self._fp32(emissions)
            start, trans, end = self._scores()
            seen = mask if known is None else mask & known  # (B, T): positions whose tag is checked and used
            tags = tags.long().masked_fill(~seen, 0)  # (B, T); padding and unknowns -> a valid index
            if not checked and bool(((tags < 0) | (tags >= self.num_tags)).any()):
                raise ValueError(f"tags must lie in [0, {self.num_tags}) at unmasked positions")
            gold = self._gold_score(emissions, tags, mask, start, trans, end)  # (B,)
            log_z = torch.logsumexp(self._alphas(emissions, mask, start, trans, full_steps)[-1] + end, dim=1)
            complete = (seen == mask).all(dim=1)  # (B,): rows without an unknown position
            if known is None or bool(complete.all()):
                return gold - log_z
            lattice = self._clamped_log_sum(emissions, tags, mask, seen, start, trans, end)  # (B,)
            # A fully annotated row keeps its gold score exactly, whatever the other rows of the batch hold.
            return torch.where(complete, gold, lattice) - log_z

    @staticmethod
    def _gold_score(
        emissions: Tensor, tags: Tensor, mask: Tensor, start: Tensor, trans: Tensor, end: Tensor
    ) -> Tensor:
        """Score (B,) of each row's tag path (tags (B, T) valid indices everywhere)."""
        lengths = mask.sum(dim=1)  # (B,)
        last_tags = tags.gather(1, (lengths - 1).unsqueeze(1)).squeeze(1)  # (B,)
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)  # (B, T)
        moved = trans[tags[:, :-1], tags[:, 1:]]  # (B, T-1): score of step t -> t+1
        return (
            start[tags[:, 0]]
            + torch.where(mask, emitted, 0.0).sum(dim=1)
            + torch.where(mask[:, 1:], moved, 0.0).sum(dim=1)
            + end[last_tags]
        )

    def _clamped_log_sum(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor,
        seen: Tensor,
        start: Tensor,
        trans: Tensor,
        end: Tensor,
    ) -> Tensor:
        """Log-sum (B,) of the scores of every path that has each known tag at its position (a lattice where a
        known position allows only its gold tag)."""
        gold_tag = nn.functional.one_hot(tags, self.num_tags).bool()  # (B, T, K)
        open_tag = gold_tag | ~seen.unsqueeze(2)  # (B, T, K): tags a path may take at each position
        return self._lattice_log_sum(emissions, mask, open_tag, start, trans, end)

    def _lattice_log_sum(
        self, emissions: Tensor, mask: Tensor, open_tag: Tensor, start: Tensor, trans: Tensor, end: Tensor
    ) -> Tensor:
        """Log-sum (B,) of the scores of every path that takes at each position only a tag ``open_tag``
        (B, T, K) allows: the forward recursion on emissions where the other tags score ``FORBIDDEN``, so
        those paths get exp() = 0, as forbidden transitions do, and gradients stay finite."""
        clamped = torch.where(open_tag, emissions, FORBIDDEN)  # (B, T, K)
        return torch.logsumexp(self._alphas(clamped, mask, start, trans)[-1] + end, dim=1)

    def log_partition(
        self, emissions: Tensor, mask: Tensor | None = None, allowed: Tensor | None = None
    ) -> Tensor:
        """Log partition function (B,) of the tempered potentials (what probabilities use); with ``allowed``
        (B, T, K) bool, that of the constrained lattice: only the paths whose tag at each position is allowed
        there. Their difference is the log-probability that a path keeps to ``allowed``."""
        mask = self._check(emissions, mask)
        if allowed is not None and (
            tuple(allowed.shape) != tuple(emissions.shape) or allowed.dtype != torch.bool
        ):
            raise ValueError(
                f"allowed must be a bool tensor of shape (B, T, K) = {tuple(emissions.shape)}, found "
                f"{allowed.dtype} {tuple(allowed.shape)}"
            )
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            emissions, start, trans, end = self._tempered(emissions)
            if allowed is None:
                return torch.logsumexp(self._alphas(emissions, mask, start, trans)[-1] + end, dim=1)
            return self._lattice_log_sum(emissions, mask, allowed, start, trans, end)

    def decode(
        self, emissions: Tensor, mask: Tensor | None = None, checked: bool = False, full_steps: int = 0
    ) -> tuple[Tensor, Tensor]:
        """Viterbi: best tag paths (B, T) (0 at padding) and their scores (B,), batched over sentences.
        ``checked``: the mask is known to be valid (``forward``'s). ``full_steps``: how many leading steps are
        real in every row, known on the host (``forward``'s)."""
        mask = self._check(emissions, mask, values=not checked, full_steps=full_steps)
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            return viterbi(self._fp32(emissions), *self._scores(), mask, full_steps)

    def marginals(
        self, emissions: Tensor, mask: Tensor | None = None, checked: bool = False, full_steps: int = 0
    ) -> Tensor:
        """Posterior probability (B, T, K) of each tag at each position by forward-backward; 0 at padding.

        In probability space, in float64, each step rescaled to sum 1 (a position's scale cancels in its
        marginals): a (B, K) x (K, K) product a step instead of a log-sum-exp over (B, K, K), about 3x faster,
        and exact to the output's rounding where float32 log-sums drift by 1e-4 over long sentences
        (``marginals.py``). Returned in the emissions' dtype, at least float32. ``checked`` and ``full_steps`` as
        ``decode``'s."""
        mask = self._check(emissions, mask, values=not checked, full_steps=full_steps)
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            tempered = self._tempered(emissions)
            return scaled_marginals(*tempered, mask, full_steps).to(tempered[0].dtype)

    def log_marginals(self, emissions: Tensor, mask: Tensor, full_steps: int = 0) -> Tensor:
        """Log posterior (B, T, K) of each tag at each position, differentiable: alpha_t(k) + beta_t(k) - log Z
        by the log-space forward-backward, untempered (what a distilled student fits to its teachers'
        marginals; ``marginals`` is the faster, tempered one for prediction). Padded positions hold no value
        to read. ``mask`` must be valid (``encode_batch``'s)."""
        mask = self._check(emissions, mask, values=False, full_steps=full_steps)
        with torch.autocast(device_type=emissions.device.type, enabled=False):
            emissions = self._fp32(emissions)
            start, trans, end = self._scores()
            alphas = torch.stack(self._alphas(emissions, mask, start, trans, full_steps), dim=1)  # (B, T, K)
            log_z = torch.logsumexp(alphas[:, -1] + end, dim=1)  # (B,): the last alpha holds each row's end
            return alphas + self._betas(emissions, mask, trans, end) - log_z[:, None, None]

    @staticmethod
    def _betas(emissions: Tensor, mask: Tensor, trans: Tensor, end: Tensor) -> Tensor:
        """Backward variables (B, T, K): beta_t(i), the log-sum over all continuations after tag i at step t,
        end transition included. A row's last step (its next step is padding) starts from the end scores."""
        beta = end.expand_as(emissions[:, 0])  # (B, K)
        beta_list = [beta]
        for t in range(emissions.size(1) - 2, -1, -1):
            nxt = torch.logsumexp(trans + (emissions[:, t + 1] + beta).unsqueeze(1), dim=2)  # (B, K)
            beta = torch.where(mask[:, t + 1, None], nxt, end)
            beta_list.append(beta)
        return torch.stack(beta_list[::-1], dim=1)  # (B, T, K)
