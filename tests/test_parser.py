"""The XTS3 parser's generic checks (docs/xts3-format.md, "Validation rules").

Every blob goes through executorch_espnn._native (Program / parse), i.e.
through components/espnn_runtime/src/parser.cpp; a rejection is a ValueError
carrying the parser's message, and every test asserts on that message.
Op-specific checks (each op family's validate()) are tested in tests/ops/.
The same corpus runs through the -m32 and sanitizer builds in
test_native_m32_asan.py.
"""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from espnn_dev import xts3_mutations as xm
from executorch_espnn import _native as fmt
from executorch_espnn.xts3_writer import Xts3Writer

VALID = {v.name: v for v in xm.valid_blobs()}
LIMITS = fmt.LIMITS


def rejected(blob: bytes) -> str:
    """The parser's message for an invalid blob (Program and parse agree)."""
    with pytest.raises(ValueError) as program_err:
        fmt.Program(blob)
    with pytest.raises(ValueError) as parse_err:
        fmt.parse(blob)
    assert str(program_err.value) == str(parse_err.value)
    msg = str(program_err.value)
    assert msg, "a rejection must say why"
    return msg


def assert_rejected(blob: bytes, pattern: str) -> str:
    msg = rejected(blob)
    assert re.search(pattern, msg), f"message {msg!r} does not match {pattern!r}"
    return msg


def chain() -> xm.ValidBlob:
    return VALID["chain"]


def tensor_index(lay: xm.Layout, dtype: str, memory: str) -> int:
    return next(i for i in range(lay.sections["TENSORS"].count)
                if lay.tensor_dtype(i) == dtype and lay.tensor_memory(i) == memory)


def requant(w: Xts3Writer, a: int, b: int, **kw) -> int:
    return w.op("REQUANTIZE", [a], [b], input_zero_point=0, output_zero_point=0, mult=1 << 30, shift=1, **kw)


# ---------------------------------------------------------------- valid blobs
@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_blobs_parse_and_run(name):
    v = VALID[name]
    s = fmt.parse(v.blob)
    assert fmt.MIN_FORMAT_VERSION <= s["version"] <= fmt.FORMAT_VERSION and s["size"] == len(v.blob)
    assert s["arena_bytes"] % fmt.ARENA_ALIGNMENT == 0
    for t in s["tensors"]:
        if t["memory"] == "ARENA":
            assert t["offset"] % fmt.ARENA_ALIGNMENT == 0
    outs = fmt.Program(v.blob).run(v.feeds)
    assert len(outs) == len(s["outputs"])


