"""A MobileNetV2-style network of inverted-residual blocks (1x1 expand + BN +
ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project + BN, residual add), global
average pool and a linear classifier: fully delegated, one partition, no
compute op on the CPU, outputs within 1 LSB of the convert_pt2e model."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from aot_harness import CHAIN_LSB, cpu_nodes, delegate_nodes, lower_and_check, op_names, payloads  # noqa: E402
from executorch_espnn import delegation_report  # noqa: E402


def conv_bn(cin, cout, k, stride=1, groups=1, relu6=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return layers + [nn.ReLU6()] if relu6 else layers


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(*conv_bn(cin, hidden, 1), *conv_bn(hidden, hidden, 3, stride, groups=hidden),
                                  *conv_bn(hidden, cout, 1, relu6=False))

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class TinyMobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(*conv_bn(3, 16, 3, 2), InvertedResidual(16, 16, 1, 1),
                                      InvertedResidual(16, 24, 2, 6), InvertedResidual(24, 24, 1, 6))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(24, 10))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(x)


def _randomize_bn(model):
    g = torch.Generator().manual_seed(3)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


def test_mobilenet_v2_blocks_fully_delegated(quantize):
    torch.manual_seed(0)
    model = _randomize_bn(TinyMobileNetV2()).eval()
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 3, 32, 32, generator=g)
    calibration = [(torch.randn(1, 3, 32, 32, generator=g),) for _ in range(4)] + [(x,)]
    edge, _, fractions = lower_and_check(model, (x,), quantize, label="mobilenet_v2_blocks", calibration=calibration,
                                         max_lsb=CHAIN_LSB)
    assert len(delegate_nodes(edge)) == 1
    assert cpu_nodes(edge) == []
    report = delegation_report(edge).to_dict()["forward"]
    assert len(report["partitions"]) == 1 and report["num_cpu_ops"] == 0
    ops = op_names(payloads(edge)[0])
    assert ops.count("DEPTHWISE_CONV2D") == 3 and ops.count("ADD") == 2
    # None: the NCHW input is quantized straight into NHWC (QUANTIZE's
    # channels_last), and the pooled [N,C,1,1] head needs none.
    assert "TRANSPOSE" not in ops
