"""MobileNetV2 (Sandler et al. 2018) in plain torch.nn: torchvision's
`mobilenet_v2` layer for layer (channel plan, strides, ReLU6, linear
bottlenecks, residual adds, 1x1 to 1280, global average pool, dropout +
linear), written here because torchvision is not a dependency."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import conv_bn, make_divisible, settled_model


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
    # (expansion t, output channels c, repeats n, first stride s): the paper's table, width 1.0
    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
               (6, 320, 1, 1))

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0):
        super().__init__()
        cin = make_divisible(32 * width_mult)
        last = make_divisible(1280 * max(1.0, width_mult))
        layers = [conv_bn(3, cin, 3, 2)]
        for t, c, n, s in self.SETTING:
            cout = make_divisible(c * width_mult)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(conv_bn(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2(num_classes: int = 1000, resolution: int = 224, width_mult: float = 1.0, seed: int = 0):
    """MobileNetV2 on a [1,3,resolution,resolution] input (resolution a
    multiple of 32). Random weights, BN statistics settled on random images
    (see `settle_batch_norm`): no pretrained weights ship with the package.
    Fully delegable: one partition, no compute op on the CPU."""
    if resolution % 32 or resolution < 32:
        raise ValueError(f"mobilenet_v2: resolution must be a positive multiple of 32, got {resolution}")
    return settled_model(lambda: MobileNetV2(num_classes, width_mult), (1, 3, resolution, resolution), seed)
