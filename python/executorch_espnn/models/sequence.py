"""Sequence models on sensor and audio features, in plain torch.nn:

* har_cnn: a 1-D CNN activity recogniser on raw inertial windows (the UCI HAR
  layout: 9 signals x 128 samples at 50 Hz, 6 activities);
* tcn: a temporal convolutional network (Bai, Kolter and Koltun, "An
  Empirical Evaluation of Generic Convolutional and Recurrent Networks for
  Sequence Modeling", 2018): residual blocks of causal dilated convolutions;
* gru_kws: a GRU keyword spotter on 49 x 10 MFCC frames (the input of the
  MLPerf Tiny DS-CNN), hidden size 64, linear head on the last step.
"""

from __future__ import annotations

import torch
from torch import nn

from .blocks import random_input, seeded, settled_model


def _conv1d_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv1d(cin, cout, kernel, stride, (kernel - 1) // 2, bias=False), nn.BatchNorm1d(cout),
                         nn.ReLU())


class HARCNN(nn.Module):
    """Three Conv1d + BN + ReLU layers (kernel 5; 32 channels, then 64 and 64 at
    stride 2), global average pool over time, linear to the activities."""

    def __init__(self, signals: int = 9, num_classes: int = 6):
        super().__init__()
        self.features = nn.Sequential(_conv1d_bn(signals, 32, 5), _conv1d_bn(32, 64, 5, 2), _conv1d_bn(64, 64, 5, 2))
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, x):  # [N, signals, samples]
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def har_cnn(num_classes: int = 6, samples: int = 128, seed: int = 0):
    """HARCNN on a [1,9,samples] window of inertial signals. Random weights, BN
    statistics settled on random windows."""
    return settled_model(lambda: HARCNN(9, num_classes), (1, 9, samples), seed, batch=8)


class TemporalBlock(nn.Module):
    """Two causal dilated Conv1d + ReLU (the left zero padding of (k-1)*d keeps
    every output from seeing later samples), added to the input (through a 1x1
    conv when the channel count changes), ReLU."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int):
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv1 = nn.Conv1d(cin, cout, kernel, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, kernel, dilation=dilation)
        self.shortcut = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        y = torch.relu(self.conv1(nn.functional.pad(x, (self.pad, 0))))
        y = torch.relu(self.conv2(nn.functional.pad(y, (self.pad, 0))))
        return torch.relu(y + self.shortcut(x))


class TCN(nn.Module):
    """`levels` temporal blocks with dilations 1, 2, 4, ... (receptive field
    1 + 2 (k-1) (2^levels - 1) samples), linear head on the last time step."""

    def __init__(self, inputs: int = 8, channels: int = 16, levels: int = 4, kernel: int = 3, num_classes: int = 10):
        super().__init__()
        blocks, cin = [], inputs
        for i in range(levels):
            blocks.append(TemporalBlock(cin, channels, kernel, 2 ** i))
            cin = channels
        self.blocks = nn.Sequential(*blocks)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x):  # [N, inputs, T]
        return self.classifier(self.blocks(x)[:, :, -1])


def tcn(inputs: int = 8, channels: int = 16, levels: int = 4, steps: int = 64, num_classes: int = 10,
        seed: int = 0):
    """TCN on a [1,inputs,steps] sequence (default: 8 signals, 64 steps, 4
    blocks of 16 channels, receptive field 61 steps). Random weights."""
    with seeded(seed):
        model = TCN(inputs, channels, levels, num_classes=num_classes).eval()
    return model, (random_input((1, inputs, steps), seed + 1),)


class GRUKWS(nn.Module):
    """nn.GRU over the MFCC frames (batch first), linear head on the last step's output."""

    def __init__(self, features: int = 10, hidden: int = 64, num_classes: int = 12):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x):  # [N, frames, features]
        out, _ = self.gru(x)
        return self.classifier(out[:, -1])


def gru_kws(num_classes: int = 12, frames: int = 49, seed: int = 0):
    """GRUKWS on a [1,frames,10] MFCC input (49 frames: 1 s at a 20 ms hop).
    Random weights."""
    with seeded(seed):
        model = GRUKWS(10, 64, num_classes).eval()
    return model, (random_input((1, frames, 10), seed + 1),)
