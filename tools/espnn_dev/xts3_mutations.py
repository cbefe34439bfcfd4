"""Valid XTS3 blobs and byte-level mutations of them, shared by the parser tests.

tests/test_parser.py asserts what the native parser says about each mutated
blob; tests/test_native_m32_asan.py runs the very same corpus through the
runtime built with -m32 and with sanitizers and requires identical verdicts.

Every layout constant (record sizes, field offsets, section ids, limits)
comes from ``executorch_espnn._native``, i.e. from xts3_format.h; nothing
about the byte layout is restated here. A mutation is a ``Mutation``: a
name, the mutated bytes, and ``expect``: a regular expression the parser's
message must match, or ``None`` when the blob must still be accepted.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from executorch_espnn import _native as fmt
from executorch_espnn.xts3_writer import Xts3Writer

# Values a corrupt or hostile blob puts into a 32-bit field.
HUGE_U32 = (0xFFFFFFFF, 0x80000000, 0x7FFFFFFF)
HUGE_U16 = (0xFFFF, 0x8000, 0x7FFF)
HUGE_U8 = (0xFF, 0x80, 0x7F)
_HUGE = {"B": HUGE_U8, "H": HUGE_U16, "I": HUGE_U32}
_SECTION_NAMES = {sid: name for name, (sid, _rec) in fmt.SECTIONS.items()}
# Field widths (struct codes) of the header, tensor and op records. The
# offsets come from the binding; the widths are part of the layout that
# docs/xts3-format.md specifies.
HEADER_WIDTHS = {"magic": "I", "version": "H", "header_size": "H", "blob_size": "I", "flags": "I",
                 "arena_size": "I", "section_count": "I", "section_table": "I", "reserved": "I"}
TENSOR_WIDTHS = {"dtype": "B", "rank": "B", "memory": "B", "flags": "B", "offset": "I", "nbytes": "I",
                 "zero_point": "I", "scale": "I"}
OP_WIDTHS = {"opcode": "H", "num_inputs": "B", "num_outputs": "B", "io_start": "I", "params_start": "I",
             "params_count": "I", "debug_handle": "I"}
SECTION_ENTRY_FIELDS = ("kind", "offset", "size", "count")


@dataclass(frozen=True)
class Mutation:
    name: str
    blob: bytes
    expect: str | None  # regex of the parser's message; None = still accepted


@dataclass(frozen=True)
class ValidBlob:
    name: str
    blob: bytes
    feeds: list  # numpy inputs for Program.run


# ----------------------------------------------------------------- valid blobs
def _chain_blob() -> ValidBlob:
    """QUANTIZE -> REQUANTIZE -> DEQUANTIZE on a float input, REQUANTIZE on an
    int8 input, two outputs, and unused constants of every dtype (so the
    CONSTANTS section and the alignment of typed constants are exercised)."""
    w = Xts3Writer()
    x = w.tensor((1, 3, 4, 5), "FLOAT32")
    z = w.tensor((7,), "INT8", scale=0.5, zero_point=-3)
    q = w.tensor((1, 3, 4, 5), "INT8", scale=0.05, zero_point=4)
    r = w.tensor((1, 3, 4, 5), "INT8", scale=0.1, zero_point=-2)
    y = w.tensor((1, 3, 4, 5), "FLOAT32")
    u = w.tensor((7,), "INT8", scale=0.25, zero_point=10)
    w.constant(np.arange(5, dtype=np.int8), scale=0.5)  # INT8, may sit at any offset
    w.constant(np.array([1, -2, 3], np.int32))  # INT32, unused
    w.constant(np.array([0.5, -1.5], np.float32))  # FLOAT32, unused
    w.op("QUANTIZE", [x], [q], inv_scale_f32=20.0, zero_point=4)
    w.op("REQUANTIZE", [q], [r], input_zero_point=4, output_zero_point=-2, mult=1 << 30, shift=0)
    w.op("DEQUANTIZE", [r], [y], scale_f32=0.1, zero_point=-2, debug_handle=7)
    w.op("REQUANTIZE", [z], [u], input_zero_point=-3, output_zero_point=10, mult=1 << 30, shift=1)
    w.set_inputs([x, z])
    w.set_outputs([y, u])
    rng = np.random.default_rng(1)
    xs = (rng.standard_normal((1, 3, 4, 5)) * 4).astype(np.float32)
    xs.flat[:6] = np.array([0.025, -0.025, 0.075, 1e9, -1e9, np.nan], np.float32)
    zs = rng.integers(-128, 128, 7).astype(np.int8)
    return ValidBlob("chain", w.to_bytes(), [xs, zs])


def _rank5_blob() -> ValidBlob:
    """One REQUANTIZE on a rank-5 tensor with a right shift."""
    w = Xts3Writer()
    a = w.tensor((2, 1, 3, 1, 2), "INT8", scale=0.3, zero_point=0)
    b = w.tensor((2, 1, 3, 1, 2), "INT8", scale=0.7, zero_point=-128)
    w.op("REQUANTIZE", [a], [b], input_zero_point=0, output_zero_point=-128, mult=1518500250, shift=-2)
    w.set_inputs([a])
    w.set_outputs([b])
    return ValidBlob("rank5", w.to_bytes(), [np.arange(-6, 6, dtype=np.int8).reshape(2, 1, 3, 1, 2)])


def _dequant_blob() -> ValidBlob:
    """DEQUANTIZE -> QUANTIZE round trip with an INT32 constant."""
    w = Xts3Writer()
    a = w.tensor((16,), "INT8", scale=0.125, zero_point=5)
    f = w.tensor((16,), "FLOAT32")
    b = w.tensor((16,), "INT8", scale=0.25, zero_point=-1)
    w.constant(np.array([7, 8, 9, 10], np.int32))
    w.op("DEQUANTIZE", [a], [f], scale_f32=0.125, zero_point=5)
    w.op("QUANTIZE", [f], [b], inv_scale_f32=4.0, zero_point=-1)
    w.set_inputs([a])
    w.set_outputs([b, f])
    return ValidBlob("dequant", w.to_bytes(), [np.arange(-100, 124, 14, dtype=np.int8)])


def _matmul_blob() -> ValidBlob:
    """Format version 2: BATCH_MATMUL with rhs [N, K] (a graph input used as ESP-NN's
    filter in place), then with a broadcast constant rhs [K, N] (transposed into the
    scratch), K = 3 (lhs rows copied to an aligned scratch row)."""
    w = Xts3Writer()
    a = w.tensor((2, 4, 3), "INT8", scale=0.05, zero_point=3)
    b = w.tensor((2, 5, 3), "INT8", scale=0.04, zero_point=-7)
    s = w.tensor((2, 4, 5), "INT8", scale=0.02, zero_point=1)
    c = w.constant(np.arange(-10, 10, dtype=np.int8).reshape(1, 5, 4), scale=0.1, zero_point=2)
    y = w.tensor((2, 4, 4), "INT8", scale=0.2, zero_point=-5)
    w.op("BATCH_MATMUL", [a, b], [s], lhs_offset=-3, rhs_offset=7, output_offset=1, mult=1 << 30, shift=-1,
         act_min=-128, act_max=127, rhs_transposed=1)
    w.op("BATCH_MATMUL", [s, c], [y], lhs_offset=-1, rhs_offset=-2, output_offset=-5, mult=1288490189, shift=-3,
         act_min=-120, act_max=120, rhs_transposed=0)
    w.set_inputs([a, b])
    w.set_outputs([y, s])
    rng = np.random.default_rng(4)
    return ValidBlob("matmul", w.to_bytes(), [rng.integers(-128, 128, (2, 4, 3)).astype(np.int8),
                                              rng.integers(-128, 128, (2, 5, 3)).astype(np.int8)])


def _norm_blob() -> ValidBlob:
    """LAYER_NORM (version 2): a layer norm with per-channel gamma and beta and
    an RMS norm with one gamma and no beta, both reading the same input."""
    w = Xts3Writer()
    x = w.tensor((3, 10), "INT8", scale=0.05, zero_point=5)
    ln = w.tensor((3, 10), "INT8", scale=0.02, zero_point=-4)
    rms = w.tensor((3, 10), "INT8", scale=0.03, zero_point=0)
    gamma = [w.constant(np.arange(10, dtype=np.int32) * 100_000_000 - 400_000_000),
             w.constant(np.array([5, 6, 5, 6, 5, 30, 5, 6, -24, 5], np.int32))]
    beta = w.constant(np.arange(-5, 5, dtype=np.int32) * 40_000)
    w.op("LAYER_NORM", [x, *gamma, beta], [ln], rms_norm=0, eps_lo=-7, eps_hi=3, act_min=-128, act_max=127)
    w.op("LAYER_NORM", [x, w.constant(np.array([1 << 30], np.int32)), w.constant(np.array([6], np.int32)), None],
         [rms], rms_norm=1, eps_lo=1 << 20, eps_hi=0, act_min=-100, act_max=100)
    w.set_inputs([x])
    w.set_outputs([ln, rms])
    rng = np.random.default_rng(3)
    xs = rng.integers(-128, 128, (3, 10)).astype(np.int8)
    xs[1] = 9  # a constant row
    return ValidBlob("norm", w.to_bytes(), [xs])


def valid_blobs() -> list[ValidBlob]:
    return [_chain_blob(), _rank5_blob(), _dequant_blob(), _norm_blob(), _matmul_blob()]


def region_blobs() -> list[ValidBlob]:
    """Blobs with fused regions (BAND_LOOP, BANDED tensors, a staging
    tensor): an inverted residual block fused at 2-row bands and an in-place
    depthwise. Their mutations go to the -m32/sanitizer corpus, which checks
    only that every build gives the binding's verdict."""
    from . import band_graphs as bg

    from executorch_espnn.memory import FusedRegion

    out = []
    w, n = bg.inverted_residual(h=6, wd=4, c=4, expand=8)
    feeds = [np.random.default_rng(0).integers(-128, 128, (1, 6, 4, 4), dtype=np.int8)]
    out.append(ValidBlob("region", w.to_bytes(w.plan([FusedRegion(0, n, 2)])), feeds))
    out.append(ValidBlob("region_in_place", w.to_bytes(w.plan([FusedRegion(1, 1, 1, in_place=True)])), feeds))
    return out


