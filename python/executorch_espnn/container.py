"""Writing and reading the test rig's containers, XTSB bundles
(:mod:`executorch_espnn.bundle`) and XTSP .pte suites
(:mod:`executorch_espnn.pte_suite`): what the two formats share, stated
once. Both are a fixed header, fixed-size record tables, then payloads
placed at aligned offsets, sealed with a zlib CRC-32 of everything after
the header; both name their cases the same way. Each format module keeps
what differs (its records, its payloads, its constants from the binding);
the device's rules for the shared part are in
``components/espnn_test_runner/include/espnn/container_header.h``."""

from __future__ import annotations

import re
import struct
import zlib
from typing import Callable, Mapping, Sequence


def align(n: int, alignment: int) -> int:
    """`n` rounded up to a multiple of `alignment`."""
    return (n + alignment - 1) // alignment * alignment


class ContainerWriter:
    """Lays out one container: payloads go after the header and tables
    (which end at `tables_end`), each at the next offset of its alignment;
    records are packed into the tables; :meth:`seal` produces the bytes."""

    def __init__(self, tables_end: int):
        self.pos = tables_end
        self._payloads: list[tuple[int, bytes]] = []
        self._records: list[tuple[struct.Struct, int, tuple]] = []

    def place(self, data: bytes, alignment: int) -> int:
        """Places a payload; returns its offset."""
        self.pos = align(self.pos, alignment)
        offset = self.pos
        self._payloads.append((offset, data))
        self.pos += len(data)
        return offset

    def record(self, layout: struct.Struct, offset: int, values: Sequence[int]) -> None:
        """A fixed-size record at `offset` (inside the tables)."""
        self._records.append((layout, offset, tuple(values)))

    def seal(self, header: struct.Struct, header_size: int, size_alignment: int,
             header_values: Callable[[int, int], Sequence[int]]) -> bytes:
        """The container: its size is the end of the last payload rounded up
        to `size_alignment`; `header_values(size, crc)` gives the header's
        fields, where crc is the CRC-32 of every byte after the header."""
        size = align(self.pos, size_alignment)
        blob = bytearray(size)
        for layout, offset, values in self._records:
            layout.pack_into(blob, offset, *values)
        for offset, data in self._payloads:
            blob[offset:offset + len(data)] = data
        crc = zlib.crc32(bytes(blob[header_size:]))
        header.pack_into(blob, 0, *header_values(size, crc))
        return bytes(blob)


def unseal(data: bytes, header: struct.Struct, fields: Mapping[str, int], *, magic: int, version: int,
           header_size: int, size_field: str, noun: str) -> dict[str, int]:
    """The header fields of a container (by name), after checking its magic,
    version, header size, that it is not truncated and its CRC-32. `noun`
    names the container in the messages ("bundle", ".pte suite")."""
    name = struct.pack("<I", magic).decode("ascii")  # "XTSB"
    if len(data) < header_size:
        raise ValueError(f"shorter than the {name} header")
    h = dict(zip(sorted(fields, key=fields.__getitem__), header.unpack_from(data, 0)))
    if h["magic"] != magic or h["version"] != version or h["header_size"] != header_size:
        raise ValueError(f"not an {name} version {version} {noun}")
    size = h[size_field]
    if size > len(data) or zlib.crc32(data[header_size:size]) != h["crc32"]:
        raise ValueError(f"truncated {noun} or CRC mismatch")
    return h


def check_cases(noun: str, names: Sequence[str], runs: Sequence[int], *, max_cases: int, max_name_bytes: int,
                max_runs: int) -> None:
    """The rules on the cases every container holds: 1..max_cases of them,
    unique names of 1..max_name_bytes characters of [A-Za-z0-9_.-] (a name
    is one token of a result line), runs in 0..max_runs (0: the runner's
    default)."""
    if not 1 <= len(names) <= max_cases:
        raise ValueError(f"a {noun} holds 1..{max_cases} cases, got {len(names)}")
    name_re = re.compile(r"[A-Za-z0-9_.-]{1,%d}" % max_name_bytes)
    for name, n in zip(names, runs):
        if not name_re.fullmatch(name):
            raise ValueError(f"case name {name!r}: 1..{max_name_bytes} characters of [A-Za-z0-9_.-]")
        if not 0 <= n <= max_runs:
            raise ValueError(f"case {name}: runs {n} not in 0..{max_runs}")
    if len(set(names)) != len(names):
        raise ValueError("case names must be unique")
