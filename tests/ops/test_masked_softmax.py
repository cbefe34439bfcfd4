"""MASKED_SOFTMAX: per row, TFLite's int8 softmax over the attended positions
alone and probability 0 (-128) at the masked ones; a fully masked row is all
-128. Oracle: the TFLite formula of test_softmax applied to the gathered row
(an independent integer reference), and PyTorch's softmax with -inf at the
masked positions within 1 LSB; rejections."""

import numpy as np
import pytest
import torch

from executorch_espnn import _native
from executorch_espnn import quant_params as qp
from espnn_dev.graph_util import Const, Input, Out, build_op, expect_rejected, run_op
from ops.test_softmax import OUT_SCALE, OUT_ZP, tflite_softmax_row


def run_masked(x, mask, s_in, params):
    return run_op("MASKED_SOFTMAX", [Input(x, s_in, 0), Const(mask.astype(np.int8))],
                  Out(x.shape, "INT8", OUT_SCALE, OUT_ZP), **params)


def oracle(x, mask, params):
    rows = x.reshape(-1, x.shape[-1])
    out = np.full(rows.shape, -128, np.int8)
    for r, row in enumerate(rows):
        allow = mask[r % mask.shape[0]].astype(bool)
        if allow.any():
            out[r, allow] = tflite_softmax_row(row[allow], params["input_mult"], params["input_left_shift"],
                                               params["diff_min"])
    return out.reshape(x.shape)


def causal(t: int, s: int) -> np.ndarray:
    return np.tril(np.ones((t, s), np.int8))


# (input shape [.., rows, width], mask): causal over [B, H, T, T], a random constant mask, wide rows
# (>= 32: the S3 SIMD row width), a mask with fully masked rows, an all-ones mask (= SOFTMAX).
CASES = {
    "causal_heads": ((2, 4, 16, 16), causal(16, 16)),
    "causal_rect": ((1, 6, 9), causal(6, 9)),
    "random": ((3, 8, 40), (np.random.default_rng(1).random((8, 40)) > 0.4).astype(np.int8)),
    "wide_causal": ((1, 64, 64), causal(64, 64)),
    "fully_masked_rows": ((2, 5, 12), np.vstack([np.zeros((2, 12), np.int8), np.ones((3, 12), np.int8)])),
    "one_mask_row": ((4, 7), np.ones((1, 7), np.int8)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_the_integer_oracle(name):
    shape, mask = CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    params = qp.softmax_params(0.08, 1.0)
    got = run_masked(x, mask, 0.08, params)
    np.testing.assert_array_equal(got, oracle(x, mask, params))
    rows = got.reshape(-1, shape[-1])
    masks = np.tile(mask, (rows.shape[0] // mask.shape[0], 1)).astype(bool)
    assert (rows[~masks] == -128).all()  # masked positions: probability 0


def test_an_all_ones_mask_is_softmax():
    x = np.random.default_rng(3).integers(-128, 128, (3, 5, 20), dtype=np.int8)
    params = qp.softmax_params(0.1, 1.0)
    plain = run_op("SOFTMAX", [Input(x, 0.1, 0)], Out(x.shape, "INT8", OUT_SCALE, OUT_ZP), **params)
    np.testing.assert_array_equal(run_masked(x, np.ones((5, 20), np.int8), 0.1, params), plain)


def test_within_one_lsb_of_pytorch_with_minus_inf_masks():
    """What scaled_dot_product_attention computes: -inf at masked positions, and
    0 for a fully masked row (its safe softmax)."""
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (2, 16, 16), dtype=np.int8)
    mask = causal(16, 16)
    mask[5] = 0  # a fully masked row
    s_in = 0.05
    got = run_masked(x, mask, s_in, qp.softmax_params(s_in, 1.0)).astype(np.float64)
    scores = torch.from_numpy(x.astype(np.float64) * s_in).masked_fill(~torch.from_numpy(mask.astype(bool)),
                                                                       float("-inf"))
    want = torch.nan_to_num(torch.softmax(scores, -1), nan=0.0).numpy()
    got_p = (got - OUT_ZP) * OUT_SCALE
    assert np.abs(got_p - want).max() <= OUT_SCALE + 1e-9
    assert (got[:, 5] == -128).all()


def _blob(mask, shape=(4, 8), mask_memory="const", **params):
    x = np.zeros(shape, np.int8)
    p = dict(qp.softmax_params(0.1, 1.0), **params)
    m = Const(mask) if mask_memory == "const" else Input(mask)
    blob, _ = build_op("MASKED_SOFTMAX", [Input(x, 0.1, 0), m], [Out(shape, "INT8", OUT_SCALE, OUT_ZP)], **p)
    return blob


def test_rejections():
    expect_rejected(_blob(np.ones((4, 7), np.int8)), "mask is [4, 7]", "rows dividing")
    expect_rejected(_blob(np.ones((3, 8), np.int8)), "mask is [3, 8]")
    expect_rejected(_blob(np.full((4, 8), 2, np.int8)), "mask element 0 is 2")
    expect_rejected(_blob(np.ones((4, 8), np.int8), mask_memory="input"), "mask must be a constant")
    expect_rejected(_blob(np.ones((4, 8), np.int32)), "mask")
    expect_rejected(_blob(np.ones((8,), np.int8)), "mask")
    expect_rejected(_blob(np.ones((4, 8), np.int8), input_left_shift=40), "input_left_shift")


def test_needs_format_version_3():
    blob = bytearray(_blob(np.ones((4, 8), np.int8)))
    assert _native.parse(bytes(blob))["version"] == 3
    blob[4:6] = (2).to_bytes(2, "little")  # the same op in a version-2 blob is an unknown opcode there
    with pytest.raises(ValueError, match="opcode"):
        _native.parse(bytes(blob))


def test_scratch_holds_espnn_and_two_rows():
    blob = _blob(np.ones((4, 8), np.int8))
    assert _native.Program(blob).scratch_bytes >= 2 * 16