# ----------------------------------------------------------------- layout
@dataclass(frozen=True)
class Section:
    name: str
    entry: int  # byte offset of its section table entry
    offset: int
    size: int
    count: int


class Layout:
    """Where things are in a blob (read with the binding's constants)."""

    def __init__(self, blob: bytes):
        hf = fmt.HEADER_FIELDS
        self.blob = blob
        self.table = struct.unpack_from("<I", blob, hf["section_table"])[0]
        n = struct.unpack_from("<I", blob, hf["section_count"])[0]
        self.sections: dict[str, Section] = {}
        for i in range(n):
            e = self.table + i * fmt.SECTION_ENTRY_SIZE
            kind, off, size, count = struct.unpack_from("<4I", blob, e)
            self.sections[_SECTION_NAMES[kind]] = Section(_SECTION_NAMES[kind], e, off, size, count)

    def tensor(self, i: int) -> int:
        """Byte offset of tensor record i."""
        return self.sections["TENSORS"].offset + i * fmt.TENSOR_RECORD_SIZE

    def op(self, i: int) -> int:
        return self.sections["OPS"].offset + i * fmt.OP_RECORD_SIZE

    def tensor_field(self, i: int, field: str) -> int:
        code = TENSOR_WIDTHS[field]
        return struct.unpack_from("<" + code, self.blob, self.tensor(i) + fmt.TENSOR_FIELDS[field])[0]

    def tensor_dtype(self, i: int) -> str:
        code = self.blob[self.tensor(i) + fmt.TENSOR_FIELDS["dtype"]]
        return next(n for n, (c, _s) in fmt.DTYPES.items() if c == code)

    def tensor_memory(self, i: int) -> str:
        code = self.blob[self.tensor(i) + fmt.TENSOR_FIELDS["memory"]]
        return next(n for n, c in fmt.MEMORY_KINDS.items() if c == code)

    def tensor_rank(self, i: int) -> int:
        return self.blob[self.tensor(i) + fmt.TENSOR_FIELDS["rank"]]

    def op_name(self, i: int) -> str:
        code = struct.unpack_from("<H", self.blob, self.op(i) + fmt.OP_FIELDS["opcode"])[0]
        return next(n for n, d in fmt.OPCODES.items() if d["opcode"] == code)

    def op_io(self, i: int) -> tuple[int, int, int]:
        """(io_start, num_inputs, num_outputs) of op i."""
        r = self.op(i)
        return (struct.unpack_from("<I", self.blob, r + fmt.OP_FIELDS["io_start"])[0],
                self.blob[r + fmt.OP_FIELDS["num_inputs"]], self.blob[r + fmt.OP_FIELDS["num_outputs"]])

    def op_params(self, i: int) -> tuple[int, int]:
        r = self.op(i)
        return struct.unpack_from("<II", self.blob, r + fmt.OP_FIELDS["params_start"])


