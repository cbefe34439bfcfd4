"""Hand-built XTS3 blobs, one group per defect class that the runtime once
had or that hostile payloads aim at.

Each ``Case`` carries the blob and what the parser must say: ``expect`` is a
regular expression the rejection message must match, or ``None`` for a blob
that must be accepted (then ``feeds`` are its inputs and ``oracle`` computes
the exact expected outputs in numpy, independently of the C++).

The same cases are used three ways:
  * tests/hardening/test_regressions.py checks them through the 64-bit
    Python binding, one named test per defect class;
  * tests/test_native_m32_asan.py adds them to the corpus that the -m32 and
    ASan/UBSan builds of the runtime must judge identically;
  * host/fuzz/make_corpus.py seeds the parse fuzzer with the rejected ones.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from . import xts3_mutations as xm
from executorch_espnn import _native as fmt
from executorch_espnn.xts3_writer import Xts3Writer

LIMITS = fmt.LIMITS
INT32_MAX = 2**31 - 1
# REQUANTIZE / conv requantization that is exactly the identity on the int32
# accumulator: shift 1 doubles, mult 2^30 halves (exact, no rounding).
IDENTITY_MULT, IDENTITY_SHIFT = 1 << 30, 1


@dataclass(frozen=True)
class Case:
    defect: str  # the defect class (key of DEFECT_CLASSES)
    name: str
    blob: bytes
    expect: str | None  # regex of the parser's message; None = accepted
    feeds: list = field(default_factory=list)
    oracle: Callable[[list], list] | None = None  # feeds -> expected outputs


DEFECT_CLASSES = {
    "size_wrap_32": "a count x record size, offset + size or element count x element size that wraps "
                    "32-bit arithmetic to a small number passes a region or segment check",
    "span_overflow": "a span or stride sum (begin + (out - 1) * step, (out - 1) * stride + extent, "
                     "before + dims) computed in too narrow a type wraps into the valid range",
    "upsample_table": "a resize/upsample table or output whose size product wraps",
    "misaligned_constant": "an int32/float32 constant at an offset that is not a multiple of 4 is read",
    "grouped_conv": "a grouped conv (1 < groups < in_channels) runs on a dense kernel with wrong strides",
    "depthwise_multiplier": "a depthwise conv with channel multiplier > 1 reads the wrong filter taps",
    "unknown_opcode": "an opcode unknown for the blob's format version is dispatched",
    "graph_io_limit": "more graph inputs/outputs than the runtime's fixed tables hold",
    "espnn_uint16": "a dimension above 65535 reaches an ESP-NN kernel that narrows it to uint16",
    "bad_dims": "a dimension of 0 or a negative (int32 view) dimension",
}


def _with_dims(blob: bytes, tensor: int, dims: list[int], nbytes: int | None = None) -> bytes:
    """`blob` with tensor `tensor`'s rank/dims (and nbytes) replaced."""
    lay = xm.Layout(blob)
    b = bytearray(blob)
    b[lay.tensor(tensor) + fmt.TENSOR_FIELDS["rank"]] = len(dims)
    full = list(dims) + [0] * (LIMITS["max_rank"] - len(dims))
    struct.pack_into("<5I", b, lay.tensor(tensor) + fmt.TENSOR_FIELDS["dims"], *full)
    if nbytes is not None:
        struct.pack_into("<I", b, lay.tensor(tensor) + fmt.TENSOR_FIELDS["nbytes"], nbytes)
    return bytes(b)


def _one_op(op: str, inputs: list, out_shape, out_dtype="INT8", **params) -> bytes:
    """One-op graph; `inputs` items: ("in", shape[, dtype]) graph input, ndarray constant, None."""
    w = Xts3Writer()
    ins, graph_inputs = [], []
    for item in inputs:
        if item is None:
            ins.append(None)
        elif isinstance(item, np.ndarray):
            ins.append(w.constant(item))
        else:
            t = w.tensor(item[1], item[2] if len(item) > 2 else "INT8")
            ins.append(t)
            graph_inputs.append(t)
    out = w.tensor(out_shape, out_dtype)
    w.op(op, ins, [out], **params)
    w.set_inputs(graph_inputs)
    w.set_outputs([out])
    return w.to_bytes()


