"""Small CNNs: the CLI's bundled default (tiny_cnn) and the handwritten-digits
classifier (digits_cnn) trained on scikit-learn's bundled 8x8 digits."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import random_input, seeded


class TinyCNN(nn.Module):
    """conv + BN + ReLU, depthwise conv + ReLU6, max pool, 1x1 conv + ReLU,
    global average pool, linear, softmax: every op on ESP-NN, a few ms to
    quantize and lower."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return torch.softmax(self.head(torch.flatten(self.features(x), 1)), dim=-1)


def tiny_cnn(num_classes: int = 10, resolution: int = 32, seed: int = 0):
    """The CLI's bundled default model: TinyCNN (random weights) on a
    [1,3,resolution,resolution] input; fully delegable."""
    with seeded(seed):
        model = TinyCNN(num_classes).eval()
    return model, (random_input((1, 3, resolution, resolution), seed + 1),)


class DigitsCNN(nn.Module):
    """For 8x8 grey digits: two 3x3 convs (16, 32 channels) + ReLU, 2x2 max
    pool, a 3x3 conv (32) + ReLU, flatten of the 4x4 map, linear to 10."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        )
        self.classifier = nn.Linear(32 * 4 * 4, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def digits_cnn(num_classes: int = 10, seed: int = 0):
    """DigitsCNN (untrained: examples/digits_accuracy.py trains it) on a
    [1,1,8,8] input scaled like load_digits()/16 (values in [0, 1])."""
    with seeded(seed):
        model = DigitsCNN(num_classes).eval()
    return model, (random_input((1, 1, 8, 8), seed + 1).abs().clamp(max=1.0),)