def patch(blob: bytes, offset: int, code: str, value: int) -> bytes:
    """`blob` with the little-endian field of struct code `code` at `offset` set to `value`."""
    b = bytearray(blob)
    struct.pack_into("<" + code, b, offset, value)
    return bytes(b)


# ----------------------------------------------------------------- mutations
def truncations(blob: bytes) -> Iterator[tuple[int, bytes]]:
    """Every proper prefix of the blob: lengths 0 .. len-1."""
    for n in range(len(blob)):
        yield n, blob[:n]


def header_mutations(v: ValidBlob) -> Iterator[Mutation]:
    expect = {"magic": r"header: bad magic", "version": r"header: format version \d+ is not supported",
              "header_size": r"header: header_size", "blob_size": r"header: blob_size",
              "flags": r"header: flags", "arena_size": r"header: arena_size",
              "section_count": r"header: section_count", "section_table": r"header: section table",
              "reserved": r"header: reserved"}
    for field, code in HEADER_WIDTHS.items():
        for value in _HUGE[code]:
            yield Mutation(f"{v.name}.header.{field}={value:#x}",
                           patch(v.blob, fmt.HEADER_FIELDS[field], code, value), expect[field])


def section_mutations(v: ValidBlob) -> Iterator[Mutation]:
    lay = Layout(v.blob)
    blob_size = len(v.blob)
    for s in lay.sections.values():
        rec = fmt.SECTIONS[s.name][1]
        for k, field in enumerate(SECTION_ENTRY_FIELDS):
            at = s.entry + 4 * k
            for value in HUGE_U32:
                yield Mutation(f"{v.name}.section.{s.name}.{field}={value:#x}", patch(v.blob, at, "I", value),
                               r"unknown section kind" if field == "kind" else rf"section {s.name}\b")
        # offset + size wraps 32-bit arithmetic to a small number.
        wrap_off = 0x1_0000_0000 - 16
        yield Mutation(f"{v.name}.section.{s.name}.offset_wraps",
                       patch(patch(v.blob, s.entry + 4, "I", wrap_off), s.entry + 8, "I", 32),
                       rf"section {s.name}: bytes \[{wrap_off}, \+32\) exceed")
        wrap_size = 0x1_0000_0000 - s.offset + 4
        yield Mutation(f"{v.name}.section.{s.name}.size_wraps", patch(v.blob, s.entry + 8, "I", wrap_size),
                       rf"section {s.name}: bytes \[{s.offset}, \+{wrap_size}\) exceed the {blob_size}-byte blob")
        if rec:
            # count * record_size wraps to exactly the section's size.
            step = 0x1_0000_0000 // np.gcd(rec, 0x1_0000_0000)
            wrapped = s.count + step
            assert (wrapped * rec) & 0xFFFFFFFF == s.size
            yield Mutation(f"{v.name}.section.{s.name}.count_wraps", patch(v.blob, s.entry + 12, "I", wrapped),
                           rf"section {s.name}: count {wrapped} does not match {s.size} bytes")


