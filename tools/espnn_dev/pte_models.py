"""Small .pte programs for the .pte-suite tests: an int8 conv lowered to
EspNNBackend followed by a float op that stays on ExecuTorch's portable CPU
kernels, so a suite exercises both halves of main/'s .pte mode."""

from __future__ import annotations

import torch
from torch import nn


class ConvThenCpu(nn.Module):
    """conv+relu (delegated to ESP-NN) -> dequantize -> sin (portable CPU kernel)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.sin(torch.relu(self.conv(x)))


INPUT_SHAPE = (1, 3, 8, 8)


def conv_then_cpu_pte() -> bytes:
    """.pte bytes of ConvThenCpu, quantized with EspNNQuantizer and lowered
    with CPU fallback (one EspNNBackend delegate + portable sin)."""
    from executorch_espnn import quantize, to_espnn_edge

    torch.manual_seed(0)
    model = ConvThenCpu()
    example = (torch.randn(*INPUT_SHAPE),)
    g = torch.Generator().manual_seed(1)
    q = quantize(model, example, [(torch.randn(*INPUT_SHAPE, generator=g),) for _ in range(4)])
    edge = to_espnn_edge(torch.export.export(q, example), allow_cpu_fallback=True)
    return bytes(edge.to_executorch().buffer)


def channels_last_input_pte() -> bytes:
    """ConvThenCpu exported from a channels-last example: the .pte records a
    channels-last (0, 2, 3, 1) dim order for its input, which goes straight
    into the EspNNBackend delegate, whose payload reads contiguous NCHW. The
    delegate must refuse it (InvalidArgument), on the host and on the chip."""
    from executorch_espnn import quantize, to_espnn_edge

    torch.manual_seed(0)
    model = ConvThenCpu()
    example = (torch.randn(*INPUT_SHAPE).contiguous(memory_format=torch.channels_last),)
    q = quantize(model, example, [example])
    edge = to_espnn_edge(torch.export.export(q, example), allow_cpu_fallback=True)
    return bytes(edge.to_executorch().buffer)


def dim_order_refusal_suite():
    """An XTSP suite whose one case passes only when Method::execute refuses
    the channels-last input with InvalidArgument (the delegate's dim-order check)."""
    import numpy as np

    from executorch_espnn import pte_suite as S

    x = np.random.default_rng(0).standard_normal(INPUT_SHAPE).astype(np.float32)
    case = S.PteCase("dim_order_refused", [x], [], expect_invalid_argument=True)
    return S.PteSuite(channels_last_input_pte(), "forward", [case])
