"""Element-wise activations tabulated into one XTS3 LUT: leaky_relu, elu, selu, celu,
mish, softplus, log_sigmoid, prelu with one slope; prelu with a slope per channel into
one CHANNEL_LUT (a table per channel).

Each op is delegated alone (one partition, a single LUT, nothing on the CPU) and fed
all 256 int8 input codes; every output is within 1 LSB of the independent oracle
quantize(f(dequantize(x))) with f written out here in float64 numpy (not PyTorch's
kernel, which the lowering itself tabulates). A model-level case keeps each op
between two quantized convolutions in one partition."""

import numpy as np
import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import (  # noqa: E402
    CHAIN_LSB,
    all_codes,
    cpu_nodes,
    delegate_nodes,
    input_qparams,
    lower_and_check,
    lsb_off,
    op_names,
    output_qparams,
    payloads,
    run_lowered,
)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# name: (module, float64 reference, calibration range)
CASES = {
    "leaky_relu": (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x), 6.0),
    "leaky_relu_steep": (nn.LeakyReLU(3.0), lambda x: np.where(x > 0, x, 3.0 * x), 2.0),
    "elu": (nn.ELU(0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), 5.0),
    "selu": (nn.SELU(), lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)), 4.0),
    "celu": (nn.CELU(1.3), lambda x: np.where(x > 0, x, 1.3 * np.expm1(x / 1.3)), 5.0),
    "mish": (nn.Mish(), lambda x: x * np.tanh(_softplus(x)), 6.0),
    "softplus": (nn.Softplus(2.0, 3.0), lambda x: _softplus(x, 2.0, 3.0), 4.0),
    "log_sigmoid": (nn.LogSigmoid(), lambda x: np.log(_sigmoid(x)), 6.0),
    "prelu": (nn.PReLU(init=0.3), lambda x: np.where(x > 0, x, np.float32(0.3) * x), 4.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lut_activation_all_int8_inputs_within_one_lsb(name, quantize):
    from executorch_espnn import to_espnn_edge

    module, ref, span = CASES[name]
    calib = torch.linspace(-span, span, 256).reshape(1, 4, 8, 8)
    converted = quantize(module.eval(), (calib,))
    ((s_in, zp_in),), ((s_out, zp_out),) = input_qparams(converted), output_qparams(converted)
    edge = to_espnn_edge(torch.export.export(converted, (calib,)), allow_cpu_fallback=False)
    assert len(delegate_nodes(edge)) == 1
    assert not cpu_nodes(edge), cpu_nodes(edge)
    (blob,) = payloads(edge)
    assert op_names(blob) == ["QUANTIZE", "LUT", "DEQUANTIZE"], op_names(blob)

    x = all_codes((s_in, zp_in), (1, 4, 8, 8))
    (out,), calls = run_lowered(edge, [x])
    assert calls == 1
    err = lsb_off(out, ref(x.double().numpy()), (s_out, zp_out)).reshape(-1)
    print(f"{name}: in ({s_in:.5f}, {zp_in}) out ({s_out:.5f}, {zp_out}): max {err.max():.0f} LSB, "
          f"{100 * np.mean(err == 0):.1f}% exact")
    assert err.max() <= 1, f"{name}: {err.max()} LSB off"


class ConvActConv(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.a, self.act, self.b = nn.Conv2d(3, 8, 3, padding=1), act, nn.Conv2d(8, 4, 1)

    def forward(self, x):
        return self.b(self.act(self.a(x)))


@pytest.mark.parametrize("name", list(CASES))
def test_lut_activation_between_quantized_convolutions(name, quantize):
    x = (2 * torch.randn(1, 3, 6, 6, generator=torch.Generator().manual_seed(3)),)
    edge, _, _ = lower_and_check(ConvActConv(CASES[name][0]), x, quantize, label=name, max_lsb=CHAIN_LSB)
    (blob,) = payloads(edge)
    assert op_names(blob).count("LUT") == 1 and op_names(blob).count("CONV2D") == 2, op_names(blob)


def _prelu_reference(slopes, channel_axis):
    w = np.asarray(slopes, np.float32).astype(np.float64)

    def ref(x):
        shape = [1] * x.ndim
        shape[channel_axis] = w.size
        return np.where(x > 0, x, w.reshape(shape) * x)

    return ref


def test_per_channel_prelu_all_int8_inputs_within_one_lsb(quantize):
    """prelu with a slope per channel -> one CHANNEL_LUT (a table per channel), fed all
    256 codes in every channel; oracle: float64 prelu written out here."""
    from executorch_espnn import to_espnn_edge

    module = nn.PReLU(4)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([-0.5, 0.0, 0.3, 2.0]))
    calib = torch.linspace(-4, 4, 256 * 4).reshape(1, 4, 16, 16)
    converted = quantize(module.eval(), (calib,))
    ((s_in, zp_in),), ((s_out, zp_out),) = input_qparams(converted), output_qparams(converted)
    edge = to_espnn_edge(torch.export.export(converted, (calib,)), allow_cpu_fallback=False)
    assert not cpu_nodes(edge), cpu_nodes(edge)
    (blob,) = payloads(edge)
    assert "CHANNEL_LUT" in op_names(blob) and "LUT" not in op_names(blob), op_names(blob)
    x = all_codes((s_in, zp_in), (1, 1, 16, 16)).expand(1, 4, 16, 16).contiguous()  # every code, every channel
    (out,), _ = run_lowered(edge, [x])
    err = lsb_off(out, _prelu_reference(module.weight.detach().numpy(), 1)(x.double().numpy()), (s_out, zp_out))
    assert err.max() <= 1, f"{err.max()} LSB off"


class LinearPReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.act = nn.Linear(12, 6), nn.PReLU(6)

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.mark.parametrize("model, x, layout", [
    (nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.PReLU(5), nn.Conv2d(5, 4, 1)), (1, 3, 6, 6), "NHWC"),
    (LinearPReLU(), (3, 12), "[N, C]"),
])
def test_per_channel_prelu_stays_in_the_partition(model, x, layout, quantize):
    """Between quantized neighbours, per-channel prelu is one CHANNEL_LUT along the
    channel axis wherever the layout puts it (last for NHWC, 1 for [N, C])."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.PReLU):
                m.weight.copy_(torch.linspace(-1, 1.5, m.weight.numel()))
    xs = (torch.randn(*x, generator=torch.Generator().manual_seed(5)),)
    edge, _, _ = lower_and_check(model, xs, quantize, label=f"prelu per channel {layout}", max_lsb=CHAIN_LSB)
    assert not cpu_nodes(edge) and len(delegate_nodes(edge)) == 1, cpu_nodes(edge)
    (blob,) = payloads(edge)
    assert op_names(blob).count("CHANNEL_LUT") == 1, op_names(blob)
