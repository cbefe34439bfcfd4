"""EspNNQuantizer with prepare_qat_pt2e: fake-quantize modules, conv + batch norm folded
by torchao's QAT passes, and the converted graph following ESP-NN's scheme.

Kept apart from test_quantizer.py: torchao's QAT conv-bn folding in convert_pt2e
exports ~100 small pattern graphs (~20 s here), independent of our code.
"""

import pytest

pytest.importorskip("executorch")
torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torchao.quantization.pt2e import move_exported_model_to_eval  # noqa: E402
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e  # noqa: E402

from executorch_espnn.quantizer import EspNNQuantizer, get_espnn_quantization_config  # noqa: E402

from test_quantizer import aten, calls, check_weight_and_bias, one, out_qparams, _inputs  # noqa: E402


class QatNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.bn2 = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = F.relu6(self.bn(self.conv(x)))
        y = F.relu(self.bn2(self.up(y)))
        return F.softmax(self.fc(y.mean(dim=[2, 3])), dim=-1)


@pytest.fixture(scope="module")
def qat_run():
    torch.manual_seed(0)
    model = QatNet().train()
    data = _inputs((2, 3, 8, 8), n=3)
    gm = torch.export.export(model, data[0]).module()
    prepared = prepare_qat_pt2e(gm, EspNNQuantizer(get_espnn_quantization_config(is_qat=True)))
    kinds = {type(m).__name__ for m in prepared.modules()}
    opt = torch.optim.SGD(prepared.parameters(), lr=1e-3)
    for (x,) in data:
        prepared(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    move_exported_model_to_eval(prepared)
    with torch.no_grad():
        fake_quant_out = [prepared(x) for (x,) in data]
    q = convert_pt2e(prepared)
    return kinds, q, data, fake_quant_out


def test_qat_uses_fake_quantize_modules(qat_run):
    kinds, _, _, _ = qat_run
    assert {"FusedMovingAvgObsFakeQuantize", "FakeQuantize", "FixedQParamsFakeQuantize"} <= kinds


def test_qat_conv_bn_folded_with_fused_activation_and_int32_bias(qat_run):
    _, q, _, _ = qat_run
    assert not calls(q, aten.batch_norm.default)
    conv, up = one(q, aten.conv2d.default), one(q, aten.conv_transpose2d.input)
    (act,) = conv.users
    assert act.target in (aten.relu6.default, aten.hardtanh.default)
    out_qparams(act)
    (relu,) = up.users
    assert relu.target == aten.relu.default
    out_qparams(relu)
    # the bias-less conv still gets an int32 bias: batch norm's folded shift
    check_weight_and_bias(q, conv, ch_axis=0, out_channels=8)
    check_weight_and_bias(q, up, ch_axis=1, out_channels=4)
    check_weight_and_bias(q, one(q, aten.linear.default), ch_axis=0, out_channels=3)
    assert out_qparams(one(q, aten.softmax.int)) == (1 / 256, -128)


def test_qat_converted_matches_fake_quantized_model(qat_run):
    _, q, data, fake_quant_out = qat_run
    with torch.no_grad():
        for (x,), ref in zip(data, fake_quant_out):
            torch.testing.assert_close(q(x), ref, atol=2 / 256, rtol=0)
