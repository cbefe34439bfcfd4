"""The writers of the test rig's containers (executorch_espnn.bundle for
XTSB, executorch_espnn.pte_suite for XTSP) produce the same bytes as
before their shared placement, alignment and sealing moved into one
module: a small bundle and a small suite, built from fixed arrays (no
runtime involved), are pinned byte for byte by their SHA-256. The digests
were computed with the writers as they were before that move; a change of
either digest is a change of the format's bytes, which the board's parsers
and every bundle on a flash partition would notice."""

from __future__ import annotations

import hashlib

import numpy as np

from executorch_espnn import bundle as B
from executorch_espnn import pte_suite as S

# Computed at c40d3ad (before executorch_espnn.container existed).
BUNDLE_SHA256 = "c7aad3b882fc1115a60a0a9587f5f2012206241e121bb48f20b7184c2b05a78a"
SUITE_SHA256 = "a56094aa9db6d964c81d4bff458ee9c278e6d23c7d01ebbb8e4e4667d1e7597f"


def small_bundle() -> bytes:
    """Three cases, two sharing a model (stored once), payloads of mixed
    dtypes and odd lengths, names of odd lengths, an empty input list."""
    model_a = bytes(range(37))
    model_b = bytes([0xA5]) * 21
    return B.write_bundle([
        B.BundleCase("conv_a", model_a, [np.arange(-5, 7, dtype=np.int8).reshape(3, 4)],
                     [np.array([1.5, -2.25], np.float32), np.array([7, -70000], np.int32)], runs=3),
        B.BundleCase("conv.b-2", model_a, [np.arange(5, dtype=np.int8)], [np.array([-1, 2, -3], np.int8)]),
        B.BundleCase("other", model_b, [], [np.array([127], np.int8)], runs=1000),
    ])


def small_suite() -> bytes:
    """A float case with a tolerance on one output, a 0-d input and a bool
    output; a negative case (no outputs); a case with no inputs whose
    integer output drops its tolerance to 0; a .pte of a length that is not
    a multiple of any alignment."""
    pte = bytes((i * 7) & 0xFF for i in range(201))
    return S.write_suite(S.PteSuite(pte, "forward", [
        S.PteCase("c0", [np.arange(6, dtype=np.float32).reshape(2, 3), np.array(-3, np.int64)],
                  [np.array([0.5, -0.25], np.float32), np.array([True, False, True])], runs=2, atol=[0.01, 0.0]),
        S.PteCase("neg", [np.zeros((1, 2), np.float16)], [], expect_invalid_argument=True),
        S.PteCase("c.2", [], [np.arange(4, dtype=np.uint8)], runs=7, atol=0.5),
    ]))


def test_bundle_bytes_are_unchanged():
    data = small_bundle()
    assert hashlib.sha256(data).hexdigest() == BUNDLE_SHA256, (len(data), data.hex())


def test_suite_bytes_are_unchanged():
    data = small_suite()
    assert hashlib.sha256(data).hexdigest() == SUITE_SHA256, (len(data), data.hex())


def test_pinned_containers_read_back():
    """The pinned containers are valid ones (the readers accept them and
    find what was written), so the digests pin real containers."""
    cases = B.read_bundle(small_bundle())
    assert [c["name"] for c in cases] == ["conv_a", "conv.b-2", "other"]
    assert cases[0]["model_offset"] == cases[1]["model_offset"] != cases[2]["model_offset"]
    suite = S.read_suite(small_suite())
    assert [c.name for c in suite.cases] == ["c0", "neg", "c.2"]
    assert suite.cases[1].expect_invalid_argument and suite.cases[2].atols() == [0.0]
    assert len(suite.pte) == 201
