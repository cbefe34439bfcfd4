"""Zoo models at sizes an emulated ESP32-S3 (and, for DS-CNN, a plain ESP32)
runs from the runner's data partition: ten classes instead of 1000 keep the
classifier weights inside the 2 MiB partition; small inputs keep arena and scratch inside the
runner's internal-RAM pool."""

from executorch_espnn import models as M


def ds_cnn():
    return M.ds_cnn()


def mobilenet_v2_05_96():
    return M.mobilenet_v2(num_classes=10, resolution=96, width_mult=0.5)


def mobilenet_v2_05_64():
    """MobileNetV2-0.5 at 64x64: with ESP-NN's S3 scratch it fits an ESP32-S3
    without PSRAM (at 96x96 the S3 build needs 147,456 B of arena plus
    207,424 B of ESP-NN scratch, more than the largest free block)."""
    return M.mobilenet_v2(num_classes=10, resolution=64, width_mult=0.5)


def mobilenet_v3_small_96():
    return M.mobilenet_v3_small(num_classes=10, resolution=96)


# ------------------------------------------------- device evidence (tools/device-evidence)
def mobilenet_v2_224():
    """MobileNetV2-1.0 at 224x224, 1000 classes: 3.4 MB of int8 weights in the
    S3 defaults' 6 MiB bundle partition; fused schedule (the 301 KB arena)."""
    return M.mobilenet_v2()


def mobilenet_v3_small_224():
    return M.mobilenet_v3_small()


def transformer_block():
    """models.vit.Block(dim=64, heads=4, mlp_ratio=4) on [1, 64, 64]: the
    transformer block of tests/runtime/test_transformer_acceptance.py."""
    import torch

    from executorch_espnn.models.vit import Block

    torch.manual_seed(0)
    return Block(64, 4, 4).eval(), (torch.randn(1, 64, 64),)


def small_vit():
    return M.small_vit()


def tiny_cnn():
    return M.tiny_cnn()


def digits_cnn():
    return M.digits_cnn()


# CPU-fallback programs for the .pte suite: ExecuTorch's portable kernels run
# what ESP-NN does not, between or around EspNNBackend delegates.
def _torch():
    import torch
    from torch import nn

    return torch, nn


def lstm_after_conv():
    """A conv front end (delegated) feeding nn.LSTM (CPU: ExecuTorch's portable kernels)."""
    torch, nn = _torch()

    class ConvLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(8, 16, 3, padding=1)
            self.lstm = nn.LSTM(16, 24, batch_first=True)
            self.head = nn.Linear(24, 4)

        def forward(self, x):
            y = torch.relu(self.conv(x)).transpose(1, 2)
            out, _ = self.lstm(y)
            return self.head(out[:, -1])

    torch.manual_seed(0)
    return ConvLstm().eval(), (torch.randn(1, 8, 20),)


def cumsum_island():
    """conv | cumsum (CPU) | conv: two delegates with a portable kernel between."""
    torch, nn = _torch()

    class CumsumIsland(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, x):
            return self.c2(torch.cumsum(torch.relu(self.c1(x)), dim=1))

    torch.manual_seed(0)
    return CumsumIsland().eval(), (torch.randn(1, 3, 8, 8),)


def cpu_op_at_each_end():
    """sin (CPU) -> conv + relu (delegated) -> cos (CPU)."""
    torch, nn = _torch()

    class CpuEnds(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.cos(torch.relu(self.conv(torch.sin(x))))

    torch.manual_seed(0)
    return CpuEnds().eval(), (torch.randn(1, 3, 8, 8),)
