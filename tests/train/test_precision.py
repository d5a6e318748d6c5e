"""train.fp32_matmul's switch puts torch's process-wide setting back, also when the block fails."""

from __future__ import annotations

import pytest
import torch

from opsd_sweep.train.precision import fp32_matmul


def test_the_setting_holds_inside_and_is_put_back_after_an_error():
    before = torch.backends.cuda.matmul.allow_tf32
    with fp32_matmul("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32
        with fp32_matmul("ieee"):
            assert not torch.backends.cuda.matmul.allow_tf32
        assert torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == before
    with pytest.raises(ZeroDivisionError), fp32_matmul("tf32"):
        1 / 0
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert torch.backends.cuda.matmul.fp32_precision in ("ieee", "none")  # still readable through the newer API
