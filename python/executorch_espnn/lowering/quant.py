"""How PT2E quantization appears in the graph, read the way ESP-NN needs it.

After ``convert_pt2e`` an int8 op looks like

    dq(x) -> op -> [relu | hardtanh | clamp ...] -> q(scale, zp)
    weight: int8 constant -> dequantize_per_channel / _per_tensor (symmetric)
    bias:   float constant, or int32 constant -> dequantize

The helpers here turn that into ESP-NN terms (QParams, int8 weights with
per-channel scales, int32 bias, the output quantization with its clamp) or
raise ``Unsupported`` with the reason. Checks and lowerings call the same
helpers, so the partitioner's decision and the bytes come from one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.fx import Node

from .graph import Unsupported, arg, op_name, single_user

Q_PER_TENSOR = "quantized_decomposed.quantize_per_tensor.default"
DQ_PER_TENSOR = "quantized_decomposed.dequantize_per_tensor.default"
DQ_PER_CHANNEL = "quantized_decomposed.dequantize_per_channel.default"
QUANT_OPS = {
    Q_PER_TENSOR, DQ_PER_TENSOR, DQ_PER_CHANNEL,
    "quantized_decomposed.quantize_per_tensor.tensor", "quantized_decomposed.dequantize_per_tensor.tensor",
    "quantized_decomposed.quantize_per_channel.default",
}

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Ops that only clamp; a producer with an activation range absorbs them.
CLAMP_OPS = {"aten.relu.default", "aten.relu6.default", "aten.hardtanh.default", "aten.clamp.default"}


def f32(x: float) -> float:
    return float(np.float32(x))


def is_q(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and op_name(node) == Q_PER_TENSOR


def is_dq(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and op_name(node) == DQ_PER_TENSOR


def is_clamp(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and op_name(node) in CLAMP_OPS


@dataclass(frozen=True)
class QParams:
    """Per-tensor affine int8 quantization (scale kept as float32, as TFLite stores it)."""

    scale: float
    zero_point: int
    qmin: int = -128
    qmax: int = 127

    def same(self, other: "QParams") -> bool:
        return (f32(self.scale) == f32(other.scale) and self.zero_point == other.zero_point
                and self.qmin == other.qmin and self.qmax == other.qmax)

    def negated(self) -> "QParams":
        """The quantization in which the code -1 - q (bitwise not of q) holds the
        real value -(q - zero_point) * scale: every int8 code maps to one."""
        return QParams(self.scale, -1 - self.zero_point, -1 - self.qmax, -1 - self.qmin)

    @property
    def full_range(self) -> bool:
        return self.qmin == -128 and self.qmax == 127

    def quantize_bound(self, value: float) -> int:
        """A real clamp bound in this quantization, rounded as TFLite's
        CalculateActivationRangeQuantized does (float32 division, then
        round half away from zero); see quant_params.activation_range."""
        q = float(np.float32(value) / np.float32(self.scale))
        r = math.floor(q + 0.5) if q >= 0 else -math.floor(-q + 0.5)
        return self.zero_point + int(r)


def _per_tensor_qparams(node: Node, what: str) -> QParams:
    scale, zp = node.args[1], node.args[2]
    qmin, qmax, dtype = node.args[3], node.args[4], node.args[5]
    if not isinstance(scale, (int, float)) or not isinstance(zp, int):
        raise Unsupported(f"{what} {node.name} has tensor-valued quantization parameters")
    if dtype != torch.int8:
        raise Unsupported(f"{what} {node.name} is {dtype}; ESP-NN runs int8 only")
    if not (math.isfinite(scale) and scale > 0 and math.isfinite(f32(scale)) and f32(scale) > 0):
        raise Unsupported(f"{what} {node.name} has scale {scale}")
    if not -128 <= qmin < qmax <= 127 or not qmin <= zp <= qmax:
        raise Unsupported(f"{what} {node.name}: zero point {zp} / range [{qmin}, {qmax}] is not int8")
    return QParams(f32(scale), int(zp), int(qmin), int(qmax))


def q_params(node: Node) -> QParams:
    """Output quantization of a quantize_per_tensor node."""
    if not is_q(node):
        raise Unsupported(f"{node.name} ({op_name(node)}) is not a per-tensor quantize")
    return _per_tensor_qparams(node, "quantize")


def dq_params(node: Node) -> QParams:
    if not is_dq(node):
        raise Unsupported(f"{node.name} ({op_name(node)}) is not a per-tensor dequantize")
    return _per_tensor_qparams(node, "dequantize")


def input_qparams(value: Node, consumer: Node, cc, *, allow_constant: bool = False) -> QParams:
    """Quantization of an int8 activation input: it must come through a dequantize."""
    if not is_dq(value):
        kind = op_name(value) if value.op == "call_function" else value.op
        val = value.meta.get("val")
        dtype = val.dtype if isinstance(val, torch.Tensor) else None
        # Name a non-float32 dtype (float16, int16...): quantizing will not help there.
        what = f"is {dtype}, " if dtype is not None and dtype != torch.float32 else "is "
        raise Unsupported(f"input {value.name} of {consumer.name} {what}not dequantized from int8 ({kind}); "
                          "the input is not quantized")
    qp = dq_params(value)
    if not allow_constant and cc.constants.is_constant(value.args[0]):
        raise Unsupported(f"input {value.name} of {consumer.name} is a constant")
    return qp


@dataclass
class Weight:
    """An int8 symmetric weight in PyTorch's layout and its per-output-channel scales."""

    data: np.ndarray
    scales: np.ndarray  # float64 of float32-rounded scales, one per output channel
    per_channel: bool
    nodes: list = field(default_factory=list)  # the dq node (absorbed by the consumer)


