"""Layer-by-layer view of a lowered convert_pt2e model, and an exact integer
reference of the same int8 graph, written for the tests from TFLite's
documented integer formulas (tests/support/tflite_reference.py).

Why: a .pte that is N steps from the convert_pt2e model at its output may hold
a wrong op, or N may be rounding differences grown through the layers. To tell
them apart every layer is computed three ways from the SAME int8 input (the
device's own input to that layer, so nothing accumulates):

* the device: the program with every activation quantize also made a graph
  output (``tapped``), lowered and run on the native runtime;
* the convert_pt2e model's float simulation of that layer (dequantize, float
  op, quantize: one rounding, half to even);
* the integer reference (``integer_layer``): what the int8 kernels are
  specified to compute (conv family: TFLite's MultiplyByQuantizedMultiplier
  with QuantizeMultiplier's normalized multiplier, which rounds twice), and the
  exactly rounded real result of the layer.

The product never imports this module; nothing here is derived from
executorch_espnn's lowering (only its public to_espnn_edge and run_edge_program
are used to get the device's values).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch
import torchao.quantization.pt2e  # noqa: F401  (registers the quantized_decomposed ops)

from . import tflite_reference as T

QUANTIZE = torch.ops.quantized_decomposed.quantize_per_tensor.default
DEQUANTIZE = torch.ops.quantized_decomposed.dequantize_per_tensor.default
DEQUANTIZE_PER_CHANNEL = torch.ops.quantized_decomposed.dequantize_per_channel.default
MOVES = ("view", "reshape", "flatten", "squeeze", "unsqueeze", "permute", "select", "slice", "clone", "pad")


def activation_quantizes(gm) -> list:
    """The quantize_per_tensor nodes of a convert_pt2e graph: one per int8 activation."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target == QUANTIZE]


def qparams(node) -> tuple[float, int]:
    return float(node.args[1]), int(node.args[2])


def tapped(converted):
    """A copy of `converted` whose outputs are its own, then the dequantized value
    of every activation quantize (in graph order): lowered, the device computes
    the same ops and hands every int8 activation out."""
    gm = copy.deepcopy(converted)
    out = gm.graph.output_node()
    own = list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]
    taps = []
    for q in activation_quantizes(gm):
        dq = next((u for u in q.users if u.target == DEQUANTIZE), None)
        if dq is None:
            with gm.graph.inserting_after(q):
                dq = gm.graph.call_function(DEQUANTIZE, q.args)
        taps.append(dq)
    out.args = (tuple(own + taps),)
    codegen = gm.graph._codegen  # the pytree output spec of the original outputs no longer holds
    if getattr(codegen, "pytree_info", None) is not None:
        codegen.pytree_info = codegen.pytree_info._replace(out_spec=None)
    gm.graph.lint()
    gm.recompile()
    return gm, len(own)


