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
    """A conv front end (delegated) feeding a bidirectional nn.LSTM, which the
    delegate does not take (unidirectional layers only): ExecuTorch's portable
    kernels run its decomposition on the CPU, then the head is delegated."""
    torch, nn = _torch()

    class ConvLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(8, 16, 3, padding=1)
            self.lstm = nn.LSTM(16, 12, batch_first=True, bidirectional=True)
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


# --------------------------------------- PyTorch's standard modules (issue 25)
# The models of tests/runtime/test_standard_modules_*.py, as users write them:
# recurrent layers and attention on the delegate, dilated / grouped convs
# staged onto ESP-NN's dense conv (the S3 SIMD paths).
def _standard(test_module: str, name: str, table: str = "MODELS"):
    import importlib
    import sys
    from pathlib import Path

    import torch

    runtime_tests = str(Path(__file__).resolve().parents[1] / "runtime")
    if runtime_tests not in sys.path:
        sys.path.insert(0, runtime_tests)  # the test modules import their harness from there
    build, shape = getattr(importlib.import_module(test_module), table)[name]
    torch.manual_seed(0)
    model = build().eval()
    return model, (torch.randn(shape),)


def gru_kws():
    """nn.GRU(10, 64) over 49 frames and a linear head: one GRU record."""
    return _standard("test_standard_modules_recurrent", "gru_kws")


def lstm_kws():
    return _standard("test_standard_modules_recurrent", "lstm_kws")


def transformer_encoder():
    """nn.TransformerEncoder of nn.TransformerEncoderLayer (pre-norm, gelu)."""
    return _standard("test_standard_modules_attention", "encoder_pre_norm_gelu", "DELEGATED")


def causal_encoder():
    """nn.TransformerEncoder with the square subsequent mask (MASKED_SOFTMAX)."""
    return _standard("test_standard_modules_attention", "encoder_causal", "DELEGATED")


def tcn_dilated():
    """Dilated causal nn.Conv1d, dilations 1, 2, 4, 8 (staged dilation phases)."""
    return _standard("test_standard_modules_simd", "tcn_dilations_1_to_8")


def regnetx_stages():
    """RegNetX-400MF's stem and first stages, group width 16 (staged groups)."""
    return _standard("test_standard_modules_simd", "regnetx_400mf_stages")


def grouped_stack():
    return _standard("test_standard_modules_simd", "grouped_3x3_stack")


def efficientnet_b0():
    """torchvision's EfficientNet-B0 at 224x224, random weights (instruction
    counts do not depend on weight values); needs torchvision (the model
    definition only: benchmarks/schedules.py loads it without its C++ ops)."""
    import sys
    from pathlib import Path

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import schedules

    torch.manual_seed(0)
    return schedules._torchvision_efficientnet_b0().eval(), (torch.randn(1, 3, 224, 224),)
