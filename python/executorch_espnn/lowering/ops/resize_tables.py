"""Coordinate tables for RESIZE_NEAREST / RESIZE_BILINEAR (numpy, and the
device's fraction bits from the binding).

The runtime executes precomputed tables, so every PyTorch interpolation mode
is one code path on the device. The tables restate PyTorch's source-index
mapping (aten/src/ATen/native/UpSample.h) in float32, as its CPU kernels
compute it: ``nearest_idx`` (with its exact shortcuts for equal and doubled
sizes), ``area_pixel_compute_source_index`` and ``compute_scales_value``
(1/scale_factor when the caller gave one, else in/out).
"""

from __future__ import annotations

import numpy as np

from ... import _native

FRAC_BITS = _native.BILINEAR_FRAC_BITS  # fraction bits of the device's bilinear weights
FRAC_ONE = 1 << FRAC_BITS


def _pytorch_scale(in_size: int, out_size: int, scale_factor: float | None) -> np.float32:
    """compute_scales_value: 1/scale_factor when one was given, else in/out."""
    if scale_factor is not None and scale_factor > 0:
        return np.float32(1.0 / scale_factor)
    return np.float32(in_size) / np.float32(out_size)


def aot_nearest_index_table(in_size: int, out_size: int, mode: str = "nearest",
                            scale_factor: float | None = None) -> np.ndarray:
    """Source index per output index for interpolate(mode='nearest'/'nearest-exact')."""
    dst = np.arange(out_size)
    if mode == "nearest" and out_size == in_size:
        return dst.astype(np.int32)
    if mode == "nearest" and out_size == 2 * in_size:
        return (dst >> 1).astype(np.int32)
    scale = _pytorch_scale(in_size, out_size, scale_factor)
    offset = np.float32(0.5) if mode == "nearest-exact" else np.float32(0.0)
    src = np.floor((dst.astype(np.float32) + offset) * scale).astype(np.int64)
    return np.minimum(src, in_size - 1).astype(np.int32)


def aot_bilinear_table(in_size: int, out_size: int, align_corners: bool,
                       scale_factor: float | None = None) -> np.ndarray:
    """Rows (i0, i1, frac) for interpolate(mode='bilinear'); frac = Q10 weight of i1."""
    if align_corners:
        scale = (np.float32(in_size - 1) / np.float32(out_size - 1)) if out_size > 1 else np.float32(0)
    else:
        scale = _pytorch_scale(in_size, out_size, scale_factor)
    dst = np.arange(out_size).astype(np.float32)
    if align_corners:
        src = scale * dst
    else:
        src = np.maximum(scale * (dst + np.float32(0.5)) - np.float32(0.5), np.float32(0))
    i0 = src.astype(np.int64)  # src >= 0: truncation is floor
    i1 = np.where(i0 < in_size - 1, i0 + 1, i0)
    lam = np.clip(src - i0.astype(np.float32), 0, 1).astype(np.float64)
    frac = np.floor(lam * FRAC_ONE + 0.5).astype(np.int64)
    return np.stack([i0, i1, frac], axis=1).astype(np.int32)
