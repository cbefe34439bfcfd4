"""How `espnn compile`'s host verification compares float outputs.

A float output (a CPU op last) is computed by ExecuTorch's portable kernels in the .pte
and by PyTorch's vectorized kernels in the reference; their summation order, and so their
last bits, depend on the host's ISA. An absolute bound alone fails large values that
differ by one ulp; the gate is torch.testing's float32 rule, atol + rtol * |want|.
"""

import torch

from executorch_espnn.cli.compare import LargestDiffs
from executorch_espnn.cli.compile_steps import FLOAT_RTOL


def _compare(got, want, **kw):
    c = LargestDiffs([None], **kw)
    c.add([got], [want])
    return c


def test_an_ulp_at_large_magnitude_passes_the_relative_bound():
    want = torch.tensor([1000.0, -2048.0, 0.5])
    got = torch.nextafter(want, torch.full_like(want, float("inf")))  # one float32 ulp up
    assert float((got - want).abs().max()) > 1e-5  # an absolute 1e-5 alone refuses it
    assert not _compare(got, want).passed(0.0, 1e-5)
    assert _compare(got, want, float_rtol=FLOAT_RTOL).passed(0.0, 1e-5)


def test_a_real_difference_still_fails():
    want = torch.tensor([1000.0, 0.25])
    assert not _compare(want + torch.tensor([0.01, 0.0]), want, float_rtol=FLOAT_RTOL).passed(0.0, 1e-5)
    # near zero the absolute part decides
    assert not _compare(want + torch.tensor([0.0, 2e-5]), want, float_rtol=FLOAT_RTOL).passed(0.0, 1e-5)
    assert _compare(want + torch.tensor([0.0, 5e-6]), want, float_rtol=FLOAT_RTOL).passed(0.0, 1e-5)


def test_quantized_outputs_keep_their_lsb_bound():
    c = LargestDiffs([0.1], float_rtol=FLOAT_RTOL)
    c.add([torch.tensor([1.0, 2.1])], [torch.tensor([1.0, 2.0])])
    assert c.passed(1.0, 1e-5) and not c.passed(0.0, 1e-5)


def test_worst_sample_counts():
    c = LargestDiffs([None], float_rtol=FLOAT_RTOL)
    c.add([torch.tensor([1.0])], [torch.tensor([1.0])])
    c.add([torch.tensor([1.001])], [torch.tensor([1.0])])
    c.add([torch.tensor([1.0])], [torch.tensor([1.0])])
    assert not c.passed(0.0, 1e-5)