def weight(node, consumer: Node, cc, *, channel_axis: int = 0) -> Weight:
    """Reads an int8 weight and its scales from the program's constants."""
    if not isinstance(node, Node):
        raise Unsupported(f"weight of {consumer.name} is not a tensor")
    name = op_name(node) if node.op == "call_function" else node.op
    if name not in (DQ_PER_TENSOR, DQ_PER_CHANNEL):
        if cc.constants.is_constant(node):
            raise Unsupported(f"weight {node.name} of {consumer.name} is float (not quantized)")
        raise Unsupported(f"weight {node.name} of {consumer.name} is not a constant")
    data = cc.constants.tensor(node.args[0])
    if data is None:
        raise Unsupported(f"weight {node.name} of {consumer.name} is not a constant")
    if data.dtype != torch.int8:
        raise Unsupported(f"weight {node.name} of {consumer.name} is {data.dtype}, not int8")
    out_ch = data.shape[channel_axis]
    if name == DQ_PER_TENSOR:
        qp = dq_params(node)
        if qp.zero_point != 0:
            raise Unsupported(f"weight {node.name} has zero point {qp.zero_point}; ESP-NN needs symmetric weights")
        scales = np.full(out_ch, qp.scale, np.float64)
        per_channel = False
    else:
        scales_t, zps_t = cc.constants.tensor(node.args[1]), cc.constants.tensor(node.args[2])
        axis, qmin, qmax, dtype = node.args[3], node.args[4], node.args[5], node.args[6]
        if scales_t is None or zps_t is None:
            raise Unsupported(f"weight {node.name}: per-channel scales are not constants")
        if dtype != torch.int8 or qmin < -128 or qmax > 127:
            raise Unsupported(f"weight {node.name} is not int8 ({dtype}, [{qmin}, {qmax}])")
        if axis % data.dim() != channel_axis:
            raise Unsupported(f"weight {node.name} is quantized along axis {axis}, expected the output "
                              f"channel axis {channel_axis}")
        if torch.any(zps_t != 0):
            raise Unsupported(f"weight {node.name} has non-zero zero points; ESP-NN needs symmetric weights")
        scales = scales_t.detach().to(torch.float32).numpy().astype(np.float64)
        if scales.shape != (out_ch,):
            raise Unsupported(f"weight {node.name} has {scales.size} scales for {out_ch} channels")
        per_channel = True
    if not np.all(np.isfinite(scales)) or np.any(scales <= 0):
        raise Unsupported(f"weight {node.name} has a non-positive or non-finite scale")
    return Weight(data.detach().numpy().astype(np.int8), scales, per_channel, [node])


def bias(node, consumer: Node, cc, s_in: float, s_w: np.ndarray) -> np.ndarray | None:
    """int32 bias at scale s_in * s_w[c] (None if the op has no bias).

    A float bias (XNNPACK's quantizer leaves it float) is quantized here; an
    int32 bias that was quantized by the quantizer is used as is when its
    scale is the one ESP-NN applies, else re-quantized from its real value.
    """
    if node is None:
        return None
    bias_scale = np.float64(f32(s_in)) * s_w
    if isinstance(node, Node) and op_name(node) in (DQ_PER_TENSOR, DQ_PER_CHANNEL) \
            and node.op == "call_function":
        data = cc.constants.tensor(node.args[0])
        if data is None or data.dtype != torch.int32:
            raise Unsupported(f"bias {node.name} of {consumer.name} is not an int32 constant")
        if op_name(node) == DQ_PER_TENSOR:
            scale = np.full(data.shape[0], float(node.args[1]))
            zp = np.full(data.shape[0], int(node.args[2]))
        else:
            st, zt = cc.constants.tensor(node.args[1]), cc.constants.tensor(node.args[2])
            if st is None or zt is None:
                raise Unsupported(f"bias {node.name}: scales are not constants")
            scale, zp = st.double().numpy(), zt.numpy()
        q = data.numpy().astype(np.int64)
        if np.any((q <= INT32_MIN) | (q >= INT32_MAX)):
            # convert_pt2e clamps (and, from float32, may even wrap) a bias that
            # does not fit int32 at scale s_in * s_w: the quantized model is
            # already wrong there, and the int32 accumulator would overflow.
            raise Unsupported(f"bias {node.name} of {consumer.name} is at the int32 limit: the float bias "
                              "does not fit int32 at scale input x weight (increase the input or weight scale)")
        if np.all(zp == 0) and np.allclose(scale, bias_scale, rtol=1e-6, atol=0):
            return q.astype(np.int32)
        real = (q - zp) * scale
    else:
        t = cc.constants.tensor(node)
        if t is None:
            raise Unsupported(f"bias of {consumer.name} is not a constant")
        if not t.is_floating_point():
            raise Unsupported(f"bias {node.name} of {consumer.name} is {t.dtype}")
        real = t.detach().double().numpy()
    if real.shape != bias_scale.shape:
        raise Unsupported(f"bias of {consumer.name} has shape {real.shape}, expected {bias_scale.shape}")
    q = np.round(real / bias_scale)
    if np.any(np.abs(q) > 2**31 - 1):
        raise Unsupported(f"bias of {consumer.name} does not fit int32 at scale input x weight")
    return q.astype(np.int32)


