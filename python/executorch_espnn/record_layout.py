"""Container constants as the binding exports them (``_native``), and the
struct layouts of their fixed-size records derived from the exported field
offsets: a field spans from its offset to the next field's (or the record's
end), so neither field order nor widths are restated in Python."""

from __future__ import annotations

import struct
from typing import Mapping

_WORD_CODES = {1: "B", 2: "H", 4: "I"}


def constants(fmt: Mapping[str, object], *names: str) -> tuple:
    """The values of `names` in an exported format dict, in that order."""
    return tuple(fmt[n] for n in names)


def record_struct(fields: Mapping[str, int], size: int) -> struct.Struct:
    """Little-endian struct of a record whose fields start at `fields`
    offsets; a field wider than 4 bytes is an array of u32 (e.g. dims)."""
    offsets = sorted(fields.values())
    if not offsets or offsets[0] != 0 or len(set(offsets)) != len(offsets):
        raise ValueError(f"field offsets {dict(fields)} do not tile a record from byte 0")
    codes = []
    for start, end in zip(offsets, offsets[1:] + [size]):
        width = end - start
        if width in _WORD_CODES:
            codes.append(_WORD_CODES[width])
        elif width > 4 and width % 4 == 0:
            codes.append(f"{width // 4}I")
        else:
            raise ValueError(f"a field of {width} bytes at offset {start}")
    layout = struct.Struct("<" + "".join(codes))
    assert layout.size == size
    return layout
