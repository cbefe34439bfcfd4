"""Malformed XTSB bundles and the parser message each must produce.

Built from a small valid two-case bundle. Mutations of the header or of a
case record come in two kinds: with the CRC left alone (so the checksum
catches them) and with the CRC recomputed (so the field check itself must).
The host and the Xtensa runner must print the same verdict for each."""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass

from espnn_dev import xts3_mutations as xm
from executorch_espnn import bundle as B

H, C = B.HEADER_FIELDS, B.CASE_FIELDS


@dataclass(frozen=True)
class Mutation:
    name: str
    data: bytes
    message: str | None  # regex the ESPNN_BUNDLE_ERROR msg must fullmatch (None: any rejection)


def base_bundle() -> bytes:
    chain, _rank5, dequant = xm.valid_blobs()[:3]
    return B.write_bundle([B.make_case("chain", chain.blob, chain.feeds),
                           B.make_case("dequant", dequant.blob, dequant.feeds, runs=2)])


def fix_crc(data: bytes) -> bytes:
    b = bytearray(data)
    size = struct.unpack_from("<I", b, H["bundle_size"])[0]
    struct.pack_into("<I", b, H["crc32"], zlib.crc32(bytes(b[B.HEADER_SIZE:size])))
    return bytes(b)


def put(data: bytes, offset: int, fmt: str, value: int, crc: bool = True) -> bytes:
    b = bytearray(data)
    struct.pack_into("<" + fmt, b, offset, value)
    return fix_crc(bytes(b)) if crc else bytes(b)


def case_field(data: bytes, case: int, field: str) -> int:
    table = struct.unpack_from("<I", data, H["case_table"])[0]
    return struct.unpack_from("<I", data, table + case * B.CASE_RECORD_SIZE + C[field])[0]


def put_case(data: bytes, case: int, field: str, value: int, crc: bool = True) -> bytes:
    table = struct.unpack_from("<I", data, H["case_table"])[0]
    return put(data, table + case * B.CASE_RECORD_SIZE + C[field], "I", value, crc)