def clamp_bounds(node: Node) -> tuple[float | None, float | None]:
    """Real-valued (min, max) of a clamp-like op; None = unbounded."""
    name = op_name(node)
    if name == "aten.relu.default":
        lo, hi = 0.0, None
    elif name == "aten.relu6.default":
        lo, hi = 0.0, 6.0
    elif name == "aten.hardtanh.default":
        lo, hi = arg(node, 1, "min_val", -1.0), arg(node, 2, "max_val", 1.0)
    elif name == "aten.clamp.default":
        lo, hi = arg(node, 1, "min"), arg(node, 2, "max")
    else:
        raise Unsupported(f"{name} is not a clamp")
    for v in (lo, hi):
        if v is not None and not isinstance(v, (int, float)):
            raise Unsupported(f"{node.name}: clamp bound {v!r} is not a number")
    return (None if lo is None else float(lo)), (None if hi is None else float(hi))


@dataclass
class OutputSpec:
    """Where an int8 op writes: the quantize node that defines its output, the
    int8 clamp (fused activations and the quantize's own range), and the nodes
    between the op and that quantize, which the op's lowering absorbs."""

    q_node: Node
    qparams: QParams
    act_min: int
    act_max: int
    absorbed: list[Node]

    @property
    def nodes(self) -> list[Node]:
        return self.absorbed + [self.q_node]


def output_spec(node: Node, cc, *, fuse_activation: bool = True) -> OutputSpec:
    """Follows `node`'s output to the quantize node that gives it int8 form.

    Clamp ops (relu, relu6, hardtanh, clamp) are folded into the int8 range,
    either directly (op -> relu -> q) or through a quantize/dequantize pair
    with the same parameters (op -> q -> dq -> hardtanh -> q'), which is how
    shared-qparam quantizers annotate a standalone activation: clamping the
    int8 value reproduces it exactly.
    """
    absorbed: list[Node] = []
    lo: float | None = None
    hi: float | None = None
    cur = node
    while True:
        user = single_user(cur)
        if user is None:
            raise Unsupported(f"output of {cur.name} has {len(cur.users)} users; ESP-NN needs it to feed "
                              "exactly one quantize node")
        if is_clamp(user) and fuse_activation:
            a, b = clamp_bounds(user)
            lo = a if lo is None else (lo if a is None else max(lo, a))
            hi = b if hi is None else (hi if b is None else min(hi, b))
            absorbed.append(user)
            cur = user
            continue
        if not is_q(user):
            if is_clamp(user):
                raise Unsupported(f"{op_name(node)} cannot absorb {user.name} ({op_name(user)})")
            raise Unsupported(f"output of {cur.name} feeds {user.name} ({op_name(user)}), not a quantize node; "
                              "the output is not quantized")
        qp = q_params(user)
        dq = single_user(user)
        act = single_user(dq) if dq is not None and is_dq(dq) else None
        if (fuse_activation and act is not None and is_clamp(act) and dq_params(dq).same(qp)
                and cc.in_partition(dq) and cc.in_partition(user)):
            nxt = single_user(act)
            if nxt is not None and is_q(nxt) and q_params(nxt).same(qp):
                absorbed += [user, dq]
                cur = dq
                continue
        act_min, act_max = qp.qmin, qp.qmax
        if lo is not None:
            act_min = max(act_min, qp.quantize_bound(lo))
        if hi is not None:
            act_max = min(act_max, qp.quantize_bound(hi))
        if act_min > act_max:
            raise Unsupported(f"clamp [{lo}, {hi}] of {node.name} is empty at output scale {qp.scale}")
        return OutputSpec(user, qp, act_min, act_max, absorbed)


def absorbing_producer(node: Node) -> Node | None:
    """For a clamp op: the op whose output_spec might absorb it (walking back
    through other clamps and same-parameter q/dq pairs), or None."""
    cur = node
    while True:
        src = cur.args[0] if cur.args else None
        if not isinstance(src, Node) or src.op != "call_function":
            return None
        if is_clamp(src):
            cur = src
            continue
        if is_dq(src) and isinstance(src.args[0], Node) and is_q(src.args[0]):
            cur = src.args[0]
            continue
        return src
