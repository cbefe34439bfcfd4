"""A small vision transformer (Dosovitskiy et al., 2020): patch embedding by a
strided conv, pre-norm transformer blocks, mean over tokens, linear head.

Everything lowers to one ESP-NN delegate: the convolution, linears, layer
norms (LAYER_NORM), GELU (a LUT), softmax, residual adds, the attention
matmuls (BATCH_MATMUL on ESP-NN's FC kernel: q @ k^T reads k's rows in place,
attn @ v transposes v per head into the scratch), the head split/merge
(reshape/permute/select -> TRANSPOSE/SLICE) and the token mean (MEAN_HW).
``Block`` is the benchmarks' transformer block (benchmarks/run.py)."""

from __future__ import annotations

import torch
from torch import nn

from .blocks import random_input, seeded


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"small_vit: dim {dim} is not divisible by heads {heads}")
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class SmallViT(nn.Module):
    def __init__(self, image_size: int = 32, patch_size: int = 4, dim: int = 64, depth: int = 2, heads: int = 4,
                 mlp_ratio: int = 2, num_classes: int = 10, channels: int = 3):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"small_vit: image_size {image_size} is not a multiple of patch_size {patch_size}")
        tokens = (image_size // patch_size) ** 2
        self.patch_embed = nn.Conv2d(channels, dim, patch_size, stride=patch_size)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.Sequential(*(Block(dim, heads, mlp_ratio) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed  # [N, tokens, dim]
        x = self.norm(self.blocks(x))
        return self.head(x.mean(dim=1))


def small_vit(image_size: int = 32, patch_size: int = 4, dim: int = 64, depth: int = 2, heads: int = 4,
              mlp_ratio: int = 2, num_classes: int = 10, seed: int = 0):
    """SmallViT (random weights) on a [1,3,image_size,image_size] input.
    Fully delegated (one delegate, no CPU compute op)."""
    with seeded(seed):
        model = SmallViT(image_size, patch_size, dim, depth, heads, mlp_ratio, num_classes).eval()
    return model, (random_input((1, 3, image_size, image_size), seed + 1),)
