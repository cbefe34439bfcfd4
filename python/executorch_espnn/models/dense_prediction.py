"""Networks with spatial outputs, in plain torch.nn:

* unet: a small U-Net (Ronneberger et al. 2015) for 64x64 segmentation:
  two 3x3 conv + BN + ReLU per level, 2x2 max pool down, 2x2 stride-2
  ConvTranspose2d up, skip connections joined by channel concatenation;
* two_head_detector: a single-shot detector in the SSD style (Liu et al.
  2016): a depthwise-separable backbone to a 6x6 grid, then two parallel 3x3
  conv heads, class scores and box offsets for each of 3 anchors per cell.
"""

from __future__ import annotations

import torch
from torch import nn

from .blocks import conv_bn, settled_model


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(cin, cout, 3, act=nn.ReLU), conv_bn(cout, cout, 3, act=nn.ReLU))


class UNet(nn.Module):
    """Encoder 16 -> 32 -> 64 channels (max pool between levels), decoder back
    up with ConvTranspose2d(2, stride 2), cat with the encoder's map of the same
    size, two convs; a 1x1 conv to the class logits per pixel."""

    def __init__(self, in_channels: int = 3, num_classes: int = 2, width: int = 16):
        super().__init__()
        c1, c2, c3 = width, 2 * width, 4 * width
        self.enc1, self.enc2 = _double_conv(in_channels, c1), _double_conv(c1, c2)
        self.bottleneck = _double_conv(c2, c3)
        self.pool = nn.MaxPool2d(2)
        self.up2, self.dec2 = nn.ConvTranspose2d(c3, c2, 2, 2), _double_conv(2 * c2, c2)
        self.up1, self.dec1 = nn.ConvTranspose2d(c2, c1, 2, 2), _double_conv(2 * c1, c1)
        self.head = nn.Conv2d(c1, num_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        b = self.bottleneck(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


def unet(in_channels: int = 3, num_classes: int = 2, resolution: int = 64, seed: int = 0):
    """UNet on a [1,in_channels,resolution,resolution] image (resolution a
    multiple of 4); output [1,num_classes,resolution,resolution]. Random
    weights, BN statistics settled on random images."""
    if resolution % 4 or resolution < 4:
        raise ValueError(f"unet: resolution must be a positive multiple of 4, got {resolution}")
    return settled_model(lambda: UNet(in_channels, num_classes), (1, in_channels, resolution, resolution), seed)


class TwoHeadDetector(nn.Module):
    """Backbone: 3x3 conv 16 stride 2, then depthwise-separable blocks (3x3
    depthwise + BN + ReLU, 1x1 + BN + ReLU) to 32, 64 and 64 channels, each at
    stride 2 (96x96 -> 6x6). Heads on the 6x6 map: a 3x3 conv to anchors x
    classes scores and a 3x3 conv to anchors x 4 box offsets."""

    def __init__(self, num_classes: int = 2, anchors: int = 3):
        super().__init__()
        layers, cin = [conv_bn(3, 16, 3, 2, act=nn.ReLU)], 16
        for cout in (32, 64, 64):
            layers += [conv_bn(cin, cin, 3, 2, groups=cin, act=nn.ReLU), conv_bn(cin, cout, 1, act=nn.ReLU)]
            cin = cout
        self.backbone = nn.Sequential(*layers)
        self.cls_head = nn.Conv2d(cin, anchors * num_classes, 3, padding=1)
        self.box_head = nn.Conv2d(cin, anchors * 4, 3, padding=1)

    def forward(self, x):
        f = self.backbone(x)
        return self.cls_head(f), self.box_head(f)


def two_head_detector(num_classes: int = 2, anchors: int = 3, resolution: int = 96, seed: int = 0):
    """TwoHeadDetector on a [1,3,resolution,resolution] image (resolution a
    multiple of 16); two outputs: class scores [1,anchors*num_classes,R/16,R/16]
    and box offsets [1,anchors*4,R/16,R/16]. Random weights, BN statistics
    settled on random images."""
    if resolution % 16 or resolution < 16:
        raise ValueError(f"two_head_detector: resolution must be a positive multiple of 16, got {resolution}")
    return settled_model(lambda: TwoHeadDetector(num_classes, anchors), (1, 3, resolution, resolution), seed)
