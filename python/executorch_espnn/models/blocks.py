"""Building blocks shared by the zoo's networks, and the BN settling that
gives an untrained network a trained one's activation statistics."""

from __future__ import annotations

import contextlib

import torch
from torch import nn


def conv_bn(cin: int, cout: int, kernel, stride=1, padding=None, groups: int = 1, act: type | None = nn.ReLU6):
    """Conv2d (no bias) + BatchNorm2d (+ activation): torchvision's Conv2dNormActivation."""
    if padding is None:
        padding = (kernel - 1) // 2 if isinstance(kernel, int) else tuple((k - 1) // 2 for k in kernel)
    layers = [nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


def make_divisible(value: float, divisor: int = 8) -> int:
    """Channel count for a width multiplier: the nearest multiple of `divisor`,
    never below `divisor` nor more than 10% below `value` (the MobileNet rule,
    which keeps channel counts SIMD-friendly)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


@torch.no_grad()
def settle_batch_norm(model: nn.Module, batches, seed: int = 0, shift: float = 1.0) -> nn.Module:
    """Random BN affine parameters (scale ~ U(0.75, 1.25), shift ~ N(`shift`, 0.3)),
    running statistics from `batches` (a trained network's normalised
    activations); returns the model in eval mode.

    Untrained networks have arbitrary activation statistics. With BN shifts
    near 0 (PyTorch's initial state) a random MobileNetV2 is chaotic in int8:
    half of every layer sits at the clip, nearly-always-clipped channels get
    huge folded weights, and a +-1 LSB flip in 0.2% of the first activation of
    the convert_pt2e model itself moves its logits by 15 LSB. A shift near 1
    keeps most ReLU6 units active, as in a trained network, so int8 ranges and
    end-to-end LSB comparisons are meaningful.
    """
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches
            m.weight.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
            m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.3 + shift)
    model.train()
    for x in batches:
        model(x)
    return model.eval()


@contextlib.contextmanager
def seeded(seed: int):
    """Deterministic weights without disturbing the caller's global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def random_input(shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def settled_model(build, input_shape, seed: int, batch: int = 4):
    """The zoo's contract for a network with batch norm: ``build()`` under
    ``seed``, its statistics settled on ``batch`` random inputs of the example's
    shape (seed + 1), and the example input (seed + 2)."""
    with seeded(seed):  # also covers the dropout draws while BN settles
        model = build()
        settle_batch_norm(model, [random_input((batch, *input_shape[1:]), seed + 1)], seed=seed)
    return model, (random_input(input_shape, seed + 2),)
