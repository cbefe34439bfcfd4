"""The ``espnn::`` operator-library ops as ``torch.library`` ops, from operators.yaml.

Each YAML entry gives an out variant ``espnn::<name>.out``; this module
defines it and its functional form ``espnn::<name>`` (the same arguments
without ``out``, returning a new tensor), with

- a fake (meta) implementation: the output's shape and dtype, for export and
  ExecuTorch's memory planning;
- a reference implementation that runs the device runtime's op through
  ``_native.run_op`` (RunSingleOp, the function the ExecuTorch kernels call),
  so the reference is exact by construction and there is no Python model of
  the device arithmetic.

The schema of an op is its XTS3 opcode's (``_native.OPLIB_OPS``: opcode, how
many leading inputs are activations, whether it takes a scratch buffer and
whether it takes zero points): the opcode's inputs, then its parameter words
by name, then (GRU, LSTM: ops that read them from their tensor records) the
zero points of input 0 and of the output.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import yaml

from .. import _native

YAML_PATH = Path(__file__).with_name("operators.yaml")
NAMESPACE = "espnn"

# The trailing scalars of an op that takes zero points (espnn/oplib_ops.h).
ZERO_POINT_ARGS = [("int", "input_zero_point"), ("int", "output_zero_point")]

_FUNC_RE = re.compile(r"^espnn::(\w+)\.out\((.*), \*, Tensor\(a!\) out\) -> Tensor\(a!\)$")


@dataclass(frozen=True)
class OplibOp:
    name: str                 # "quantized_conv2d"
    opcode: str               # XTS3 opcode, "CONV2D"
    activations: int          # leading inputs that are activations; the other inputs are constants
    inputs: tuple[str, ...]   # tensor argument names, XTS3 input order
    optional: tuple[bool, ...]
    params: tuple[str, ...]   # parameter words, xts3_format.h order
    scratch: bool             # a trailing `Tensor? scratch` argument (the opcode's kernel sizes scratch)
    out_schema: str           # the YAML's func, without the namespace
    zero_points: bool = False  # `int input_zero_point, int output_zero_point` after the parameter words

    @property
    def functional_schema(self) -> str:
        args = self.out_schema[self.out_schema.index("(") + 1:self.out_schema.index(", *, Tensor(a!) out)")]
        return f"{self.name}({args}) -> Tensor"

    def words(self, values) -> list[int]:
        """The parameter values as int32 words (float32 bits for *_f32)."""
        return [struct.unpack("<i", struct.pack("<f", float(v)))[0] if n.endswith("_f32") else int(v)
                for n, v in zip(self.params, values)]


def _parse(func: str) -> tuple[str, list[tuple[str, str]]]:
    m = _FUNC_RE.match(func.strip())
    if m is None:
        raise ValueError(f"operators.yaml: {func!r} is not an espnn out variant")
    # A default (`int channels_last=0`: a field appended in a later format
    # version, 0 = what the op did before it) is the schema's, not the name's.
    args = [tuple(a.split("=", 1)[0].strip().rsplit(" ", 1)) for a in m.group(2).split(",")]
    return m.group(1), args


@lru_cache(maxsize=None)
def oplib_ops() -> dict[str, OplibOp]:
    """The ops of operators.yaml, checked against the runtime's op table."""
    entries = yaml.safe_load(YAML_PATH.read_text())
    ops = {}
    for e in entries:
        name, args = _parse(e["func"])
        if name not in _native.OPLIB_OPS:
            raise ValueError(f"operators.yaml: espnn::{name} is not in the runtime's oplib table (espnn/oplib_ops.h)")
        opcode, activations, has_scratch, has_zero_points = _native.OPLIB_OPS[name]
        scratch = args[-1] == ("Tensor?", "scratch")
        if scratch != has_scratch:
            raise ValueError(f"operators.yaml: espnn::{name}: a trailing `Tensor? scratch` argument is "
                             f"{'required' if has_scratch else 'not allowed'} ({opcode}'s kernel "
                             f"{'sizes' if has_scratch else 'needs no'} scratch)")
        if scratch:
            args = args[:-1]
        tensors = [(t, n) for t, n in args if t.startswith("Tensor")]
        scalars = [(t, n) for t, n in args if not t.startswith("Tensor")]
        if has_zero_points:
            if scalars[-2:] != ZERO_POINT_ARGS:
                raise ValueError(f"operators.yaml: espnn::{name} must end its scalars with "
                                 f"`int input_zero_point, int output_zero_point` (espnn/oplib_ops.h)")
            scalars = scalars[:-2]
        params = tuple(n for _, n in scalars)
        if params != tuple(_native.OPCODES[opcode]["params"]):
            raise ValueError(f"operators.yaml: espnn::{name} parameters {params} are not {opcode}'s "
                             f"{tuple(_native.OPCODES[opcode]['params'])}")
        ops[name] = OplibOp(name, opcode, activations, tuple(n for _, n in tensors),
                            tuple(t == "Tensor?" for t, _ in tensors), params, scratch,
                            e["func"].split("::", 1)[1], has_zero_points)
    return ops


