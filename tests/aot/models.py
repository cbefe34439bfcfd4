"""Reference networks for the end-to-end tests, in plain torch.nn (torchvision
is not a dependency), and the one quantization path they go through.

* `MobileNetV2`: torchvision's `mobilenet_v2(width_mult=1.0)` layer for layer
  (same channel plan, strides, ReLU6, linear bottlenecks, residual adds, 1x1 to
  1280, global average pool, dropout + linear 1000) for 224x224 inputs.
* `DSCNN`: the keyword-spotting DS-CNN of ARM's ML-KWS / MLPerf Tiny
  (conv 10x4 stride 2 + BN + ReLU, four depthwise-separable blocks, average
  pool over the whole 25x5 map, linear to 12 classes) on [N,1,49,10] MFCCs.

Untrained networks have arbitrary activation statistics; `settle_batch_norm`
gives them a trained network's normalised activations (the BN running stats of
a few random batches) so that the int8 ranges are realistic.

Its BN shift (beta ~ N(1, 0.3)) keeps most ReLU6 units active. With beta near
0 (torchvision's initial state) the randomly initialised MobileNetV2 is
chaotic in int8: half of every layer sits at the clip, nearly-always-clipped
channels get huge folded weights, and flipping +-1 LSB in 0.2% of the first
activation *of the convert_pt2e reference itself* moves its logits by 15 LSB
(117 LSB at the end of the features). An end-to-end LSB bound on such a
network would measure that chaos, not the lowering.
"""

from __future__ import annotations

import torch
from torch import nn


def conv_bn(cin: int, cout: int, kernel, stride=1, padding=None, groups: int = 1, act: type | None = nn.ReLU6):
    """Conv2d (no bias) + BatchNorm2d (+ activation): torchvision's Conv2dNormActivation."""
    if padding is None:
        padding = (kernel - 1) // 2 if isinstance(kernel, int) else tuple((k - 1) // 2 for k in kernel)
    layers = [nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """1x1 expansion (skipped for t=1) + ReLU6, 3x3 depthwise + ReLU6, linear 1x1
    projection; the input is added back when the shape is unchanged."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.use_res_connect = stride == 1 and cin == cout
        layers = [conv_bn(cin, hidden, 1)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, cout, 1, act=None)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, output channels c, repeats n, first stride s): torchvision's table, width 1.0
    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
               (6, 320, 1, 1))

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers, cin = [conv_bn(3, 32, 3, 2)], 32
        for t, c, n, s in self.SETTING:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class DSCNN(nn.Module):
    """DS-CNN (the MLPerf Tiny KWS reference): 64 channels throughout. The first
    conv pads (5, 1), giving TF's 'same' output size 25x5 for 49x10 inputs."""

    def __init__(self, num_classes: int = 12, channels: int = 64):
        super().__init__()
        blocks = [conv_bn(1, channels, (10, 4), 2, padding=(5, 1), act=nn.ReLU), nn.Dropout(0.2)]
        for _ in range(4):
            blocks += [conv_bn(channels, channels, 3, groups=channels, act=nn.ReLU),
                       conv_bn(channels, channels, 1, act=nn.ReLU)]
        self.features = nn.Sequential(*blocks, nn.Dropout(0.4))
        self.pool = nn.AvgPool2d((25, 5))
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


@torch.no_grad()
def settle_batch_norm(model: nn.Module, batches, seed: int = 0, shift: float = 1.0) -> nn.Module:
    """Random BN affine parameters (scale ~ U(0.75, 1.25), shift ~ N(`shift`, 0.3)),
    running statistics from `batches` (a trained network's normalised
    activations); returns the model in eval mode."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches
            m.weight.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
            m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.3 + shift)
    model.train()
    for x in batches:
        model(x)
    return model.eval()


def espnn_quantize(model: nn.Module, example_inputs, calibration=None, quantizer=None):
    """export -> prepare_pt2e(EspNNQuantizer) -> calibrate -> convert_pt2e (the GraphModule)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from executorch_espnn.quantizer import EspNNQuantizer

    gm = torch.export.export(model.eval(), tuple(example_inputs)).module(check_guards=False)
    gm = prepare_pt2e(gm, quantizer if quantizer is not None else EspNNQuantizer())
    for inputs in calibration or [example_inputs]:
        gm(*inputs)
    return convert_pt2e(gm)
