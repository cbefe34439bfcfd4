"""Check and lowering contexts.

``CheckContext`` is what a check may look at: the program's real constants,
the runtime limits, the compile options, and ``in_partition`` (whether
another node is delegated: the partitioner's decision while partitioning,
membership of the subgraph while lowering).

``LowerContext`` adds the XTS3 writer and the node -> Value map, with the
layout and quantization conversions every op lowering needs (so that no op
lowering writes its own TRANSPOSE/RESHAPE/REQUANTIZE logic).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np
import torch
from torch.fx import Node

from ..compile_spec import CompileOptions
from ..quant_params import lut_from_function, single_rounding_multiplier
from ..xts3_writer import Xts3Writer
from .graph import ConstantSource, Subgraph, Unsupported, dtype_of, op_name, static_shape
from . import limits as _limits
from .quant import OutputSpec, QParams, dq_params, f32, is_dq
from .values import CONTIG, Value, layout_perm, physical_shape, same_bytes, transpose_perm

MAX_RANK = 5


class CheckContext:
    def __init__(self, constants: ConstantSource, member: Callable[[Node], bool],
                 options: CompileOptions | None = None, limits: dict | None = None):
        self.constants = constants
        self._member = member
        self.options = options or CompileOptions()
        self.limits = limits if limits is not None else _limits.runtime_limits()

    def in_partition(self, node: Node) -> bool:
        return self._member(node)


class LowerContext(CheckContext):
    def __init__(self, subgraph: Subgraph, options: CompileOptions | None = None):
        super().__init__(subgraph.constants, subgraph.__contains__, options)
        self.subgraph = subgraph
        self.writer = Xts3Writer()
        self.values: dict[Node, Value] = {}
        self.done: set[Node] = set()
        self.op_nodes: list[str] = []  # fx node lowered into each XTS3 op, by op index
        self.num_tensors = 0
        self.current: Node | None = None
        self._layout_cache: dict[tuple, Value] = {}
        self._dims_cache: dict[tuple, int] = {}
        # (id of the array, layout, dims) -> (tensor index, the array). The
        # entry keeps the array alive: a freed temporary's id can be reused by
        # the next array, which would otherwise get the first one's tensor.
        self._const_cache: dict[tuple, tuple[int, np.ndarray]] = {}
        self._negated: dict[tuple, Value] = {}

    # -- writer ----------------------------------------------------------------
    def new_tensor(self, dims: Sequence[int], dtype: str = "INT8", qparams: QParams | None = None) -> int:
        if len(dims) > MAX_RANK:
            raise Unsupported(f"rank {len(dims)} exceeds XTS3's {MAX_RANK}")
        self.num_tensors += 1
        if qparams is None:
            return self.writer.tensor(list(dims), dtype)
        return self.writer.tensor(list(dims), dtype, scale=qparams.scale, zero_point=qparams.zero_point)

    def constant(self, array: np.ndarray, qparams: QParams | None = None) -> int:
        self.num_tensors += 1
        if qparams is None:
            return self.writer.constant(array)
        return self.writer.constant(array, scale=qparams.scale, zero_point=qparams.zero_point)

    def emit(self, name: str, inputs, outputs, **params) -> int:
        node = self.current
        handle = node.meta.get("debug_handle", 0) if node is not None else 0
        self.op_nodes.append(node.name if node is not None else "")
        return self.writer.op(name, inputs, outputs, debug_handle=handle if isinstance(handle, int) else 0,
                              **params)

    def new_value(self, shape: Sequence[int], qparams: QParams | None, layout: str = CONTIG, *,
                  dims: Sequence[int] | None = None, dtype: str = "INT8") -> Value:
        shape = tuple(shape)
        dims = tuple(dims) if dims is not None else physical_shape(shape, layout)
        return Value(self.new_tensor(dims, dtype, qparams), shape, dtype, qparams, layout, dims)

    # -- values ----------------------------------------------------------------
    def set_value(self, node: Node, value: Value) -> None:
        self.values[node] = value

    def value(self, node: Node) -> Value:
        v = self.values.get(node)
        if v is None:
            if is_dq(node) and self.constants.is_constant(node.args[0]):
                return self._constant_value(node)
            raise Unsupported(f"{node.name} ({op_name(node) if node.op == 'call_function' else node.op}) "
                              "has no int8 value inside the partition")
        return v

    def _constant_value(self, dq: Node) -> Value:
        qp = dq_params(dq)
        data = self.constants.tensor(dq.args[0])
        if data.dtype != torch.int8:
            raise Unsupported(f"constant {dq.args[0].name} is {data.dtype}, not int8")
        arr = data.detach().numpy().astype(np.int8)
        v = Value(None, tuple(arr.shape) or (1,), "INT8", qp, CONTIG, None, arr.reshape(tuple(arr.shape) or (1,)))
        self.values[dq] = v
        return v

    def input(self, node: Node, *, layout: str | None = None) -> Value:
        """The int8 Value of an op input (a dequantize node), in `layout` if given."""
        v = self.value(node)
        if v.dtype != "INT8":
            raise Unsupported(f"input {node.name} is {v.dtype}, not int8")
        return self.as_layout(v, layout) if layout is not None else v

    def as_layout(self, value: Value, layout: str) -> Value:
        if value.layout == layout or value.rank < 3:
            return value
        if value.is_constant or same_bytes(value.shape, value.layout, layout):
            return replace(value, layout=layout)
        key = (value.tensor, value.shape, value.layout, layout)  # a tensor may back several views
        if key not in self._layout_cache:
            src = self.tensor(value)
            out = self.new_value(value.shape, value.qparams, layout, dtype=value.dtype)
            perm = list(transpose_perm(value.rank, value.layout, layout)) + [0] * (MAX_RANK - value.rank)
            self.emit("TRANSPOSE", [src], [out.tensor], **{f"perm{i}": p for i, p in enumerate(perm)})
            self._layout_cache[key] = out
        return self._layout_cache[key]

    def tensor(self, value: Value, dims: Sequence[int] | None = None) -> int:
        """Index of a tensor holding `value`'s bytes with the declared `dims`
        (default: its physical shape); a RESHAPE when the dims differ."""
        dims = tuple(dims) if dims is not None else value.physical
        if int(np.prod(dims)) != int(np.prod(value.shape)):
            raise Unsupported(f"cannot view {value.shape} as {dims}")
        if value.is_constant:
            key = (id(value.const), value.layout, dims)
            if key not in self._const_cache:
                data = np.transpose(value.const, layout_perm(value.layout, value.rank)).reshape(dims)
                self._const_cache[key] = (self.constant(np.ascontiguousarray(data), value.qparams), value.const)
            return self._const_cache[key][0]
        if value.dims == dims:
            return value.tensor
        key = (value.tensor, dims)
        if key not in self._dims_cache:
            out = self.new_tensor(dims, value.dtype, value.qparams)
            self.emit("RESHAPE", [value.tensor], [out])
            self._dims_cache[key] = out
        return self._dims_cache[key]

    def negate(self, value: Value) -> Value:
        """-value, exactly: the int8 code q becomes -1 - q (bitwise not) in
        QParams.negated(). A constant is negated here, any other value by a LUT."""
        qp = value.qparams
        neg = qp.negated()
        key = ("const", id(value.const)) if value.is_constant else ("tensor", value.tensor, value.dims)
        if key not in self._negated:
            if value.is_constant:
                # The original stays referenced (self.values), so its id is not reused.
                self._negated[key] = replace(value, qparams=neg, const=np.invert(value.const))
            else:
                table = lut_from_function(lambda x: -x, qp.scale, qp.zero_point, neg.scale, neg.zero_point)
                out = self.new_value(value.shape, neg, value.layout, dims=value.dims)
                self.emit("LUT", [self.tensor(value, value.dims), self.constant(table)], [out.tensor])
                self._negated[key] = out
        return self._negated[key]

    def requantize(self, value: Value, qp: QParams) -> Value:
        """`value` in quantization `qp` (a REQUANTIZE op unless they are equal)."""
        if value.qparams.same(qp):
            return value
        if not qp.full_range:
            raise Unsupported(f"requantizing to the narrow range [{qp.qmin}, {qp.qmax}]")
        # One rounding (REQUANTIZE's MBQM of |x - zp| <= 255): with QuantizeMultiplier's
        # normalized multiplier a ratio in [0.25, 0.5) would round a quarter of the
        # values twice, one step above the convert_pt2e model's requantize.
        mult, shift = single_rounding_multiplier(f32(value.qparams.scale) / f32(qp.scale), 255)
        if not -31 <= shift <= 22:
            raise Unsupported(f"scale ratio {value.qparams.scale}/{qp.scale} is out of REQUANTIZE's range")
        dims = value.dims or value.physical
        src = self.tensor(value, dims)
        out = replace(value, tensor=self.new_tensor(dims, "INT8", qp), qparams=qp, dims=dims, const=None)
        self.emit("REQUANTIZE", [src], [out.tensor], input_zero_point=value.qparams.zero_point,
                  output_zero_point=qp.zero_point, mult=mult, shift=shift)
        return out

    def finish(self, node: Node, spec: OutputSpec, value: Value) -> None:
        """Registers an op's int8 output as the value of its quantize node and
        marks the nodes it absorbed (fused activations, q/dq pairs) as lowered."""
        for n in spec.nodes:
            if n not in self.subgraph:
                raise Unsupported(f"{n.name} ({op_name(n)}), part of {node.name}'s output, is outside the partition")
        self.done.update(spec.nodes)
        self.set_value(spec.q_node, value)

    # -- graph I/O ---------------------------------------------------------------
    def add_input(self, node: Node) -> int:
        shape = static_shape(node)
        dt = str(dtype_of(node))
        if dt == "torch.float32":
            v = self.new_value(shape, None, CONTIG, dtype="FLOAT32")
        elif dt == "torch.int8":
            users = [u for u in node.users if u in self.subgraph]
            if not users or not all(is_dq(u) for u in users):
                raise Unsupported(f"int8 input {node.name} is not read through dequantize nodes")
            qps = [dq_params(u) for u in users]
            if not all(q.same(qps[0]) for q in qps):
                raise Unsupported(f"int8 input {node.name} is dequantized with different parameters")
            v = self.new_value(shape, qps[0], CONTIG)
        else:
            raise Unsupported(f"input {node.name} is {dt}; partition inputs must be float32 or int8")
        self.set_value(node, v)
        return v.tensor

    def output_tensor(self, node: Node) -> int:
        """The tensor a partition output is read from: PyTorch-contiguous, in
        the node's dtype (DEQUANTIZE for float outputs of int8 values)."""
        self.current = node
        v = self.as_layout(self.value(node), CONTIG)
        t = self.tensor(v, v.shape)
        want = str(dtype_of(node))
        if want == "torch.float32" and v.dtype == "INT8":
            out = self.new_tensor(v.shape, "FLOAT32")
            self.emit("DEQUANTIZE", [t], [out], scale_f32=v.qparams.scale, zero_point=v.qparams.zero_point)
            return out
        if (want, v.dtype) not in (("torch.float32", "FLOAT32"), ("torch.int8", "INT8")):
            raise Unsupported(f"output {node.name} is {want} but its value is {v.dtype}")
        return t