def _requant_chain(dtype_in="INT8") -> bytes:
    w = Xts3Writer()
    a, b = w.tensor((4,), dtype_in), w.tensor((4,), "INT8")
    w.op("REQUANTIZE", [a], [b], input_zero_point=0, output_zero_point=0, mult=IDENTITY_MULT,
         shift=IDENTITY_SHIFT)
    w.set_inputs([a])
    w.set_outputs([b])
    return w.to_bytes()


def _conv_params(**over) -> dict:
    p = dict(stride_h=1, stride_w=1, pad_top=0, pad_left=0, dilation_h=1, dilation_w=1, input_offset=0,
             output_offset=0, act_min=-128, act_max=127)
    p.update(over)
    return p


def _identity_requant(cout: int) -> list[np.ndarray]:
    return [np.full(cout, IDENTITY_MULT, np.int32), np.full(cout, IDENTITY_SHIFT, np.int32)]


# ------------------------------------------------------------------ size_wrap_32
def size_wrap_32() -> list[Case]:
    cases = []
    for v in xm.valid_blobs():
        for m in xm.huge_field_mutations(v):
            if "wraps" in m.name:
                cases.append(Case("size_wrap_32", m.name, m.blob, m.expect))
    chain = xm.valid_blobs()[0].blob  # tensor 0: FLOAT32 [1,3,4,5]
    # 65536 * 65536 elements = 2^32 = 0 in uint32.
    cases.append(Case("size_wrap_32", "elements_wrap_to_0", _with_dims(chain, 0, [65536, 65536], 0),
                      r"^tensor 0: more than 2147483647 elements$"))
    # 13325 * 80581 float32 = 2^32 + 4 bytes: 4 in uint32.
    cases.append(Case("size_wrap_32", "bytes_wrap_to_4", _with_dims(chain, 0, [13325, 80581], 4),
                      r"^tensor 0: nbytes 4 != 1073741825 elements x 4 bytes$"))
    return cases


# ------------------------------------------------------------------ span_overflow
def _slice(begin: int, step: int, in_len: int, out_len: int) -> bytes:
    zeros = dict(begin1=0, begin2=0, begin3=0, begin4=0, step1=0, step2=0, step3=0, step4=0)
    return _one_op("SLICE", [("in", (in_len,))], (out_len,), begin0=begin, step0=step, **zeros)


