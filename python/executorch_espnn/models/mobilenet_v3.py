"""MobileNetV3-Small (Howard et al., "Searching for MobileNetV3", 2019) in
plain torch.nn: inverted residuals with optional squeeze-and-excitation,
ReLU or hard-swish per block, hard-sigmoid gates."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import conv_bn, make_divisible, settled_model


class SqueezeExcite(nn.Module):
    """Global average pool, 1x1 down + ReLU, 1x1 up + hard-sigmoid, scale the
    input channels (a channel-broadcast multiply)."""

    def __init__(self, channels: int):
        super().__init__()
        squeeze = make_divisible(channels / 4)
        self.down = nn.Conv2d(channels, squeeze, 1)
        self.up = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = nn.functional.hardsigmoid(self.up(nn.functional.relu(self.down(s))))
        return x * s


class Bneck(nn.Module):
    """1x1 expansion (skipped when it would not expand), k x k depthwise,
    optional squeeze-and-excite, linear 1x1 projection; residual when the
    shape is unchanged."""

    def __init__(self, cin: int, kernel: int, hidden: int, cout: int, se: bool, act: type, stride: int):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        layers = [conv_bn(cin, hidden, 1, act=act)] if hidden != cin else []
        layers.append(conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=act))
        if se:
            layers.append(SqueezeExcite(hidden))
        layers.append(conv_bn(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res_connect else self.block(x)


class MobileNetV3Small(nn.Module):
    RE, HS = nn.ReLU, nn.Hardswish
    # (kernel, expanded channels, output channels, squeeze-excite, activation, stride): the paper's Table 2
    SETTING = ((3, 16, 16, True, RE, 2), (3, 72, 24, False, RE, 2), (3, 88, 24, False, RE, 1),
               (5, 96, 40, True, HS, 2), (5, 240, 40, True, HS, 1), (5, 240, 40, True, HS, 1),
               (5, 120, 48, True, HS, 1), (5, 144, 48, True, HS, 1), (5, 288, 96, True, HS, 2),
               (5, 576, 96, True, HS, 1), (5, 576, 96, True, HS, 1))

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0):
        super().__init__()
        cin = make_divisible(16 * width_mult)
        layers = [conv_bn(3, cin, 3, 2, act=nn.Hardswish)]
        for k, exp, c, se, act, s in self.SETTING:
            cout = make_divisible(c * width_mult)
            layers.append(Bneck(cin, k, make_divisible(exp * width_mult), cout, se, act, s))
            cin = cout
        last = 6 * cin
        layers.append(conv_bn(cin, last, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(last, 1024), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(1024, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v3_small(num_classes: int = 1000, resolution: int = 224, width_mult: float = 1.0, seed: int = 0):
    """MobileNetV3-Small on a [1,3,resolution,resolution] input (a multiple of
    32). Random weights, BN statistics settled on random images."""
    if resolution % 32 or resolution < 32:
        raise ValueError(f"mobilenet_v3_small: resolution must be a positive multiple of 32, got {resolution}")
    return settled_model(lambda: MobileNetV3Small(num_classes, width_mult), (1, 3, resolution, resolution), seed)


class SENet(nn.Module):
    """A small squeeze-excite network for the fused-region figures: a 3x3
    stride-2 stem, three MobileNetV3 bnecks with squeeze-and-excitation (two
    at the stem's resolution, the second with a residual, one stride 2),
    global average pool, linear. Its arena is set by the tensors around the
    squeeze-excite blocks (the scaled map is read whole by MEAN_HW and MUL)."""

    SETTING = ((3, 64, 24, True, nn.Hardswish, 1), (3, 72, 24, True, nn.Hardswish, 1),
               (3, 96, 40, True, nn.Hardswish, 2))

    def __init__(self, num_classes: int = 10):
        super().__init__()
        layers, cin = [conv_bn(3, 16, 3, 2, act=nn.Hardswish)], 16
        for k, exp, c, se, act, s in self.SETTING:
            layers.append(Bneck(cin, k, exp, c, se, act, s))
            cin = c
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def se_net(num_classes: int = 10, resolution: int = 64, seed: int = 0):
    """SENet on a [1,3,resolution,resolution] input (even). Random weights,
    BN statistics settled on random images."""
    if resolution % 2 or resolution < 2:
        raise ValueError(f"se_net: resolution must be a positive even number, got {resolution}")
    return settled_model(lambda: SENet(num_classes), (1, 3, resolution, resolution), seed)