def tensor_mutations(v: ValidBlob) -> Iterator[Mutation]:
    lay = Layout(v.blob)
    for i in range(lay.sections["TENSORS"].count):
        rec = lay.tensor(i)
        dtype, memory, rank = lay.tensor_dtype(i), lay.tensor_memory(i), lay.tensor_rank(i)
        for field, code in TENSOR_WIDTHS.items():
            for value in _HUGE[code]:
                expect: str | None = {
                    "dtype": rf"tensor {i}: unknown dtype {value}",
                    "rank": rf"tensor {i}: rank {value} is not in 1\.\.",
                    "memory": rf"tensor {i}: unknown memory kind {value}",
                    "flags": (rf"tensor {i}: (flags 0x[0-9a-f]+ not defined in format version \d+|"
                              r"a BANDED tensor must be|BANDED nbytes)"),
                    "offset": (rf"tensor {i}: arena (offset {value} is not 16-byte aligned|bytes \[{value},)"
                               if memory == "ARENA" else
                               rf"tensor {i}: ({dtype} constant at offset {value} is not \d-byte aligned"
                               rf"|constant bytes \[{value},)"),
                    "nbytes": rf"tensor {i}: nbytes {value} != ",
                    "zero_point": rf"tensor {i}: zero_point {value - (1 << 32) if value >> 31 else value} "
                                  r"is not in -128\.\.127",
                    "scale": rf"tensor {i}: scale must be finite and >= 0",
                }[field]
                if field == "zero_point" and (dtype != "INT8" or value == 0xFFFFFFFF):
                    expect = None  # -1 is a valid int8 zero point; other dtypes' are not range-checked
                if field == "scale" and value == 0x80000000:
                    expect = None  # -0.0 == 0 (unquantized tensors carry scale 0)
                yield Mutation(f"{v.name}.tensor{i}.{field}={value:#x}",
                               patch(v.blob, rec + fmt.TENSOR_FIELDS[field], code, value), expect)
        for d in range(fmt.LIMITS["max_rank"]):
            for value in HUGE_U32:
                expect = (rf"tensor {i}: dims\[{d}\] = {value} is not in 1\.\.{fmt.LIMITS['max_dim']}"
                          if d < rank else rf"tensor {i}: dims\[{d}\] = {value} beyond rank {rank} must be 0")
                yield Mutation(f"{v.name}.tensor{i}.dims[{d}]={value:#x}",
                               patch(v.blob, rec + fmt.TENSOR_FIELDS["dims"] + 4 * d, "I", value), expect)
        # Arena / constant offset + nbytes wrapping to a small number.
        nbytes = lay.tensor_field(i, "nbytes")
        align = fmt.ARENA_ALIGNMENT if memory == "ARENA" else fmt.DTYPES[dtype][1]
        wrap = (0x1_0000_0000 - max(nbytes // 2, 1)) // align * align
        yield Mutation(f"{v.name}.tensor{i}.offset_wraps", patch(v.blob, rec + fmt.TENSOR_FIELDS["offset"], "I", wrap),
                       rf"tensor {i}: (arena|constant) bytes \[{wrap}, \+{nbytes}\) exceed")


def op_mutations(v: ValidBlob) -> Iterator[Mutation]:
    lay = Layout(v.blob)
    io_entries = lay.sections["OP_IO"].count
    n_params = lay.sections["PARAMS"].count
    for i in range(lay.sections["OPS"].count):
        rec, name = lay.op(i), lay.op_name(i)
        prefix = rf"op {i} \({name}\): "
        for field, code in OP_WIDTHS.items():
            for value in _HUGE[code]:
                expect = {
                    "opcode": rf"op {i}: unknown opcode {value} for format version",
                    "num_inputs": prefix + rf"{value} inputs / \d+ outputs, expected",
                    "num_outputs": prefix + rf"\d+ inputs / {value} outputs, expected",
                    "io_start": prefix + rf"io entries \[{value}, \+\d+\) exceed OP_IO's {io_entries} entries",
                    "params_start": prefix + rf"params \[{value}, \+\d+\) exceed PARAMS' {n_params} words",
                    "params_count": prefix + rf"{value} parameter words, expected",
                    "debug_handle": None,  # opaque to the runtime
                }[field]
                yield Mutation(f"{v.name}.op{i}.{field}={value:#x}",
                               patch(v.blob, rec + fmt.OP_FIELDS[field], code, value), expect)
        io, nin, nout = lay.op_io(i)
        for k in range(nin + nout):
            at = lay.sections["OP_IO"].offset + 2 * (io + k)
            slot = f"input {k}" if k < nin else f"output {k - nin}"
            optional = k < nin and fmt.OPCODES[name]["optional_inputs"] >> k & 1
            for value in HUGE_U16:
                if value == fmt.NO_TENSOR and optional:
                    expect = None  # an optional input left out (the blobs leave it out validly)
                elif value == fmt.NO_TENSOR and k < nin:
                    expect = prefix + rf"{slot} is required"
                else:
                    expect = prefix + rf"{slot} refers to tensor {value} of "
                yield Mutation(f"{v.name}.op{i}.io[{k}]={value:#x}", patch(v.blob, at, "H", value), expect)
        # io_start + n and params_start + count wrapping 32-bit arithmetic.
        for value in sorted({0xFFFFFFFF, 0xFFFFFFFE, 0x1_0000_0000 - (nin + nout) + 1}):
            yield Mutation(f"{v.name}.op{i}.io_start_wraps={value:#x}",
                           patch(v.blob, rec + fmt.OP_FIELDS["io_start"], "I", value & 0xFFFFFFFF),
                           prefix + r"io entries \[")
        pstart, pcount = lay.op_params(i)
        if pcount:
            value = 0x1_0000_0000 - pcount + 1
            yield Mutation(f"{v.name}.op{i}.params_start_wraps", patch(v.blob, rec + fmt.OP_FIELDS["params_start"], "I", value),
                           prefix + rf"params \[{value}, \+{pcount}\) exceed")
            value = pstart + 0x40000000  # *4 would wrap back to the right byte offset
            yield Mutation(f"{v.name}.op{i}.params_start_x4_wraps",
                           patch(v.blob, rec + fmt.OP_FIELDS["params_start"], "I", value),
                           prefix + rf"params \[{value}, \+{pcount}\) exceed")


def graph_io_mutations(v: ValidBlob) -> Iterator[Mutation]:
    lay = Layout(v.blob)
    for sec, what in (("INPUTS", "graph input"), ("OUTPUTS", "graph output")):
        s = lay.sections[sec]
        for j in range(s.count):
            for value in HUGE_U16:
                yield Mutation(f"{v.name}.{sec.lower()}[{j}]={value:#x}", patch(v.blob, s.offset + 2 * j, "H", value),
                               rf"{what} {j} refers to tensor {value} of ")


def param_mutations(v: ValidBlob) -> Iterator[Mutation]:
    """Every PARAMS word set to huge values. Whether these are accepted is the
    op's business (its validate()): `expect` is the op prefix that a
    rejection must carry, and acceptance is fine too."""
    lay = Layout(v.blob)
    s = lay.sections["PARAMS"]
    owner = {}
    for i in range(lay.sections["OPS"].count):
        start, count = lay.op_params(i)
        for w in range(start, start + count):
            owner[w] = i
    for w in range(s.count):
        for value in HUGE_U32:
            i = owner[w]
            yield Mutation(f"{v.name}.params[{w}]={value:#x}", patch(v.blob, s.offset + 4 * w, "I", value),
                           rf"^op {i} \({lay.op_name(i)}\): ")


def lifetimes(summary: dict) -> dict[int, tuple[int, int]]:
    """[first, last] step of every arena tensor that holds a value, as the
    runtime's arena-plan rule defines it (SECURITY.md, item 7): graph inputs
    are written at step -1, an op's outputs at its step; `last` is the last
    step that reads the tensor, len(ops) for a graph output. Written here
    from the format's definition, independently of parser.cpp."""
    n = len(summary["ops"])
    arena = {t["index"] for t in summary["tensors"] if t["memory"] == "ARENA"}
    life = {t: (-1, -1) for t in summary["inputs"]}
    for step, op in enumerate(summary["ops"]):
        for t in op["outputs"]:
            life[t] = (step, step)
        for t in op["inputs"]:
            if t in arena:
                life[t] = (life[t][0], max(life[t][1], step))
    for t in summary["outputs"]:
        life[t] = (life[t][0], n)
    return life


def in_place_pairs(summary: dict) -> set[tuple[int, int]]:
    """(input, output) pairs of IN_PLACE ops (the format's aliasing table):
    the output may coincide exactly with that input if the input's lifetime
    ends at the op."""
    return {(t, op["outputs"][0]) for op in summary["ops"] if fmt.OPCODES[op["op"]]["aliasing"] == "IN_PLACE"
            for t in op["inputs"] if t is not None}


def plan_conflicts(summary: dict, offsets: dict[int, int]) -> list[tuple[int, int]]:
    """Pairs of tensors whose lifetimes intersect and whose arena bytes
    overlap (for graphs without RESHAPE, whose view alias is not modelled
    here), except an IN_PLACE op's output on exactly the bytes of an input
    whose lifetime ends at that op."""
    assert all(fmt.OPCODES[op["op"]]["aliasing"] != "VIEW" for op in summary["ops"])
    life = lifetimes(summary)
    nbytes = {t["index"]: t["nbytes"] for t in summary["tensors"]}
    in_place = in_place_pairs(summary)
    ts = sorted(life)
    out = []
    for i, a in enumerate(ts):
        for b in ts[i + 1:]:
            (fa, la), (fb, lb) = life[a], life[b]
            if fa <= lb and fb <= la and offsets[a] < offsets[b] + nbytes[b] and offsets[b] < offsets[a] + nbytes[a]:
                exact = offsets[a] == offsets[b] and nbytes[a] == nbytes[b]
                if exact and ((a, b) in in_place and la == fb or (b, a) in in_place and lb == fa):
                    continue
                out.append((a, b))
    return out


def arena_plan_mutations(v: ValidBlob) -> Iterator[Mutation]:
    """Every arena tensor moved onto every other's offset. Rejected, naming
    the moved tensor, exactly when that makes two tensors with intersecting
    lifetimes share bytes (or leaves the arena); accepted otherwise."""
    summary = fmt.parse(v.blob)
    lay = Layout(v.blob)
    offsets = {t["index"]: t["offset"] for t in summary["tensors"] if t["memory"] == "ARENA"}
    assert not plan_conflicts(summary, offsets), f"{v.name}: the writer's own plan conflicts"
    live = sorted(lifetimes(summary))
    for t in live:
        nbytes = summary["tensors"][t]["nbytes"]
        for u in live:
            if u == t or offsets[u] == offsets[t]:
                continue
            moved = {**offsets, t: offsets[u]}
            blob = patch(v.blob, lay.tensor(t) + fmt.TENSOR_FIELDS["offset"], "I", offsets[u])
            if offsets[u] + nbytes > summary["arena_bytes"]:
                expect = rf"^tensor {t}: arena bytes \[{offsets[u]}, \+{nbytes}\) exceed arena_size"
            elif plan_conflicts(summary, moved):
                expect = rf"^arena plan: .*\btensor {t}\b"
            else:
                expect = None
            yield Mutation(f"{v.name}.arena.tensor{t}_onto_tensor{u}", blob, expect)


def huge_field_mutations(v: ValidBlob) -> Iterator[Mutation]:
    """Every header, section table, tensor record, op record, OP_IO and graph
    I/O field set to huge and wrapping values."""
    yield from header_mutations(v)
    yield from section_mutations(v)
    yield from tensor_mutations(v)
    yield from op_mutations(v)
    yield from graph_io_mutations(v)


def corpus() -> Iterator[tuple[str, bytes]]:
    """Every blob the -m32/sanitizer test feeds the native tool: the valid
    blobs, all their truncations, all huge-field, PARAMS and arena-plan
    mutations; the fused-region blobs, their truncations, huge-field and
    PARAMS mutations."""
    valid = valid_blobs()
    for v in valid + region_blobs():
        yield v.name, v.blob
        for n, b in truncations(v.blob):
            yield f"{v.name}.truncated_{n}", b
        for m in huge_field_mutations(v):
            yield m.name, m.blob
        for m in param_mutations(v):
            yield m.name, m.blob
    for v in valid:
        for m in arena_plan_mutations(v):
            yield m.name, m.blob


def matches(expect: str, message: str) -> bool:
    return re.search(expect, message) is not None