def _codes(values: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    return (torch.round(values.double() / scale) + zero_point).to(torch.int64)


def device_layers(converted, inputs) -> tuple[dict, list]:
    """({quantize node name: int8 codes the device computed}, the program's own outputs)."""
    from executorch_espnn import to_espnn_edge
    from executorch_espnn.runtime import run_edge_program

    gm, n_own = tapped(converted)
    edge = to_espnn_edge(torch.export.export(gm, tuple(inputs)))
    outs, _ = run_edge_program(edge, list(inputs))
    codes = {q.name: _codes(o, *qparams(q)) for q, o in zip(activation_quantizes(converted), outs[n_own:])}
    return codes, outs[:n_own]


class _FromDeviceInputs(torch.fx.Interpreter):
    """The convert_pt2e graph with each activation's int8 value replaced by the
    device's: records what the float simulation makes of each layer's input."""

    def __init__(self, gm, device: dict):
        super().__init__(gm)
        self.device, self.codes = device, {}

    def run_node(self, n):
        v = super().run_node(n)
        if n.op == "call_function" and n.target == QUANTIZE:
            self.codes[n.name] = v.to(torch.int64)
            return self.device[n.name].reshape(v.shape).to(torch.int8)
        return v


def pt2e_layers(converted, inputs, device: dict) -> dict:
    """{quantize node name: the convert_pt2e model's codes for that layer, from the device's inputs}."""
    interp = _FromDeviceInputs(converted, device)
    interp.run(*inputs)
    return interp.codes


# ---- the integer reference ----------------------------------------------------------


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _f32(x: float) -> float:
    return float(np.float32(x))


def _source(node):
    """The dequantize an op input comes from (through views)."""
    while node.target != DEQUANTIZE:
        node = node.args[0]
    return node


def _chain(q) -> list:
    """The call nodes between quantize `q` and the dequantizes feeding its layer."""
    seen, todo = [], [q.args[0]]
    while todo:
        n = todo.pop()
        if n.op != "call_function" or n.target in (DEQUANTIZE, DEQUANTIZE_PER_CHANNEL) or n in seen:
            continue
        seen.append(n)
        todo += list(n.all_input_nodes)
    return seen


def _clamp_range(chain, scale: float, zero_point: int) -> tuple[int, int]:
    """The fused activation's int8 range (TFLite's CalculateActivationRangeQuantized)."""
    lo, hi = -128, 127
    for n in chain:
        name = str(n.target)
        if "relu6" in name or "hardtanh" in name:
            a, b = (0.0, 6.0) if "relu6" in name else (float(n.args[1]), float(n.args[2]))
            lo, hi = max(lo, zero_point + int(_round_half_away(a / scale))), min(hi, zero_point + int(
                _round_half_away(b / scale)))
        elif "relu" in name:
            lo = max(lo, zero_point)
    return lo, hi


@dataclass
class Layer:
    """One int8 activation: what produced it and the reference's codes for it."""

    name: str
    kind: str  # an aten op name (conv2d, linear, ...), "mean", "max_pool", "avg_pool", "requantize", "move", "input"
    integer: torch.Tensor | None  # the kernel's specified integer result (None: same as exact)
    exact: torch.Tensor | None  # the layer's real result rounded once, to nearest (None: no arithmetic)
    right_shifts: list = field(default_factory=list)  # conv family: QuantizeMultiplier's right shift per channel


def _const(gm, node):
    return getattr(gm, node.target)


def _conv_family(gm, op, lo, hi, s_out, zp_out, codes) -> tuple:
    name = str(op.target).split(".")[-2]
    x_dq, w_dq = _source(op.args[0]), op.args[1]
    s_in, zp_in = qparams(x_dq)
    x = codes[x_dq.args[0].name].double() - zp_in
    if op.args[0] is not x_dq:  # a flatten/view between the activation and the op
        x = x.reshape(op.args[0].meta["val"].shape)
    w = _const(gm, w_dq.args[0]).double()
    sw = (_const(gm, w_dq.args[1]).double().numpy() if w_dq.target == DEQUANTIZE_PER_CHANNEL
          else np.array([float(w_dq.args[1])]))
    b = _const(gm, op.args[2].args[0]).double() if len(op.args) > 2 and op.args[2] is not None else None
    # Integer accumulators, exactly (float64 holds every int32 sum of int8 products).
    if name == "linear":
        acc = torch.nn.functional.linear(x, w, b)
    elif "transpose" in name:
        fn = torch.nn.functional.conv_transpose1d if x.dim() == 3 else torch.nn.functional.conv_transpose2d
        # (stride, padding, output_padding, groups, dilation), trailing defaults omitted
        args = list(op.args[3:8]) + [1, 0, 0, 1, 1][len(op.args[3:8]):]
        acc = fn(x, w, b, *args)
    else:
        fn = torch.nn.functional.conv1d if x.dim() == 3 else torch.nn.functional.conv2d
        acc = fn(x, w, b, *op.args[3:])
    acc = acc.numpy().astype(np.int64)
    channels = acc.shape[1] if acc.ndim > 1 else acc.shape[0]
    sw = np.resize(sw, channels)  # per tensor: repeated; grouped transpose: repeated per group
    mult, shift = T.per_channel_multipliers(np.float32(s_in), sw.astype(np.float32), np.float32(s_out))
    shape = [1] * acc.ndim
    shape[1 if acc.ndim > 1 else 0] = -1
    integer = T.requant(acc, mult.reshape(shape), shift.reshape(shape), zp_out, (lo, hi)).astype(np.int64)
    real = _f32(s_in) * sw.astype(np.float32).astype(np.float64) / _f32(s_out)
    exact = np.clip(_round_half_away(acc * real.reshape(shape)) + zp_out, lo, hi)
    return integer, exact, np.maximum(-shift, 0).tolist()


def integer_layer(gm, q, codes: dict) -> Layer:
    """The integer reference for the layer whose output quantize is `q`, computed
    from `codes` (the int8 value of every earlier activation, by quantize name)."""
    s_out, zp_out = qparams(q)
    src = q.args[0]
    if src.op == "placeholder":
        return Layer(q.name, "input", None, None)
    if src.op == "call_function" and src.target == DEQUANTIZE:  # quantize(dequantize(x)): a requantize
        s_in, zp_in = qparams(src)
        x = codes[src.args[0].name].numpy() - zp_in
        exact = np.clip(_round_half_away(x * (_f32(s_in) / _f32(s_out))) + zp_out, -128, 127)
        return Layer(q.name, "requantize", None, torch.from_numpy(exact.astype(np.int64)))
    chain = _chain(q)
    ops = [n for n in chain if not any(m in str(n.target) for m in MOVES + ("relu", "hardtanh"))]
    lo, hi = _clamp_range(chain, s_out, zp_out)
    if not ops:
        return Layer(q.name, "move", None, None)
    if len(ops) != 1:
        raise NotImplementedError(f"{q.name}: layer of {[str(n.target) for n in ops]}")
    op = ops[0]
    name = str(op.target).split(".")[-2]
    if "conv" in name or name == "linear":
        integer, exact, shifts = _conv_family(gm, op, lo, hi, s_out, zp_out, codes)
        return Layer(q.name, name, torch.from_numpy(integer), torch.from_numpy(exact.astype(np.int64)), shifts)
    if "mean" in name or "adaptive_avg_pool" in name:  # over every dim after the channels
        x_dq = _source(op.args[0])
        s_in, zp_in = qparams(x_dq)
        x = codes[x_dq.args[0].name].double() - zp_in
        dims = tuple(range(2, x.dim()))
        count = int(np.prod([x.shape[d] for d in dims]))
        real = x.sum(dims).numpy() * (_f32(s_in) / _f32(s_out) / count)
        exact = np.clip(_round_half_away(real) + zp_out, lo, hi)
        return Layer(q.name, "mean", None, torch.from_numpy(exact.astype(np.int64)))
    if "max_pool" in name:  # one quantization in and out: the max of the codes
        x_dq = _source(op.args[0])
        assert qparams(x_dq) == (s_out, zp_out), "max pool shares its input's quantization"
        x = codes[x_dq.args[0].name].double()
        fn = torch.nn.functional.max_pool1d if x.dim() == 3 else torch.nn.functional.max_pool2d
        y = fn(x, *op.args[1:5]).clamp(lo, hi)
        return Layer(q.name, "max_pool", None, y.to(torch.int64))
    if "avg_pool" in name:  # TFLite's AveragePool: one quantization, the raw codes' sum divided, rounded
        x_dq = _source(op.args[0])
        assert qparams(x_dq) == (s_out, zp_out), "average pool shares its input's quantization"
        kernel, stride, padding = op.args[1], op.args[2] if len(op.args) > 2 else op.args[1], (
            op.args[3] if len(op.args) > 3 else 0)
        assert padding in (0, [0, 0], (0, 0)), "padded windows: not needed by the models here"
        x = codes[x_dq.args[0].name].double()
        fn = torch.nn.functional.avg_pool1d if x.dim() == 3 else torch.nn.functional.avg_pool2d
        y = np.clip(_round_half_away(fn(x, kernel, stride).numpy()), lo, hi)
        return Layer(q.name, "avg_pool", None, torch.from_numpy(y.astype(np.int64)))
    if name == "cat":
        parts = []
        for p in op.args[0]:
            d = _source(p)
            s_in, zp_in = qparams(d)
            x = codes[d.args[0].name].double() - zp_in
            parts.append(x * (_f32(s_in) / _f32(s_out)))
        y = torch.cat(parts, dim=op.args[1] if len(op.args) > 1 else 0).numpy()
        exact = np.clip(_round_half_away(y) + zp_out, lo, hi)
        return Layer(q.name, "cat", None, torch.from_numpy(exact.astype(np.int64)))
    if name == "add":  # TFLite's int8 ADD: inputs rescaled at 2^20, summed, requantized
        (a, b) = (_source(op.args[0]), _source(op.args[1]))
        (s1, z1), (s2, z2) = qparams(a), qparams(b)
        x1 = (codes[a.args[0].name] - z1).numpy()
        x2 = (codes[b.args[0].name] - z2).numpy()
        twice = 2 * max(_f32(s1), _f32(s2))
        m1, e1 = T.quantize_multiplier(_f32(s1) / twice)
        m2, e2 = T.quantize_multiplier(_f32(s2) / twice)
        mo, eo = T.quantize_multiplier(twice / ((1 << 20) * _f32(s_out)))
        acc = T.mbqm(x1 * (1 << 20), m1, e1) + T.mbqm(x2 * (1 << 20), m2, e2)
        integer = np.clip(T.mbqm(acc, mo, eo) + zp_out, lo, hi)
        exact = np.clip(_round_half_away((x1 * _f32(s1) + x2 * _f32(s2)) / _f32(s_out)) + zp_out, lo, hi)
        return Layer(q.name, "add", torch.from_numpy(integer.astype(np.int64)),
                     torch.from_numpy(exact.astype(np.int64)))
    raise NotImplementedError(f"{q.name}: no integer reference for {op.target}")


@dataclass
class LayerDiff:
    """One layer, three ways from the device's input: element counts."""

    layer: Layer
    elements: int
    pt2e_vs_device: int  # elements where convert_pt2e's float simulation differs from the device
    pt2e_max_steps: int
    reference_vs_device: int | None  # the integer reference vs the device (None: no arithmetic)
    device_vs_exact: int | None  # the device vs the exactly rounded real result
    pt2e_vs_exact: int | None


def compare_layers(converted, inputs) -> tuple[list[LayerDiff], dict, list]:
    """Every activation of `converted` on `inputs`: (diffs, device codes, program outputs)."""
    device, outputs = device_layers(converted, inputs)
    pt2e = pt2e_layers(converted, inputs, device)
    rows = []
    for q in activation_quantizes(converted):
        dev = device[q.name].flatten()
        ref = pt2e[q.name].flatten()
        layer = integer_layer(converted, q, device)
        want = layer.integer if layer.integer is not None else layer.exact
        rows.append(LayerDiff(
            layer, dev.numel(), int((dev != ref).sum()), int((dev - ref).abs().max()),
            None if want is None else int((want.flatten() != dev).sum()),
            None if layer.exact is None else int((layer.exact.flatten() != dev).sum()),
            None if layer.exact is None else int((layer.exact.flatten() != ref).sum())))
    return rows, device, outputs


class IntegerChain(torch.fx.Interpreter):
    """The whole int8 graph in the integer reference, each layer from the
    reference's own previous layers: ``rounding="kernel"`` is the kernels'
    specified arithmetic (the double-rounding requantization of the conv
    family), ``"once"`` rounds every layer's real result once."""

    def __init__(self, gm, rounding: str = "kernel"):
        super().__init__(gm)
        self.rounding, self.codes = rounding, {}

    def run_node(self, n):
        v = super().run_node(n)
        if n.op == "call_function" and n.target == QUANTIZE:
            layer = integer_layer(self.module, n, self.codes)
            if self.rounding == "kernel" and layer.integer is not None:
                c = layer.integer
            elif layer.exact is not None:
                c = layer.exact
            else:
                c = v.to(torch.int64)  # the input's quantize, or a move: no arithmetic of ours
            c = c.reshape(v.shape)
            self.codes[n.name] = c
            return c.to(torch.int8)
        return v
