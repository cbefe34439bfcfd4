"""DS-CNN keyword spotting (Zhang et al., "Hello Edge", 2017; the MLPerf Tiny
KWS reference) on [N,1,49,10] MFCC features: 49 frames x 10 coefficients."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import conv_bn, settled_model


class DSCNN(nn.Module):
    """conv 64@10x4 stride 2 + BN + ReLU, four depthwise-separable blocks
    (3x3 depthwise + BN + ReLU, 1x1 + BN + ReLU; 64 channels), average pool
    over the whole 25x5 map, linear to 12 classes. The first conv pads (5, 1),
    giving TF's 'same' output size 25x5 for 49x10 inputs."""

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


def ds_cnn(num_classes: int = 12, seed: int = 0):
    """DS-CNN on a [1,1,49,10] input (MFCC-shaped: 49 frames x 10
    coefficients). Random weights, BN statistics settled on random features.
    Fully delegable."""
    return settled_model(lambda: DSCNN(num_classes), (1, 1, 49, 10), seed, batch=8)
