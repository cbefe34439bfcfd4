"""Malformed XTSP .pte suites and a suite that needs no ExecuTorch (for the
parser tests on the host and on Xtensa)."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from executorch_espnn import pte_suite as S


def synthetic_suite() -> S.PteSuite:
    """A valid container whose .pte is placeholder bytes: enough for the
    suite parser, which does not look inside the program."""
    ins = [np.arange(6, dtype=np.int8).reshape(2, 3), np.array(True), np.zeros((0, 4), np.int32),
           np.ones((1, 2, 1, 1, 1, 1, 1, 2), np.float16)]
    outs = [np.linspace(0, 1, 5, dtype=np.float32), np.arange(4, dtype=np.int64).reshape(1, 1, 2, 2),
            np.zeros(3, np.float64), np.zeros(2, np.uint8), np.zeros(2, np.int16)]
    return S.PteSuite(bytes(range(256)) * 3, "forward",
                      [S.PteCase("mixed", ins, outs, runs=7, atol=[0.25, 0, 0.5, 0, 0]),
                       S.PteCase("b", ins[:1], outs[:1])])


def inspect_lines(s: S.PteSuite) -> list[str]:
    """What `bundle_runner --inspect-suite` prints for a valid suite."""
    def tensors(arrays, atols):
        out = ""
        for a, t in zip(arrays, atols):
            out += f" {a.dtype.name}[{','.join(map(str, a.shape))}]" + (f"~{t:g}" if t > 0 else "")
        return out

    lines = [f"SUITE method={s.method} pte_bytes={len(s.pte)} pte_crc={zlib.crc32(s.pte):08x} "
             f"cases={len(s.cases)}"]
    for c in s.cases:
        lines.append(f"CASE {c.name} runs={c.runs} in{tensors(c.inputs, [0] * len(c.inputs))} "
                     f"out{tensors(c.expected, c.atols())}")
    return lines


def _recrc(data: bytearray) -> bytes:
    struct.pack_into("<I", data, 40, zlib.crc32(bytes(data[48:])))
    return bytes(data)


def suite_mutations(data: bytes) -> list[tuple[str, bytes, str]]:
    """(name, bytes, expected message fragment) of malformed suites; the
    CRC is fixed up so each reaches the check it targets."""
    first_case = 48
    in_tab = struct.unpack_from("<I", data, first_case + 8)[0]
    out_tab = struct.unpack_from("<I", data, first_case + 16)[0]

    def put(off: int, fmt: str, value) -> bytes:
        b = bytearray(data)
        struct.pack_into(fmt, b, off, value)
        return _recrc(b)

    return [
        ("truncated", data[:len(data) // 2], "exceeds the"),
        ("magic", b"XTSB" + data[4:], "bad magic"),
        ("version", put(4, "<H", 2), "version 2"),
        ("crc", data[:-1] + bytes([data[-1] ^ 1]), "does not match the header's"),
        ("case_count", put(32, "<I", 0), "case_count 0"),
        ("pte_misaligned", put(16, "<I", struct.unpack_from("<I", data, 16)[0] + 4), "aligned"),
        ("method_name", put(struct.unpack_from("<I", data, 24)[0], "<B", ord(" ")), "identifier"),
        ("no_outputs", put(first_case + 20, "<I", 0), "0 outputs"),
        ("dtype", put(in_tab, "<I", 15), "dtype code 15"),
        ("rank", put(in_tab + 4, "<I", 9), "rank 9"),
        ("dims_vs_size", put(in_tab + 32, "<I", struct.unpack_from("<I", data, in_tab + 32)[0] + 1),
         "do not match its shape"),
        ("dim_overflow", put(in_tab + 36, "<I", 0xFFFFFFFF), "overflows"),
        ("data_misaligned", put(in_tab + 8, "<I", struct.unpack_from("<I", data, in_tab + 8)[0] + 4),
         "misaligned or outside"),
        ("input_atol", put(in_tab + 16, "<f", 0.5), "tolerance"),
        ("nan_atol", put(out_tab + 16, "<f", float("nan")), "tolerance"),
        ("case_flags", put(first_case + 28, "<I", 2), "unknown flags 0x2"),
        ("refusal_with_outputs", put(first_case + 28, "<I", S.CASE_FLAG_EXPECT_INVALID_ARGUMENT),
         "a case that expects a refusal has"),
        ("runs", put(first_case + 24, "<I", S.MAX_RUNS + 1), "runs"),
    ]


