"""Helpers shared by the data-movement lowerings (slice, pad, cat, split).

SLICE/PAD/CONCAT/SPLIT work on the dims of the XTS3 tensor, so a logical
(PyTorch) dim is mapped through the value's layout: slicing the channels of a
channels-last value is a SLICE along its last physical axis, no TRANSPOSE.
These ops never requantize; the int8 bytes keep the input's quantization and
a REQUANTIZE follows only when the graph's output quantization differs.
"""

from __future__ import annotations

from ..values import Value, layout_perm

MAX_RANK = 5


def physical_axis(value: Value, dim: int) -> int:
    """The XTS3 axis holding logical dim `dim` of `value`."""
    return layout_perm(value.layout, value.rank).index(dim % value.rank)


def per_axis(values: dict[int, int], rank: int, fill: int) -> list[int]:
    """A 5-slot parameter array: `fill` for the axes below `rank` not in
    `values`, 0 beyond the rank (the format's rule for unused slots)."""
    out = [fill if i < rank else 0 for i in range(MAX_RANK)]
    for axis, v in values.items():
        out[axis] = v
    return out