def mutations() -> list[Mutation]:
    base = base_bundle()
    size = len(base)
    table = struct.unpack_from("<I", base, H["case_table"])[0]
    table_end = table + 2 * B.CASE_RECORD_SIZE
    m: list[Mutation] = []

    def add(name, data, message=None):
        m.append(Mutation(name, data, message))

    # -- header
    add("empty", b"", r"bundle is 0 bytes, smaller than the 32-byte header")
    add("short_header", base[:31], r"bundle is 31 bytes, smaller than the 32-byte header")
    add("bad_magic", put(base, H["magic"], "I", 0x12345678), r"bundle header: bad magic 0x12345678 \(expected 'XTSB'\)")
    add("bare_xts3", xm.valid_blobs()[0].blob,
        r"bundle header: this is a bare XTS3 model, not a bundle \(wrap it with executorch_espnn.bundle\)")
    add("version_2", put(base, H["version"], "H", 2),
        r"bundle header: version 2 is not supported \(this runner reads 1\)")
    add("header_size", put(base, H["header_size"], "H", 48), r"bundle header: header_size is 48, expected 32")
    add("bundle_size_small", put(base, H["bundle_size"], "I", 31), r"bundle header: bundle_size 31 is out of range")
    add("bundle_size_huge", put(base, H["bundle_size"], "I", 0xFFFFFFFF, crc=False),
        r"bundle header: bundle_size 4294967295 is out of range")
    add("bundle_size_past_end", put(base, H["bundle_size"], "I", size + 16, crc=False),
        rf"bundle header: bundle_size {size + 16} exceeds the {size} bytes given \(truncated bundle, "
        r"or the partition is too small\)")
    add("flags", put(base, H["flags"], "I", 1), r"bundle header: flags 0x1 are not defined")
    add("reserved", put(base, H["reserved"], "I", 7), r"bundle header: reserved field is not 0")
    add("case_count_0", put(base, H["case_count"], "I", 0), r"bundle header: case_count 0 is not in 1\.\.1024")
    add("case_count_huge", put(base, H["case_count"], "I", 0x40000001),
        r"bundle header: case_count 1073741825 is not in 1\.\.1024")
    add("case_count_past_end", put(base, H["case_count"], "I", 1024),
        rf"bundle header: case table at offset {table} \(1024 records\) does not fit the {size}-byte bundle")
    add("case_table_misaligned", put(base, H["case_table"], "I", table + 2),
        rf"bundle header: case table at offset {table + 2} \(2 records\) does not fit the {size}-byte bundle")
    add("case_table_in_header", put(base, H["case_table"], "I", 16),
        rf"bundle header: case table at offset 16 \(2 records\) does not fit the {size}-byte bundle")
    add("case_table_wraps", put(base, H["case_table"], "I", 0xFFFFFFF0),
        rf"bundle header: case table at offset 4294967280 \(2 records\) does not fit the {size}-byte bundle")
    # -- checksum: payload, record and name bytes
    crc = struct.unpack_from("<I", base, H["crc32"])[0]
    for what, off in (("record", table + 5), ("name", case_field(base, 0, "name_offset")),
                      ("model", case_field(base, 0, "model_offset") + 40), ("last_byte", size - 1)):
        b = bytearray(base)
        b[off] ^= 0x01
        got = zlib.crc32(bytes(b[B.HEADER_SIZE:]))
        add(f"crc_{what}", bytes(b),
            rf"bundle: CRC-32 0x{got:08x} of bytes \[32, {size}\) does not match the header's 0x{crc:08x} "
            r"\(corrupt or partly written bundle\)")
    # -- case records (CRC fixed, so the field checks must catch them)
    name_off = case_field(base, 0, "name_offset")
    model_off, model_size = case_field(base, 1, "model_offset"), case_field(base, 1, "model_size")
    add("name_size_0", put_case(base, 0, "name_size", 0), r"case 0: name_size 0 is not in 1\.\.64")
    add("name_size_65", put_case(base, 0, "name_size", 65), r"case 0: name_size 65 is not in 1\.\.64")
    add("name_in_table", put_case(base, 1, "name_offset", table + 4),
        rf"case 1: name at offset {table + 4} overlaps the header or case table")
    add("name_past_end", put_case(base, 0, "name_offset", size - 2),
        rf"case 0: name bytes \[{size - 2}, \+5\) exceed the {size}-byte bundle")
    add("name_char", put(base, name_off + 2, "B", ord(" ")), r"case 0: name byte 2 is 0x20; names use \[A-Za-z0-9_.-\]")
    # case 1 ("dequant") renamed to case 0's "chain"
    add("name_dup", put_case(put_case(base, 1, "name_size", 5), 1, "name_offset", name_off),
        r"case 1: name repeats case 0's")
    add("model_misaligned", put_case(base, 1, "model_offset", model_off + 4),
        rf"case 1: model offset {model_off + 4} is not 16-byte aligned")
    add("model_past_end", put_case(base, 1, "model_size", size - model_off + 1),
        rf"case 1: model bytes \[{model_off}, \+{size - model_off + 1}\) exceed the {size}-byte bundle")
    add("model_size_wraps", put_case(base, 1, "model_size", 0xFFFFFFF0),
        rf"case 1: model bytes \[{model_off}, \+4294967280\) exceed the {size}-byte bundle")
    add("model_offset_wraps", put_case(base, 1, "model_offset", 0xFFFFFFF0),
        rf"case 1: model bytes \[4294967280, \+{model_size}\) exceed the {size}-byte bundle")
    add("model_in_header", put_case(base, 0, "model_offset", 0),
        r"case 0: model at offset 0 overlaps the header or case table")
    add("model_empty", put_case(base, 0, "model_size", 0), r"case 0: model is empty")
    add("inputs_misaligned", put_case(base, 0, "inputs_offset", case_field(base, 0, "inputs_offset") + 8),
        rf"case 0: inputs offset {case_field(base, 0, 'inputs_offset') + 8} is not 16-byte aligned")
    add("expected_past_end", put_case(base, 1, "expected_offset", size),
        rf"case 1: expected bytes \[{size}, \+{case_field(base, 1, 'expected_size')}\) exceed the {size}-byte bundle")
    add("runs_huge", put_case(base, 1, "runs", B.MAX_RUNS + 1), r"case 1: runs 1000001 exceed the limit of 1000000")
    for f in ("flags", "reserved0", "reserved1"):
        add(f"case_{f}", put_case(base, 1, f, 1), r"case 1: flags and reserved fields must be 0")
    assert table_end <= name_off
    # -- every truncation: rejected cleanly, never read past the end
    for n in range(B.HEADER_SIZE, size, 1):
        add(f"trunc_{n}", base[:n], rf"bundle header: bundle_size {size} exceeds the {n} bytes given "
                                    r"\(truncated bundle, or the partition is too small\)")
    return m


def parse_multi(stdout: str) -> dict[str, list[str]]:
    """bundle_runner output for several files -> {path: [record lines]}."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in stdout.splitlines():
        if line.startswith("BUNDLE_FILE "):
            cur = line[len("BUNDLE_FILE "):]
            out[cur] = []
        elif cur is not None and re.match(r"ESPNN_", line):
            out[cur].append(line)
    return out