def span_overflow() -> list[Case]:
    m = LIMITS["max_dim"]
    c = [
        # 2 + 2 * (2^31 - 1) = 2^32: 0 in uint32, inside a 10-element input.
        Case("span_overflow", "slice_end_wraps_32", _slice(2, INT32_MAX, 10, 3),
             r"^op 0 \(SLICE\): begin0 = 2 \+ \(output dims\[0\] = 3 - 1\) \* step0 = 2147483647 "
             r"reaches index 4294967296, beyond input dims\[0\] = 10$"),
        # The largest span there is: (2^31 - 1) + (2^24 - 1) * (2^31 - 1) ~ 2^55.
        Case("span_overflow", "slice_end_max", _slice(m - 1, INT32_MAX, m, m),
             rf"^op 0 \(SLICE\): begin0 = {m - 1} \+ \(output dims\[0\] = {m} - 1\) \* step0 = "
             rf"{INT32_MAX} reaches index {(m - 1) + (m - 1) * INT32_MAX}, beyond input dims\[0\] = {m}$"),
        Case("span_overflow", "pad_before_max",
             _one_op("PAD", [("in", (4,))], (8,), before0=INT32_MAX, before1=0, before2=0, before3=0,
                     before4=0, pad_value=0),
             r"^op 0 \(PAD\): .*before0"),
    ]
    w = np.ones((1, 1, 1, 1), np.int8)
    for field_, value in (("stride_h", INT32_MAX), ("dilation_h", INT32_MAX), ("pad_top", INT32_MAX)):
        c.append(Case("span_overflow", f"conv_{field_}_max",
                      _one_op("CONV2D", [("in", (1, 4, 4, 1)), w, None, *_identity_requant(1)], (1, 4, 4, 1),
                              groups=1, **_conv_params(**{field_: value})),
                      rf"^op 0 \(CONV2D\): .*{field_}"))
    c.append(Case("span_overflow", "conv_stride_out_max",
                  _one_op("CONV2D", [("in", (1, 2, 1, 1)), w, None, *_identity_requant(1)], (1, m, 1, 1),
                          groups=1, **_conv_params(stride_h=INT32_MAX)),
                  r"^op 0 \(CONV2D\): "))
    # Within ESP-NN's uint16 limits, (out - 1) * stride + extent exceeds
    # INT32_MAX (signed overflow in int32 arithmetic, caught by UBSan).
    k = LIMITS["max_kernel_dim"]
    w2 = np.ones((1, 2, 1, 1), np.int8)
    for op, extra in (("CONV2D", dict(groups=1)), ("DEPTHWISE_CONV2D", dict(ch_mult=1)),
                      ("TRANSPOSE_CONV2D", dict(groups=1))):
        c.append(Case("span_overflow", f"{op.lower()}_span_over_int32",
                      _one_op(op, [("in", (1, k, 1, 1)), w2, None, *_identity_requant(1)], (1, k, 1, 1),
                              **extra, **_conv_params(stride_h=k, dilation_h=k)),
                      rf"^op 0 \({op}\): "))
    c.append(Case("span_overflow", "transpose_conv_stride_max",
                  _one_op("TRANSPOSE_CONV2D", [("in", (1, 2, 2, 1)), w, None, *_identity_requant(1)], (1, 4, 4, 1),
                          groups=1, **_conv_params(stride_h=INT32_MAX)),
                  r"^op 0 \(TRANSPOSE_CONV2D\): .*stride_h"))
    c.append(Case("span_overflow", "avg_pool_stride_max",
                  _one_op("AVG_POOL2D", [("in", (1, 4, 4, 1))], (1, 2, 2, 1), kernel_h=2, kernel_w=2,
                          stride_h=INT32_MAX, stride_w=2, pad_top=0, pad_left=0, act_min=-128, act_max=127),
                  r"^op 0 \(AVG_POOL2D\): .*stride_h"))
    return c


# ------------------------------------------------------------------ upsample_table
def upsample_table() -> list[Case]:
    ytab = np.zeros(2, np.int32)
    xtab = np.zeros(2, np.int32)
    base = _one_op("RESIZE_NEAREST", [("in", (1, 2, 2, 1)), ytab, xtab], (1, 2, 2, 1))
    out_t = 3  # input, y_index, x_index, output
    c = [
        # Output [1, 65536, 65536, 1]: 2^32 elements, 0 in uint32.
        Case("upsample_table", "resize_output_elements_wrap", _with_dims(base, out_t, [1, 65536, 65536, 1], 0),
             rf"^tensor {out_t}: more than 2147483647 elements$"),
        # An int32 table of 2^24 x 64 entries: 2^32 bytes, 0 in uint32.
        Case("upsample_table", "table_bytes_wrap", _with_dims(base, 1, [1 << 24, 64], 0),
             r"^tensor 1: nbytes 0 != 1073741824 elements x 4 bytes$"),
    ]
    # A bilinear table must be [out_h, 3]: rows x 3 entries, not fewer.
    ok = np.array([[0, 1, 0], [1, 1, 512]], np.int32)
    c.append(Case("upsample_table", "bilinear_table_too_short",
                  _one_op("RESIZE_BILINEAR", [("in", (1, 2, 2, 1)), ok, ok[:1]], (1, 2, 2, 1)),
                  r"^op 0 \(RESIZE_BILINEAR\): x_table has 3 elements, expected 6$"))
    # Output height 2^24 - 1: the table needs 3 * (2^24 - 1) entries; one
    # row of 3 is given.
    c.append(Case("upsample_table", "bilinear_rows_max",
                  _one_op("RESIZE_BILINEAR", [("in", (1, 2, 2, 1)), ok[:1], ok], ((1, (1 << 24) - 1, 2, 1))),
                  r"^op 0 \(RESIZE_BILINEAR\): y_table has 3 elements, expected 50331645$"))
    return c