def test_chain_blob_computes_the_documented_formulas():
    """The valid corpus is not vacuous: its outputs follow the formulas in
    xts3_format.h (REQUANTIZE with mult 2^30 = x0.5, shift 1 = x2)."""
    v = chain()
    x, z = v.feeds
    y, u = fmt.Program(v.blob).run(v.feeds)
    q = np.clip(np.nan_to_num(np.rint(x * np.float32(20.0)), nan=0.0, posinf=1000, neginf=-1000) + 4,
                -128, 127).astype(np.int32)
    # MBQM(d, 2^30, 0) = SRDHM(d, 2^30) = d * 0.5 with ties rounded up
    # (gemmlowp's nudge is 2^30 for products >= 0 and 1 - 2^30 below 0).
    r = np.clip((q - 4 + 1) // 2 - 2, -128, 127)
    np.testing.assert_array_equal(y, ((r + 2).astype(np.float32) * np.float32(0.1)))
    np.testing.assert_array_equal(u, np.clip(z.astype(np.int32) + 3 + 10, -128, 127).astype(np.int8))


def test_trailing_bytes_after_blob_size_are_ignored():
    v = chain()
    assert fmt.parse(v.blob + bytes(100))["size"] == len(v.blob)


# ---------------------------------------------------------------- truncation
@pytest.mark.parametrize("name", sorted(VALID))
def test_every_truncation_is_rejected(name):
    blob = VALID[name].blob
    for n, prefix in xm.truncations(blob):
        msg = rejected(prefix)
        if n < fmt.HEADER_SIZE:
            assert msg == f"blob is {n} bytes, smaller than the {fmt.HEADER_SIZE}-byte header"
        else:
            assert msg == f"header: blob_size {len(blob)} exceeds the {n} bytes given (truncated blob)"


# ---------------------------------------------------------------- huge fields
HUGE = [m for v in VALID.values() for m in xm.huge_field_mutations(v)]


@pytest.mark.parametrize("m", HUGE, ids=[m.name for m in HUGE])
def test_huge_field_values(m: xm.Mutation):
    """Every header, section table, tensor record, op record, OP_IO and graph
    I/O field set to 0xFFFFFFFF / 0x80000000 / 0x7FFFFFFF (0xFFFF.. for
    narrower fields) and to values that wrap 32-bit offset + size or
    count * record_size arithmetic to a small number: rejected with a message
    naming the field. The only fields accepted with such values are the
    opaque debug_handle, the zero point of a non-INT8 tensor (or -1), and a
    scale of -0.0 (0x80000000), which equals 0."""
    if m.expect is None:
        fmt.parse(m.blob)
    else:
        assert_rejected(m.blob, m.expect)


def test_huge_values_cover_every_field():
    names = {m.name.split(".", 1)[1].split("=")[0] for m in HUGE}
    for f in fmt.HEADER_FIELDS:
        assert f"header.{f}" in names
    for s in fmt.SECTIONS:
        for f in xm.SECTION_ENTRY_FIELDS:
            assert f"section.{s}.{f}" in names
    assert set(fmt.TENSOR_FIELDS) == set(xm.TENSOR_WIDTHS) | {"dims"}
    assert set(fmt.OP_FIELDS) == set(xm.OP_WIDTHS)
    for f in xm.TENSOR_WIDTHS:
        assert f"tensor0.{f}" in names
    for d in range(LIMITS["max_rank"]):
        assert f"tensor0.dims[{d}]" in names
    for f in xm.OP_WIDTHS:
        assert f"op0.{f}" in names


PARAMS = [m for v in VALID.values() for m in xm.param_mutations(v)]


@pytest.mark.parametrize("m", PARAMS, ids=[m.name for m in PARAMS])
def test_huge_parameter_words_are_the_ops_business(m: xm.Mutation):
    """Parameter ranges are checked by each op's validate(); a rejection
    carries the "op N (NAME): " prefix the parser adds."""
    try:
        fmt.parse(m.blob)
    except ValueError as e:
        assert re.search(m.expect, str(e)), str(e)


# ---------------------------------------------------------------- header
def test_wrong_magic():
    blob = xm.patch(chain().blob, 0, "I", 0x34535458)  # 'XTS4'
    assert_rejected(blob, r"^header: bad magic 0x34535458 \(expected 'XTS3'\)$")
    assert_rejected(b"\x00" * 64, r"bad magic 0x00000000")


@pytest.mark.parametrize("version", [fmt.FORMAT_VERSION + 1, fmt.FORMAT_VERSION + 100, 0])
def test_other_format_versions_are_refused_as_unsupported(version):
    msg = assert_rejected(xm.patch(chain().blob, fmt.HEADER_FIELDS["version"], "H", version),
                          rf"^header: format version {version} is not supported "
                          rf"\(this runtime reads {fmt.MIN_FORMAT_VERSION}\.\.{fmt.FORMAT_VERSION}\)$")
    assert "not supported" in msg


def test_newer_version_is_refused_before_its_layout_is_read():
    """A future version may change everything after the version field: the
    runtime must say "version not supported", not "bad header"."""
    blob = bytearray(xm.patch(chain().blob, fmt.HEADER_FIELDS["version"], "H", fmt.FORMAT_VERSION + 1))
    blob[6:] = b"\xee" * (len(blob) - 6)
    assert_rejected(bytes(blob), r"format version \d+ is not supported")


@pytest.mark.parametrize("field, value, pattern", [
    ("header_size", 36, r"^header: header_size is 36, expected 32$"),
    ("blob_size", 31, r"^header: blob_size 31 is out of range$"),
    ("flags", 1, r"^header: flags 0x1 are not defined in version 1$"),
    ("reserved", 1, r"^header: reserved field is not 0$"),
    ("arena_size", 8, r"^header: arena_size 8 must be a multiple of 16 and at most 2147483647$"),
    ("section_count", 6, r"^header: section_count is 6, version 1 has exactly 7 sections$"),
    ("section_count", 8, r"section_count is 8"),
    ("section_table", 0, r"^header: section table at offset 0 \(7 entries\) does not fit"),
    ("section_table", 34, r"^header: section table at offset 34 "),
])
def test_header_rules(field, value, pattern):
    code = xm.HEADER_WIDTHS[field]
    assert_rejected(xm.patch(chain().blob, fmt.HEADER_FIELDS[field], code, value), pattern)


def test_section_table_must_fit_the_blob():
    blob = chain().blob
    at = len(blob) - fmt.SECTION_ENTRY_SIZE * 7 + 4
    assert_rejected(xm.patch(blob, fmt.HEADER_FIELDS["section_table"], "I", at // 4 * 4),
                    r"^header: section table at offset \d+ \(7 entries\) does not fit the \d+-byte blob$")


# ---------------------------------------------------------------- sections
def test_duplicate_section():
    lay = xm.Layout(chain().blob)
    blob = xm.patch(chain().blob, lay.sections["OUTPUTS"].entry, "I", fmt.SECTIONS["INPUTS"][0])
    assert_rejected(blob, r"^section INPUTS appears twice$")


@pytest.mark.parametrize("kind", [0, len(fmt.SECTIONS) + 1])
def test_unknown_section_kind(kind):
    lay = xm.Layout(chain().blob)
    blob = xm.patch(chain().blob, lay.sections["PARAMS"].entry, "I", kind)
    assert_rejected(blob, rf"^section table entry 3: unknown section kind {kind}$")


def test_overlapping_sections():
    lay = xm.Layout(chain().blob)
    ins, outs = lay.sections["INPUTS"], lay.sections["OUTPUTS"]
    assert ins.size == outs.size
    blob = xm.patch(chain().blob, outs.entry + 4, "I", ins.offset)
    assert_rejected(blob, r"^sections INPUTS and OUTPUTS overlap$")
    # Partial overlap: OPS starting inside TENSORS.
    t, o = lay.sections["TENSORS"], lay.sections["OPS"]
    blob = xm.patch(chain().blob, o.entry + 4, "I", t.offset + t.size - 8)
    assert_rejected(blob, r"^sections TENSORS and OPS overlap$")


def test_section_overlapping_header_or_table():
    lay = xm.Layout(chain().blob)
    for off in (0, fmt.HEADER_SIZE, lay.table + 7 * fmt.SECTION_ENTRY_SIZE - 4):
        blob = xm.patch(chain().blob, lay.sections["OPS"].entry + 4, "I", off)
        assert_rejected(blob, rf"^section OPS: offset {off} overlaps the header or section table$")


def test_empty_section_may_point_anywhere_inside_the_blob():
    v = VALID["rank5"]  # no constants
    lay = xm.Layout(v.blob)
    assert lay.sections["CONSTANTS"].size == 0
    for off in (0, len(v.blob) // 16 * 16):
        fmt.parse(xm.patch(v.blob, lay.sections["CONSTANTS"].entry + 4, "I", off))
    assert_rejected(xm.patch(v.blob, lay.sections["CONSTANTS"].entry + 4, "I", len(v.blob) // 16 * 16 + 16),
                    r"^section CONSTANTS: bytes \[\d+, \+0\) exceed")


@pytest.mark.parametrize("delta", [4, 8, 12])
def test_constants_section_must_be_16_byte_aligned(delta):
    lay = xm.Layout(chain().blob)
    c = lay.sections["CONSTANTS"]
    assert c.offset % fmt.CONSTANT_ALIGNMENT == 0
    assert_rejected(xm.patch(chain().blob, c.entry + 4, "I", c.offset + delta),
                    rf"^section CONSTANTS: offset {c.offset + delta} is not 16-byte aligned$")


@pytest.mark.parametrize("name", ["TENSORS", "OPS", "OP_IO", "PARAMS", "INPUTS", "OUTPUTS"])
def test_other_sections_must_be_4_byte_aligned(name):
    s = xm.Layout(chain().blob).sections[name]
    assert_rejected(xm.patch(chain().blob, s.entry + 4, "I", s.offset + 2),
                    rf"^section {name}: offset {s.offset + 2} is not 4-byte aligned$")


def test_section_size_must_be_whole_records():
    s = xm.Layout(chain().blob).sections["TENSORS"]
    assert_rejected(xm.patch(chain().blob, s.entry + 8, "I", s.size - 4),
                    rf"^section TENSORS: count {s.count} does not match {s.size - 4} bytes of 40-byte records$")


@pytest.mark.parametrize("name, rec", [(n, r) for n, (_, r) in fmt.SECTIONS.items() if r])
def test_section_count_wrapping_32_bit_multiplication(name, rec):
    """count * record_size == size modulo 2^32 must not pass (e.g.
    0x40000001 4-byte words "are" 4 bytes)."""
    s = xm.Layout(chain().blob).sections[name]
    step = (1 << 32) // int(np.gcd(rec, 1 << 32))
    bad = s.count + step
    assert (bad * rec) % (1 << 32) == s.size
    assert_rejected(xm.patch(chain().blob, s.entry + 12, "I", bad),
                    rf"^section {name}: count {bad} does not match {s.size} bytes")
    # The literal case: one record's worth of bytes, count 1 + 2^32 / gcd
    # (0x40000001 for 4-byte words, 0x80000001 for u16 entries).
    one = xm.patch(xm.patch(chain().blob, s.entry + 8, "I", rec), s.entry + 12, "I", 1 + step)
    assert_rejected(one, rf"^section {name}: count {1 + step} does not match {rec} bytes of {rec}-byte records$")


def test_constants_section_count_must_be_0():
    s = xm.Layout(chain().blob).sections["CONSTANTS"]
    assert_rejected(xm.patch(chain().blob, s.entry + 12, "I", 1), r"^section CONSTANTS: count must be 0, got 1$")


# ---------------------------------------------------------------- tensor records
def patch_tensor(blob: bytes, i: int, field: str, value: int, code: str | None = None) -> bytes:
    lay = xm.Layout(blob)
    return xm.patch(blob, lay.tensor(i) + fmt.TENSOR_FIELDS[field], code or xm.TENSOR_WIDTHS[field], value)


def patch_dims(blob: bytes, i: int, dims: list[int], nbytes: int | None = None) -> bytes:
    lay = xm.Layout(blob)
    b = xm.patch(blob, lay.tensor(i) + fmt.TENSOR_FIELDS["rank"], "B", len(dims))
    full = list(dims) + [0] * (LIMITS["max_rank"] - len(dims))
    b = bytearray(b)
    struct.pack_into("<5I", b, lay.tensor(i) + fmt.TENSOR_FIELDS["dims"], *full[:5])
    if nbytes is not None:
        struct.pack_into("<I", b, lay.tensor(i) + fmt.TENSOR_FIELDS["nbytes"], nbytes)
    return bytes(b)


@pytest.mark.parametrize("delta", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("dtype", ["INT32", "FLOAT32"])
def test_typed_constant_must_be_naturally_aligned(dtype, delta):
    """The INT32 / FLOAT32 constants of the chain blob are unused by any op:
    the parser checks every constant tensor, used or not."""
    lay = xm.Layout(chain().blob)
    i = tensor_index(lay, dtype, "CONSTANT")
    off = lay.tensor_field(i, "offset") + delta
    assert_rejected(patch_tensor(chain().blob, i, "offset", off),
                    rf"^tensor {i}: {dtype} constant at offset {off} is not 4-byte aligned$")


def test_typed_constant_needs_only_natural_alignment():
    """4 bytes past its 16-aligned slot an INT32 constant is still aligned
    (the section is 16-aligned in the blob, the blob in memory)."""
    lay = xm.Layout(chain().blob)
    i = tensor_index(lay, "INT32", "CONSTANT")
    fmt.parse(patch_tensor(chain().blob, i, "offset", lay.tensor_field(i, "offset") + 4))


def test_int8_constant_may_sit_at_any_offset():
    lay = xm.Layout(chain().blob)
    i = tensor_index(lay, "INT8", "CONSTANT")
    fmt.parse(patch_tensor(chain().blob, i, "offset", lay.tensor_field(i, "offset") + 1))


def test_constant_must_lie_inside_the_constants_section():
    lay = xm.Layout(chain().blob)
    i = tensor_index(lay, "INT32", "CONSTANT")
    size = lay.sections["CONSTANTS"].size
    off = size // 4 * 4 - 8  # 12-byte tensor ends 4 bytes past the section
    assert_rejected(patch_tensor(chain().blob, i, "offset", off),
                    rf"^tensor {i}: constant bytes \[{off}, \+12\) exceed the {size}-byte CONSTANTS section$")


@pytest.mark.parametrize("delta", [1, 4, 8, 15])
def test_arena_offset_must_be_16_byte_aligned(delta):
    blob = chain().blob
    off = xm.Layout(blob).tensor_field(0, "offset") + delta
    assert_rejected(patch_tensor(blob, 0, "offset", off), rf"^tensor 0: arena offset {off} is not 16-byte aligned$")


def test_arena_tensor_must_fit_the_arena():
    blob = chain().blob
    arena = struct.unpack_from("<I", blob, fmt.HEADER_FIELDS["arena_size"])[0]
    assert_rejected(patch_tensor(blob, 0, "offset", arena),
                    rf"^tensor 0: arena bytes \[{arena}, \+240\) exceed arena_size {arena}$")
    # Shrinking the arena below the planned tensors.
    assert_rejected(xm.patch(blob, fmt.HEADER_FIELDS["arena_size"], "I", 16), r"exceed arena_size 16$")


@pytest.mark.parametrize("dims, pattern", [
    ([0, 3, 4, 5], r"dims\[0\] = 0 is not in 1\.\.16777216"),
    ([1, 3, 0, 5], r"dims\[2\] = 0 is not in 1\.\.16777216"),
    ([1, LIMITS["max_dim"] + 1, 1, 1], r"dims\[1\] = 16777217 is not in 1\.\.16777216"),
    ([0xFFFFFFFF, 3, 4, 5], r"dims\[0\] = 4294967295 is not in 1\.\.16777216 \(int32 view -1\)"),
    ([1, 3, 4, 0x80000000], r"dims\[3\] = 2147483648 is not in .* \(int32 view -2147483648\)"),
])
def test_tensor_dims_out_of_range(dims, pattern):
    assert_rejected(patch_dims(chain().blob, 0, dims), rf"^tensor 0: {pattern}( \(int32 view -?\d+\))?$")


def test_max_dim_itself_is_accepted():
    w = Xts3Writer()
    a = w.tensor((LIMITS["max_dim"],), "INT8")
    b = w.tensor((LIMITS["max_dim"],), "INT8")
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([b])
    s = fmt.parse(w.to_bytes())
    assert s["tensors"][0]["shape"] == (LIMITS["max_dim"],)


@pytest.mark.parametrize("rank", [0, LIMITS["max_rank"] + 1, 255])
def test_rank_out_of_range(rank):
    assert_rejected(patch_tensor(chain().blob, 0, "rank", rank), rf"^tensor 0: rank {rank} is not in 1\.\.5$")


def test_dims_beyond_rank_must_be_0():
    blob = chain().blob
    lay = xm.Layout(blob)
    b = xm.patch(blob, lay.tensor(1) + fmt.TENSOR_FIELDS["dims"] + 4 * 3, "I", 1)
    assert_rejected(b, r"^tensor 1: dims\[3\] = 1 beyond rank 1 must be 0$")


@pytest.mark.parametrize("delta", [1, -1, 240])
def test_nbytes_must_equal_elements_times_element_size(delta):
    blob = chain().blob  # tensor 0: FLOAT32 [1,3,4,5] = 240 bytes
    assert_rejected(patch_tensor(blob, 0, "nbytes", 240 + delta),
                    rf"^tensor 0: nbytes {240 + delta} != 60 elements x 4 bytes$")


def test_element_count_wrapping_32_bits():
    # 65536 * 65536 = 2^32 elements: 0 in uint32 arithmetic.
    assert_rejected(patch_dims(chain().blob, 0, [65536, 65536], nbytes=0),
                    r"^tensor 0: more than 2147483647 elements$")
    # 13325 * 80581 = 2^30 + 1 elements of 4 bytes = 2^32 + 4 bytes: 4 in uint32.
    assert 13325 * 80581 * 4 == (1 << 32) + 4
    assert_rejected(patch_dims(chain().blob, 0, [13325, 80581], nbytes=4),
                    r"^tensor 0: nbytes 4 != 1073741825 elements x 4 bytes$")


def test_tensor_bytes_limit():
    # 2^29 float32 elements = 2^31 bytes: one more than max_tensor_bytes.
    assert_rejected(patch_dims(chain().blob, 0, [1 << 24, 32], nbytes=1 << 31),
                    r"^tensor 0: nbytes 2147483648 exceed the limit of 2147483647$")


@pytest.mark.parametrize("zp", [128, -129, 1000])
def test_int8_zero_point_range(zp):
    lay = xm.Layout(chain().blob)
    i = tensor_index(lay, "INT8", "ARENA")
    assert_rejected(patch_tensor(chain().blob, i, "zero_point", zp & 0xFFFFFFFF),
                    rf"^tensor {i}: zero_point {zp} is not in -128\.\.127$")


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -1.0, -1e-30])
def test_scale_must_be_finite_and_non_negative(scale):
    bits = struct.unpack("<I", struct.pack("<f", scale))[0]
    assert_rejected(patch_tensor(chain().blob, 2, "scale", bits), r"^tensor 2: scale must be finite and >= 0$")


@pytest.mark.parametrize("field, value, pattern", [
    ("dtype", 0, r"unknown dtype 0"),
    ("dtype", len(fmt.DTYPES) + 1, r"unknown dtype 4"),
    ("memory", 0, r"unknown memory kind 0"),
    ("memory", 3, r"unknown memory kind 3"),
    ("flags", 1, r"flags 0x1 not defined in format version 1"),
    ("flags", 0x80, r"flags 0x80 not defined in format version 1"),
])
def test_tensor_enums(field, value, pattern):
    assert_rejected(patch_tensor(chain().blob, 0, field, value), rf"^tensor 0: {pattern}$")


# ---------------------------------------------------------------- op records
def patch_op(blob: bytes, i: int, field: str, value: int) -> bytes:
    lay = xm.Layout(blob)
    return xm.patch(blob, lay.op(i) + fmt.OP_FIELDS[field], xm.OP_WIDTHS[field], value)


@pytest.mark.parametrize("opcode", [0, 999, max(d["opcode"] for d in fmt.OPCODES.values()) + 1, 0xFFFF])
def test_unknown_opcode(opcode):
    assert_rejected(patch_op(chain().blob, 1, "opcode", opcode),
                    rf"^op 1: unknown opcode {opcode} for format version {fmt.MIN_FORMAT_VERSION}$")


def test_every_opcode_is_known_in_the_current_version():
    """Each op's first version is <= FORMAT_VERSION, so no opcode is refused
    as "unknown for the blob's version" with the current version; a blob of
    an older version would be checked against min_version per opcode."""
    for name, d in fmt.OPCODES.items():
        assert fmt.MIN_FORMAT_VERSION <= d["min_version"] <= fmt.FORMAT_VERSION, name


@pytest.mark.parametrize("field, value, pattern", [
    ("num_inputs", 0, r"0 inputs / 1 outputs, expected 1\.\.1 / 1\.\.1"),
    ("num_inputs", 2, r"2 inputs / 1 outputs, expected 1\.\.1 / 1\.\.1"),
    ("num_outputs", 0, r"1 inputs / 0 outputs, expected 1\.\.1 / 1\.\.1"),
    ("params_count", 3, r"3 parameter words, expected 4"),
    ("params_count", 0, r"0 parameter words, expected 4"),
])
def test_op_record_counts(field, value, pattern):
    assert_rejected(patch_op(chain().blob, 1, field, value), rf"^op 1 \(REQUANTIZE\): {pattern}$")


def test_op_io_and_params_ranges():
    blob = chain().blob
    lay = xm.Layout(blob)
    n_io, n_params = lay.sections["OP_IO"].count, lay.sections["PARAMS"].count
    assert_rejected(patch_op(blob, 3, "io_start", n_io - 1),
                    rf"^op 3 \(REQUANTIZE\): io entries \[{n_io - 1}, \+2\) exceed OP_IO's {n_io} entries$")
    assert_rejected(patch_op(blob, 3, "params_start", n_params - 3),
                    rf"^op 3 \(REQUANTIZE\): params \[{n_params - 3}, \+4\) exceed PARAMS' {n_params} words$")


def test_debug_handle_is_opaque():
    s = fmt.parse(patch_op(chain().blob, 2, "debug_handle", 0xFFFFFFFF))
    assert s["ops"][2]["debug_handle"] == 0xFFFFFFFF


def test_required_input_missing():
    w = Xts3Writer()
    a, b = w.tensor((4,), "INT8"), w.tensor((4,), "INT8")
    w.op("REQUANTIZE", [None], [b], input_zero_point=0, output_zero_point=0, mult=1 << 30, shift=0)
    w.set_inputs([a])
    w.set_outputs([b])
    assert_rejected(w.to_bytes(), r"^op 0 \(REQUANTIZE\): input 0 is required$")


def test_op_reading_a_tensor_before_it_is_written():
    w = Xts3Writer()
    a, b, c = (w.tensor((4,), "INT8") for _ in range(3))
    requant(w, b, c)  # b is written only by the next op
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([c])
    assert_rejected(w.to_bytes(), rf"^op 0 \(REQUANTIZE\): input 0 reads tensor {b} before any op writes it$")


def test_op_reading_its_own_output():
    w = Xts3Writer()
    a, b = w.tensor((4,), "INT8"), w.tensor((4,), "INT8")
    requant(w, b, b)
    w.set_inputs([a])
    w.set_outputs([b])
    assert_rejected(w.to_bytes(), rf"input 0 reads tensor {b} before any op writes it$")


def test_op_writing_a_constant():
    w = Xts3Writer()
    a = w.tensor((4,), "INT8")
    c = w.constant(np.zeros(4, np.int8))
    requant(w, a, c)
    w.set_inputs([a])
    w.set_outputs([a])
    assert_rejected(w.to_bytes(), rf"^op 0 \(REQUANTIZE\): output 0 \(tensor {c}\) is a constant$")


def test_two_ops_writing_one_tensor():
    w = Xts3Writer()
    a, b = w.tensor((4,), "INT8"), w.tensor((4,), "INT8")
    requant(w, a, b)
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([b])
    assert_rejected(w.to_bytes(), rf"^op 1 \(REQUANTIZE\): output 0 \(tensor {b}\) is already written by a graph "
                                  r"input or an earlier op$")


def test_op_writing_a_graph_input():
    w = Xts3Writer()
    a, b = w.tensor((4,), "INT8"), w.tensor((4,), "INT8")
    requant(w, a, b)
    w.set_inputs([a, b])
    w.set_outputs([b])
    assert_rejected(w.to_bytes(), rf"^op 0 \(REQUANTIZE\): output 0 \(tensor {b}\) is already written")


def test_op_input_refers_to_a_missing_tensor():
    blob = chain().blob
    lay = xm.Layout(blob)
    io, _, _ = lay.op_io(1)
    n = lay.sections["TENSORS"].count
    assert_rejected(xm.patch(blob, lay.sections["OP_IO"].offset + 2 * io, "H", n),
                    rf"^op 1 \(REQUANTIZE\): input 0 refers to tensor {n} of {n}$")


# ---------------------------------------------------------------- graph I/O
def graph(n_inputs: int, n_outputs: int) -> bytes:
    """n_inputs int8 inputs; n_outputs REQUANTIZE ops each writing one output."""
    w = Xts3Writer()
    ins = [w.tensor((4,), "INT8") for _ in range(n_inputs)]
    outs = []
    for k in range(n_outputs):
        o = w.tensor((4,), "INT8")
        requant(w, ins[k % n_inputs], o)
        outs.append(o)
    w.set_inputs(ins)
    w.set_outputs(outs)
    return w.to_bytes()


def test_graph_input_and_output_limits():
    n_in, n_out = LIMITS["max_graph_inputs"], LIMITS["max_graph_outputs"]
    s = fmt.parse(graph(n_in, n_out))
    assert len(s["inputs"]) == n_in and len(s["outputs"]) == n_out
    assert_rejected(graph(n_in + 1, 1), rf"^{n_in + 1} graph inputs; expected 1\.\.{n_in}$")
    assert_rejected(graph(1, n_out + 1), rf"^{n_out + 1} graph outputs; expected 1\.\.{n_out}$")


def test_graph_needs_an_input_and_an_output():
    w = Xts3Writer()
    a = w.tensor((4,), "INT8")
    w.set_outputs([a])
    assert_rejected(w.to_bytes(), r"^0 graph inputs; expected 1\.\.16$")
    w.set_inputs([a])
    w.set_outputs([])
    assert_rejected(w.to_bytes(), r"^0 graph outputs; expected 1\.\.16$")


def test_graph_output_may_be_a_graph_input():
    w = Xts3Writer()
    a = w.tensor((4,), "INT8")
    w.set_inputs([a])
    w.set_outputs([a])
    (out,) = fmt.Program(w.to_bytes()).run([np.arange(4, dtype=np.int8)])
    np.testing.assert_array_equal(out, np.arange(4))


def test_graph_output_never_written():
    w = Xts3Writer()
    a, b, c = (w.tensor((4,), "INT8") for _ in range(3))
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([b, c])
    assert_rejected(w.to_bytes(), rf"^graph output 1 \(tensor {c}\) is not written by any op or graph input$")


def test_graph_output_constant():
    w = Xts3Writer()
    a, b = w.tensor((4,), "INT8"), w.tensor((4,), "INT8")
    c = w.constant(np.zeros(4, np.int8))
    requant(w, a, b)
    w.set_inputs([a])
    w.set_outputs([c])
    assert_rejected(w.to_bytes(), rf"^graph output 0 \(tensor {c}\) is not written")


def test_graph_input_rules():
    w = Xts3Writer()
    a, b = w.tensor((4,), "INT8"), w.tensor((4,), "INT8")
    c = w.constant(np.zeros(4, np.int8))
    requant(w, a, b)
    w.set_outputs([b])
    w.set_inputs([a, a])
    assert_rejected(w.to_bytes(), rf"^graph input 1 repeats tensor {a}$")
    w.set_inputs([a, c])
    assert_rejected(w.to_bytes(), rf"^graph input 1 \(tensor {c}\) must live in the arena$")


# ---------------------------------------------------------------- counts
def test_tensor_count_limit():
    def blob(n):
        w = Xts3Writer()
        ts = [w.tensor((1,), "INT8", offset=0) for _ in range(n)]
        w.set_inputs([ts[0]])
        w.set_outputs([ts[0]])
        return w.to_bytes()

    assert fmt.parse(blob(LIMITS["max_tensors"]))["tensors"][-1]["index"] == LIMITS["max_tensors"] - 1
    assert_rejected(blob(LIMITS["max_tensors"] + 1), r"^4097 tensors exceed the limit of 4096$")


def test_op_count_limit():
    def blob(n):
        w = Xts3Writer()
        ts = [w.tensor((4,), "INT8", offset=16 * (k % 2)) for k in range(n + 1)]
        for k in range(n):
            requant(w, ts[k], ts[k + 1])
        w.set_inputs([ts[0]])
        w.set_outputs([ts[n]])
        return w.to_bytes()

    (out,) = fmt.Program(blob(LIMITS["max_ops"])).run([np.full(4, 3, np.int8)])
    np.testing.assert_array_equal(out, np.full(4, 3))  # x0.5 then x2 (shift 1): identity
    assert_rejected(blob(LIMITS["max_ops"] + 1), r"^2049 ops exceed the limit of 2048$")


def test_writer_writes_the_oldest_version_that_has_every_op():
    """A graph of version-1 opcodes is written as version 1, so a runtime that
    reads only version 1 still loads it; the version moves only with the ops."""
    s = fmt.parse(chain().blob)
    assert s["version"] == max(fmt.OPCODES[op["op"]]["min_version"] for op in s["ops"]) == 1