# -- output shapes (the fake implementations) ----------------------------------

def _conv_out(x, w, p, kernel_hw):
    n, h, wd, _ = x.shape
    kh, kw = kernel_hw
    oh = (h + 2 * p["pad_top"] - p["dilation_h"] * (kh - 1) - 1) // p["stride_h"] + 1
    ow = (wd + 2 * p["pad_left"] - p["dilation_w"] * (kw - 1) - 1) // p["stride_w"] + 1
    return (n, oh, ow)


def _output(op: OplibOp, tensors, p) -> tuple[tuple[int, ...], torch.dtype]:
    x = tensors[0]
    if op.opcode == "CONV2D":  # filter OHWI
        w = tensors[1]
        return _conv_out(x, w, p, w.shape[1:3]) + (w.shape[0],), torch.int8
    if op.opcode == "DEPTHWISE_CONV2D":  # filter [1, kh, kw, C*M]
        w = tensors[1]
        return _conv_out(x, w, p, w.shape[1:3]) + (w.shape[3],), torch.int8
    if op.opcode in ("AVG_POOL2D", "MAX_POOL2D"):  # ESP-NN clips windows: the floor rule of ceil_mode=False
        n, h, w, c = x.shape
        return ((n, (h + 2 * p["pad_top"] - p["kernel_h"]) // p["stride_h"] + 1,
                 (w + 2 * p["pad_left"] - p["kernel_w"]) // p["stride_w"] + 1, c), torch.int8)
    if op.opcode == "FULLY_CONNECTED":
        return tuple(x.shape[:-1]) + (tensors[1].shape[0],), torch.int8
    if op.opcode == "TRANSPOSE_CONV2D":  # filter OHWI; the output_padding 0 size (docs/oplib.md)
        n, h, wd, _ = x.shape
        w = tensors[1]
        return ((n, (h - 1) * p["stride_h"] - 2 * p["pad_top"] + p["dilation_h"] * (w.shape[1] - 1) + 1,
                 (wd - 1) * p["stride_w"] - 2 * p["pad_left"] + p["dilation_w"] * (w.shape[2] - 1) + 1,
                 w.shape[0]), torch.int8)
    if op.opcode == "BATCH_MATMUL":  # rhs [.., N, K] when rhs_transposed, else [.., K, N]
        rhs = tuple(tensors[1].shape)
        n = rhs[-2] if p["rhs_transposed"] else rhs[-1]
        batch = torch.broadcast_shapes(tuple(x.shape[:-2]), rhs[:-2])
        return tuple(batch) + (x.shape[-2], n), torch.int8
    if op.opcode in ("ADD", "MUL"):
        return tuple(torch.broadcast_shapes(x.shape, tensors[1].shape)), torch.int8
    if op.opcode in ("SOFTMAX", "HARD_SWISH", "LUT", "REQUANTIZE"):
        return tuple(x.shape), torch.int8
    if op.opcode == "MEAN_HW":  # [N, H, W, C] -> [N, 1, 1, C] (the runtime also takes its view [N, C])
        return (x.shape[0], 1, 1, x.shape[3]), torch.int8
    if op.opcode == "QUANTIZE":  # channels_last: [N, C, spatial...] written as [N, spatial..., C]
        shape = tuple(x.shape)
        return (shape[:1] + shape[2:] + shape[1:2] if p["channels_last"] else shape), torch.int8
    if op.opcode in ("GRU", "LSTM"):  # [B, T, I] / [T, B, I] -> [.., .., hidden]; w_hh is [G * hidden, hidden]
        return tuple(x.shape[:-1]) + (tensors[2].shape[1],), torch.int8
    if op.opcode == "DEQUANTIZE":  # channels_last: [N, spatial..., C] written as [N, C, spatial...]
        shape = tuple(x.shape)
        return (shape[:1] + shape[-1:] + shape[1:-1] if p["channels_last"] else shape), torch.float32
    raise NotImplementedError(f"no output shape rule for {op.opcode}")


def output_shape(op: OplibOp, tensors, params: dict) -> tuple[int, ...]:
    """The op's output shape for these input tensors and parameter values."""
    return tuple(_output(op, tensors, params)[0])


def _split(op: OplibOp, args):
    """(tensor inputs, {param: value}); a trailing scratch argument is the
    kernels' planned buffer: the reference allocates its own. A trailing
    parameter left out (one with a schema default, a field appended in a
    later format version) is 0, what the op did before it existed."""
    tensors = list(args[:len(op.inputs)])
    given = list(args[len(op.inputs):len(op.inputs) + len(op.params)])
    params = dict(zip(op.params, given + [0] * (len(op.params) - len(given))))
    return tensors, params


def _zero_points(op: OplibOp, args) -> tuple[int, int]:
    """The zero points of input 0 and of the output the op's records carry
    (0, 0 for an op that takes none: its parameter words say all)."""
    if not op.zero_points:
        return (0, 0)
    start = len(op.inputs) + len(op.params)
    return int(args[start]), int(args[start + 1])


def _fake(op: OplibOp):
    def fake(*args):
        tensors, p = _split(op, args)
        shape, dtype = _output(op, tensors, p)
        return tensors[0].new_empty(shape, dtype=dtype)
    return fake


def run_reference(op: OplibOp, args, out: torch.Tensor) -> torch.Tensor:
    """Runs the op in the device runtime (``_native.run_op``) into ``out``."""
    tensors, p = _split(op, args)
    arrays = [None if t is None else np.ascontiguousarray(t.detach().cpu().numpy()) for t in tensors]
    result = np.empty(tuple(out.shape), dtype=out.detach().numpy().dtype)
    _native.run_op(_native.OPCODES[op.opcode]["opcode"], arrays, op.activations, [result],
                   op.words(p[n] for n in op.params), zero_points=_zero_points(op, args))
    out.copy_(torch.from_numpy(result))
    return out


def _reference(op: OplibOp):
    def reference(*args):
        tensors, p = _split(op, args)
        shape, dtype = _output(op, tensors, p)
        return run_reference(op, args, torch.empty(shape, dtype=dtype))
    return reference


def _reference_out(op: OplibOp):
    def reference_out(*args, out):
        return run_reference(op, args, out)
    return reference_out


_LIB: torch.library.Library | None = None


def define_ops() -> dict[str, OplibOp]:
    """Defines every op of operators.yaml once per process (the namespace is
    shared with EspNNQuantizer's espnn::gru / espnn::lstm: a fragment)."""
    global _LIB
    ops = oplib_ops()
    if _LIB is None:
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
        for op in ops.values():
            lib.define(op.functional_schema)
            lib.define(op.out_schema)
            lib.impl(op.name, _reference(op), "CompositeExplicitAutograd")
            lib.impl(f"{op.name}.out", _reference_out(op), "CompositeExplicitAutograd")
            torch.library.register_fake(f"{NAMESPACE}::{op.name}", _fake(op), lib=lib)
        _LIB = lib
    return ops


def op_overload(name: str):
    """torch.ops.espnn.<name>.default (defining the ops first)."""
    define_ops()
    return getattr(torch.ops.espnn, name).default
