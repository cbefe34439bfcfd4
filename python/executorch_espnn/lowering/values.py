"""Values: what an fx node is inside an XTS3 program.

A Value is one XTS3 tensor plus how to read it as the PyTorch tensor of an
fx node:

* ``shape``  - the logical (PyTorch) shape, from node.meta["val"];
* ``layout`` - CONTIG (PyTorch's contiguous order), CHANNELS_LAST (dim 1
  moved last: NHWC for rank 4, NWC for rank 3; ESP-NN's conv/pool/mean
  layout) or SWAPPED_LAST2 (the last two dims swapped, rank >= 3: what
  `k.transpose(-2, -1)` is over k's bytes, so BATCH_MATMUL can read k as its
  [N, K] filter rows without a TRANSPOSE);
* ``dims``   - the dims the XTS3 tensor record declares. Usually the physical
  shape (the logical shape permuted by the layout), but any dims with the same
  bytes are fine (a conv1d output declared [N,1,W,C] is a channels-last
  [N,C,W] value); consumers ask for the dims they need and get a RESHAPE only
  when they differ;
* ``dtype``/``qparams`` - INT8 with its quantization, or FLOAT32 at partition
  boundaries;
* ``const``  - for constants (int8 operands of add/mul), the logical data;
  they are written on first use, in the layout the consumer asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .quant import QParams

CONTIG = "contig"
CHANNELS_LAST = "channels_last"
SWAPPED_LAST2 = "swapped_last2"


def layout_perm(layout: str, rank: int) -> tuple[int, ...]:
    """Physical axis i holds logical axis perm[i]."""
    if layout == CONTIG or rank < 3:
        return tuple(range(rank))
    if layout == CHANNELS_LAST:
        return (0,) + tuple(range(2, rank)) + (1,)
    if layout == SWAPPED_LAST2:
        return tuple(range(rank - 2)) + (rank - 1, rank - 2)
    raise ValueError(f"unknown layout {layout!r}")


def physical_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    return tuple(shape[p] for p in layout_perm(layout, len(shape)))


def same_bytes(shape: tuple[int, ...], layout_a: str, layout_b: str) -> bool:
    """True when both layouts order the elements identically: the axes of
    size > 1 appear in the same relative order (e.g. [N,C,1,1] NCHW/NHWC)."""
    rank = len(shape)
    a = [p for p in layout_perm(layout_a, rank) if shape[p] != 1]
    b = [p for p in layout_perm(layout_b, rank) if shape[p] != 1]
    return a == b


def transpose_perm(shape_rank: int, src_layout: str, dst_layout: str) -> tuple[int, ...]:
    """TRANSPOSE perm taking the src physical order to the dst physical order
    (output axis d reads input axis perm[d])."""
    src = layout_perm(src_layout, shape_rank)
    dst = layout_perm(dst_layout, shape_rank)
    inv = {logical: i for i, logical in enumerate(src)}
    return tuple(inv[l] for l in dst)


@dataclass(frozen=True)
class Value:
    tensor: int | None
    shape: tuple[int, ...]
    dtype: str = "INT8"
    qparams: QParams | None = None
    layout: str = CONTIG
    dims: tuple[int, ...] | None = None
    const: np.ndarray | None = None

    def __post_init__(self):
        if self.dims is None and self.tensor is not None:
            object.__setattr__(self, "dims", physical_shape(self.shape, self.layout))

    @property
    def physical(self) -> tuple[int, ...]:
        return physical_shape(self.shape, self.layout)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_constant(self) -> bool:
        return self.const is not None