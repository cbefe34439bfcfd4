"""The MLPerf Tiny reference networks not elsewhere in the zoo (Banbury et al.,
"MLPerf Tiny Benchmark", 2021; DS-CNN keyword spotting is in ds_cnn.py),
written in plain torch.nn from the benchmark's published descriptions:

* image classification: ResNet-8 on 32x32 CIFAR-10 images;
* visual wake words: MobileNetV1 with width multiplier 0.25 on 96x96 images;
* anomaly detection: a fully connected autoencoder of 640-value feature vectors.

The reference models end in a softmax (the classifiers); as in ds_cnn(), the
zoo returns the logits, whose argmax is the same.
"""

from __future__ import annotations

import torch
from torch import nn

from .blocks import conv_bn, settled_model


class ResidualStack(nn.Module):
    """Two 3x3 conv + BN (ReLU between them), the input added back, ReLU.
    With a stride or a channel change the shortcut is a 1x1 conv with that stride
    (ResNet v1's projection shortcut, as the MLPerf Tiny ResNet-8 has)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, 3, stride, act=nn.ReLU), conv_bn(cout, cout, 3, act=None))
        self.shortcut = nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet8(nn.Module):
    """MLPerf Tiny image classification: 3x3 conv 16 + BN + ReLU, three residual
    stacks (16 channels at stride 1, 32 and 64 at stride 2), 8x8 average pool,
    linear to 10 classes."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, act=nn.ReLU)
        self.stacks = nn.Sequential(ResidualStack(16, 16, 1), ResidualStack(16, 32, 2), ResidualStack(32, 64, 2))
        self.pool = nn.AvgPool2d(8)
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.stacks(self.stem(x))), 1))


def resnet8(num_classes: int = 10, seed: int = 0):
    """ResNet-8 on a [1,3,32,32] CIFAR-10-sized input. Random weights, BN
    statistics settled on random images. Fully delegable."""
    return settled_model(lambda: ResNet8(num_classes), (1, 3, 32, 32), seed, batch=8)


class MobileNetV1(nn.Module):
    """MobileNetV1 (Howard et al. 2017): 3x3 conv stride 2, then 13
    depthwise-separable blocks (3x3 depthwise + BN + ReLU, 1x1 + BN + ReLU),
    global average pool, linear. Channels are the paper's times `width_mult`
    (0.25: 8 -> 16, 32, 32, 64, 64, 128 x6, 256, 256), as in the MLPerf Tiny
    visual-wake-words model, whose layers use ReLU."""

    # (output channels at width 1.0, stride) of the 13 depthwise-separable blocks
    BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)) + ((512, 1),) * 5 + ((1024, 2), (1024, 1))

    def __init__(self, num_classes: int = 2, width_mult: float = 0.25, in_channels: int = 3,
                 act: type = nn.ReLU, softmax: bool = False):
        super().__init__()
        cin = int(32 * width_mult)
        layers = [conv_bn(in_channels, cin, 3, 2, act=act)]
        for c, s in self.BLOCKS:
            cout = int(c * width_mult)
            layers += [conv_bn(cin, cin, 3, s, groups=cin, act=act), conv_bn(cin, cout, 1, act=act)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(cin, num_classes)
        self.softmax = softmax

    def forward(self, x):
        logits = self.classifier(torch.flatten(self.pool(self.features(x)), 1))
        return torch.softmax(logits, dim=1) if self.softmax else logits


def vww_mobilenet_v1(num_classes: int = 2, resolution: int = 96, width_mult: float = 0.25, seed: int = 0,
                     grayscale: bool = False):
    """MLPerf Tiny visual wake words: MobileNetV1-0.25 on a [1,3,96,96] input
    (person / no person). Random weights, BN statistics settled on random
    images. Fully delegable.

    grayscale=True gives the person-detection network of TensorFlow Lite
    Micro's example (the same MobileNetV1-0.25 trained on visual wake words,
    shipped as int8 data): a [1,1,96,96] input, ReLU6 activations and a
    softmax over the two classes, layer for layer the published graph, so
    that benchmarks/peer.py compares the same architecture on both stacks."""
    if resolution % 32 or resolution < 32:
        raise ValueError(f"vww_mobilenet_v1: resolution must be a positive multiple of 32, got {resolution}")
    if grayscale:
        return settled_model(lambda: MobileNetV1(num_classes, width_mult, in_channels=1, act=nn.ReLU6, softmax=True),
                             (1, 1, resolution, resolution), seed)
    return settled_model(lambda: MobileNetV1(num_classes, width_mult), (1, 3, resolution, resolution), seed)


def _dense_bn(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU())


class ADAutoencoder(nn.Module):
    """MLPerf Tiny anomaly detection (ToyADMOS machine sounds): 640 log-mel
    values (5 frames x 128 bands) -> four linear 128 + BN + ReLU layers -> an
    8-unit bottleneck (+ BN + ReLU) -> four linear 128 + BN + ReLU layers ->
    linear 640, the reconstruction (the anomaly score is its error)."""

    def __init__(self, features: int = 640, hidden: int = 128, bottleneck: int = 8):
        super().__init__()
        enc = [_dense_bn(features, hidden)] + [_dense_bn(hidden, hidden) for _ in range(3)]
        dec = [_dense_bn(bottleneck, hidden)] + [_dense_bn(hidden, hidden) for _ in range(3)]
        self.encoder = nn.Sequential(*enc, _dense_bn(hidden, bottleneck))
        self.decoder = nn.Sequential(*dec, nn.Linear(hidden, features))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def ad_autoencoder(seed: int = 0):
    """The anomaly-detection autoencoder on a [1,640] input. Random weights, BN
    statistics settled on random feature vectors."""
    return settled_model(lambda: ADAutoencoder(), (1, 640), seed, batch=64)