# ------------------------------------------------------------------ misaligned_constant
def misaligned_constant() -> list[Case]:
    """A conv's int32 bias / multipliers / shifts, moved off 4-byte alignment."""
    cin, cout = 2, 2
    w = np.ones((cout, 1, 1, cin), np.int8)
    blob = _one_op("CONV2D", [("in", (1, 2, 2, cin)), w, np.zeros(cout, np.int32), *_identity_requant(cout)],
                   (1, 2, 2, cout), groups=1, **_conv_params())
    lay = xm.Layout(blob)
    cases = []
    for t in range(lay.sections["TENSORS"].count):
        if lay.tensor_memory(t) != "CONSTANT" or lay.tensor_dtype(t) != "INT32":
            continue
        for delta in (1, 2, 3):
            off = lay.tensor_field(t, "offset") + delta
            cases.append(Case("misaligned_constant", f"conv_int32_tensor{t}+{delta}",
                              xm.patch(blob, lay.tensor(t) + fmt.TENSOR_FIELDS["offset"], "I", off),
                              rf"^tensor {t}: INT32 constant at offset {off} is not 4-byte aligned$"))
    chain = xm.valid_blobs()[0].blob
    lay = xm.Layout(chain)
    f32 = next(i for i in range(lay.sections["TENSORS"].count)
               if lay.tensor_dtype(i) == "FLOAT32" and lay.tensor_memory(i) == "CONSTANT")
    off = lay.tensor_field(f32, "offset") + 2
    cases.append(Case("misaligned_constant", "float32_constant+2",
                      xm.patch(chain, lay.tensor(f32) + fmt.TENSOR_FIELDS["offset"], "I", off),
                      rf"^tensor {f32}: FLOAT32 constant at offset {off} is not 4-byte aligned$"))
    return cases


