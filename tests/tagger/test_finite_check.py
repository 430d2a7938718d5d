"""The finiteness check of loaded tensors (a float64 sum) against ``torch.isfinite(...).all()``."""

from __future__ import annotations

import pytest
import torch

from ner_app.tagger.integrity import IntegrityError, _finite, check_tensors


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), float("-inf"), "both infinities", "huge"])
def test_finite_matches_isfinite(dtype, bad):
    t = torch.randn(300, 7, generator=torch.Generator().manual_seed(0)).to(dtype)
    if bad == "both infinities":  # their sum is NaN, not a cancellation
        t[3, 1], t[200, 6] = float("inf"), float("-inf")
    elif bad == "huge":  # finite values whose float32 sum would overflow
        t[:] = torch.finfo(dtype).max
    elif bad is not None:
        t[123, 4] = bad
    assert _finite(t) == bool(torch.isfinite(t).all())


def test_check_tensors_names_the_tensor_with_nan():
    good = {"w": torch.zeros(2, 3)}
    check_tensors({"w": torch.ones(2, 3)}, good, "model.safetensors")
    with pytest.raises(IntegrityError, match="'w' holds NaN or infinite values"):
        check_tensors({"w": torch.tensor([[0.0, float("nan"), 1.0], [0, 0, 0]])}, good, "model.safetensors")