# ------------------------------------------------------------------ grouped_conv
def _conv_oracle(x, w, groups, ch_mult=None):
    """Valid (no padding), stride 1 conv in int64; identity requantization,
    zero offsets, clamp to int8. Grouped: w [cout, kh, kw, cin/groups].
    Depthwise (ch_mult given): w [1, kh, kw, cin*ch_mult], output channel
    c*ch_mult + m reads input channel c."""
    n, h, wd, cin = x.shape
    if ch_mult is None:
        cout, kh, kw, cig = w.shape
        cog = cout // groups
    else:
        _, kh, kw, cout = w.shape
    oh, ow = h - kh + 1, wd - kw + 1
    y = np.zeros((n, oh, ow, cout), np.int64)
    xi, wi = x.astype(np.int64), w.astype(np.int64)
    for o in range(cout):
        for oy in range(oh):
            for ox in range(ow):
                win = xi[:, oy:oy + kh, ox:ox + kw, :]
                if ch_mult is None:
                    g = o // cog
                    acc = (win[..., g * cig:(g + 1) * cig] * wi[o]).sum(axis=(1, 2, 3))
                else:
                    acc = (win[..., o // ch_mult] * wi[0, :, :, o]).sum(axis=(1, 2))
                y[:, oy, ox, o] = acc
    return np.clip(y, -128, 127).astype(np.int8)


def grouped_conv() -> list[Case]:
    rng = np.random.default_rng(61)
    cases = []
    for cin, cout, groups in ((4, 6, 2), (6, 6, 3), (8, 4, 4)):
        x = rng.integers(-8, 8, (1, 5, 4, cin), dtype=np.int8)
        w = rng.integers(-8, 8, (cout, 3, 2, cin // groups), dtype=np.int8)
        blob = _one_op("CONV2D", [("in", x.shape), w, None, *_identity_requant(cout)], (1, 3, 3, cout),
                       groups=groups, **_conv_params())
        cases.append(Case("grouped_conv", f"conv_cin{cin}_cout{cout}_groups{groups}", blob, None, [x],
                          lambda feeds, w=w, g=groups: [_conv_oracle(feeds[0], w, g)]))
    return cases


def depthwise_multiplier() -> list[Case]:
    rng = np.random.default_rng(62)
    cases = []
    for cin, mult in ((3, 2), (2, 4), (5, 3)):
        x = rng.integers(-8, 8, (1, 4, 5, cin), dtype=np.int8)
        w = rng.integers(-8, 8, (1, 2, 3, cin * mult), dtype=np.int8)
        blob = _one_op("DEPTHWISE_CONV2D", [("in", x.shape), w, None, *_identity_requant(cin * mult)],
                       (1, 3, 3, cin * mult), ch_mult=mult, **_conv_params())
        cases.append(Case("depthwise_multiplier", f"dw_cin{cin}_mult{mult}", blob, None, [x],
                          lambda feeds, w=w, m=mult: [_conv_oracle(feeds[0], w, 1, ch_mult=m)]))
    return cases


# ------------------------------------------------------------------ unknown_opcode
def unknown_opcode() -> list[Case]:
    blob = _requant_chain()
    at = xm.Layout(blob).op(0) + fmt.OP_FIELDS["opcode"]
    top = max(d["opcode"] for d in fmt.OPCODES.values())
    cases = [Case("unknown_opcode", f"opcode_{code}", xm.patch(blob, at, "H", code),
                  rf"^op 0: unknown opcode {code} for format version {fmt.MIN_FORMAT_VERSION}$")
             for code in (0, top + 1, 0x7FFF, 0xFFFF)]
    # A blob of a later version (whose opcodes this runtime cannot know) is
    # refused as a whole, before any op is decoded.
    cases.append(Case("unknown_opcode", "newer_format_version",
                      xm.patch(xm.patch(blob, at, "H", top + 1), fmt.HEADER_FIELDS["version"], "H",
                               fmt.FORMAT_VERSION + 1),
                      rf"^header: format version {fmt.FORMAT_VERSION + 1} is not supported"))
    return cases


# ------------------------------------------------------------------ graph_io_limit
def _graph(n_in: int, n_out: int) -> bytes:
    w = Xts3Writer()
    ins = [w.tensor((4,), "INT8") for _ in range(n_in)]
    outs = []
    for k in range(n_out):
        o = w.tensor((4,), "INT8")
        w.op("REQUANTIZE", [ins[k % n_in]], [o], input_zero_point=0, output_zero_point=0, mult=IDENTITY_MULT,
             shift=IDENTITY_SHIFT)
        outs.append(o)
    w.set_inputs(ins)
    w.set_outputs(outs)
    return w.to_bytes()


def graph_io_limit() -> list[Case]:
    n_in, n_out = LIMITS["max_graph_inputs"], LIMITS["max_graph_outputs"]
    feeds = [np.arange(4, dtype=np.int8) + k for k in range(n_in)]
    return [
        Case("graph_io_limit", "inputs_and_outputs_at_limit", _graph(n_in, n_out), None, feeds,
             lambda f: [f[k % n_in] for k in range(n_out)]),
        Case("graph_io_limit", "inputs_over_limit", _graph(n_in + 1, 1),
             rf"^{n_in + 1} graph inputs; expected 1\.\.{n_in}$"),
        Case("graph_io_limit", "outputs_over_limit", _graph(1, n_out + 1),
             rf"^{n_out + 1} graph outputs; expected 1\.\.{n_out}$"),
        Case("graph_io_limit", "inputs_far_over_limit", _graph(255, 1), r"^255 graph inputs; expected 1\.\.16$"),
    ]


# ------------------------------------------------------------------ espnn_uint16
def espnn_uint16() -> list[Case]:
    big = LIMITS["max_kernel_dim"] + 1
    w = np.ones((1, 1, 1, 1), np.int8)
    conv = dict(groups=1, **_conv_params())
    dw = dict(ch_mult=1, **_conv_params())
    return [
        Case("espnn_uint16", "conv_width", _one_op("CONV2D", [("in", (1, 1, big, 1)), w, None, *_identity_requant(1)],
                                                   (1, 1, big, 1), **conv), rf"^op 0 \(CONV2D\): .*{big}"),
        Case("espnn_uint16", "conv_height", _one_op("CONV2D", [("in", (1, big, 1, 1)), w, None, *_identity_requant(1)],
                                                    (1, big, 1, 1), **conv), rf"^op 0 \(CONV2D\): .*{big}"),
        Case("espnn_uint16", "depthwise_width",
             _one_op("DEPTHWISE_CONV2D", [("in", (1, 1, big, 1)), w, None, *_identity_requant(1)], (1, 1, big, 1),
                     **dw), rf"^op 0 \(DEPTHWISE_CONV2D\): .*{big}"),
        Case("espnn_uint16", "max_pool_channels",
             _one_op("MAX_POOL2D", [("in", (1, 1, 1, big))], (1, 1, 1, big), kernel_h=1, kernel_w=1, stride_h=1,
                     stride_w=1, pad_top=0, pad_left=0, act_min=-128, act_max=127),
             rf"^op 0 \(MAX_POOL2D\): .*channels {big}.*uint16"),
        Case("espnn_uint16", "avg_pool_height",
             _one_op("AVG_POOL2D", [("in", (1, big, 1, 1))], (1, big, 1, 1), kernel_h=1, kernel_w=1, stride_h=1,
                     stride_w=1, pad_top=0, pad_left=0, act_min=-128, act_max=127),
             rf"^op 0 \(AVG_POOL2D\): .*{big}"),
        Case("espnn_uint16", "fc_out_channels",
             _one_op("FULLY_CONNECTED", [("in", (1, 1)), np.ones((big, 1), np.int8), None,
                                         np.array([IDENTITY_MULT], np.int32), np.array([IDENTITY_SHIFT], np.int32)],
                     (1, big), input_offset=0, filter_offset=0, output_offset=0, act_min=-128, act_max=127),
             r"^op 0 \(FULLY_CONNECTED\): .*out_channels"),
    ]


# ------------------------------------------------------------------ bad_dims
def bad_dims() -> list[Case]:
    chain = xm.valid_blobs()[0].blob  # tensor 0: FLOAT32 [1,3,4,5], tensor 1: INT8 [7]
    m = LIMITS["max_dim"]
    cases = []
    for dims, what in (([0, 3, 4, 5], r"dims\[0\] = 0 is not in 1\.\.16777216"),
                       ([1, 3, 4, 0], r"dims\[3\] = 0 is not in 1\.\.16777216"),
                       ([1, 0xFFFFFFFF, 4, 5], r"dims\[1\] = 4294967295 is not in 1\.\.16777216 \(int32 view -1\)"),
                       ([1, 3, 0x80000000, 5], r"dims\[2\] = 2147483648 is not in 1\.\.16777216 "
                                               r"\(int32 view -2147483648\)"),
                       ([1, 3, 4, -5 & 0xFFFFFFFF], r"dims\[3\] = 4294967291 .* \(int32 view -5\)"),
                       ([m + 1], r"dims\[0\] = 16777217 is not in 1\.\.16777216")):
        name = "_".join(str(d if d < 2**31 else d - 2**32) for d in dims)
        cases.append(Case("bad_dims", f"dims_{name}", _with_dims(chain, 0, dims), rf"^tensor 0: {what}"))
    lay = xm.Layout(chain)
    cases.append(Case("bad_dims", "rank_0", xm.patch(chain, lay.tensor(1) + fmt.TENSOR_FIELDS["rank"], "B", 0),
                      r"^tensor 1: rank 0 is not in 1\.\.5$"))
    cases.append(Case("bad_dims", "zero_nbytes", _with_dims(chain, 1, [7], 0),
                      r"^tensor 1: nbytes 0 != 7 elements x 1 bytes$"))
    return cases


GROUPS = [size_wrap_32, span_overflow, upsample_table, misaligned_constant, grouped_conv, depthwise_multiplier,
          unknown_opcode, graph_io_limit, espnn_uint16, bad_dims]


def cases(defect: str | None = None) -> list[Case]:
    out = [c for g in GROUPS for c in g()]
    assert {c.defect for c in out} == set(DEFECT_CLASSES)
    return [c for c in out if defect is None or c.defect == defect]
