"""to_espnn_oplib: a quantized program lowered to ``espnn::`` ops (operator-library mode).

The pass replaces each quantized pattern (dequantize -> op -> [clamp] ->
quantize) by the ops the delegate's own lowering emits for it: the pattern
is lowered as a one-node subgraph with ``lowering.lower.build`` (the same
per-op analysis, parameter folding and constant layout as the delegate) and
every XTS3 op of the result becomes one graph node: an ``espnn::`` op
(operators.yaml) for a compute op, ``aten.permute`` / ``aten.reshape`` for a
TRANSPOSE / RESHAPE (pure byte movement), its constants new constant
placeholders of the program. So the parameters of an op are the delegate's,
and the op runs the delegate's kernel: both modes agree byte for byte.

A pattern whose lowering needs an XTS3 op with no ``espnn::`` op (or that the
delegate cannot lower) stays as it is and runs on ExecuTorch's portable
kernels. Every ``espnn::`` op the program uses must have a C++ kernel
registered by ``executorch_espnn._et_backend``: else OplibError names it.
"""

from __future__ import annotations

import copy
import struct

import numpy as np
import torch
from executorch.backends.transforms.utils import create_constant_placeholder, delete_constant_placeholder
from executorch.exir import EdgeCompileConfig, to_edge
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.fx import Node

from .. import _native
from ..lowering.context import CheckContext
from ..lowering.graph import ConstantSource, Subgraph, Unsupported, op_name
from ..lowering.lower import LoweringError, build
from ..lowering.quant import DQ_PER_CHANNEL, DQ_PER_TENSOR, is_dq, is_q, output_spec
from ..lowering.ops.lut import FUNCTIONS as LUT_FUNCTIONS
from ..quantized_kernels import load_quantized_kernels
from ..recurrent_ops import RECURRENT_OPS, decompose_recurrent
from .operators import define_ops, op_overload, output_shape

# The aten ops whose quantized pattern this version replaces (docs/oplib.md);
# the LUT activations are the ones the delegate tabulates (lowering/ops/lut.py).
COMPUTE_OPS = frozenset({"aten.conv2d.default", "aten.convolution.default", "aten.conv_transpose2d.input",
                         "aten.linear.default", "aten.add.Tensor", "aten.mul.Tensor",
                         "aten.max_pool2d.default", "aten.avg_pool2d.default",
                         "aten.matmul.default", "aten.bmm.default", "aten.softmax.int", "aten._softmax.default",
                         "aten.mean.dim", "aten.adaptive_avg_pool2d.default", "aten.hardswish.default"}
                        | set(LUT_FUNCTIONS) | {str(op) for op in RECURRENT_OPS})

# EspNNQuantizer's nn.GRU / nn.LSTM (recurrent_ops.py): their weights are float
# constants the lowering quantizes per gate row, not dequantize nodes.
_FLOAT_WEIGHT_OPS = frozenset(str(op) for op in RECURRENT_OPS)

# Opcodes whose output shape the arguments do not fully determine:
# MEAN_HW writes [N, 1, 1, C] or its view [N, C] (the op's shape rule gives the
# first, a reshape the second); TRANSPOSE_CONV2D's output size implies
# output_padding, which is no parameter: the op's shape rule is the size
# without it, and a pattern that needs another stays on portable kernels.
_OUTPUT_VIEWS = frozenset({"MEAN_HW"})
# (GRU / LSTM write [B, T, H] for an unbatched [T, H] too: the pattern's
# output is reshaped to PyTorch's shape where it leaves, in `replace`.)
_OUTPUT_NOT_IMPLIED = frozenset({"TRANSPOSE_CONV2D"})


_NUMPY_DTYPES = {"INT8": np.int8, "INT32": np.int32, "FLOAT32": np.float32}  # XTS3 dtype -> numpy


class OplibError(RuntimeError):
    """The program cannot be lowered to the operator library as asked."""


def _opcode_to_op() -> dict[str, str]:
    return {row[0]: name for name, row in _native.OPLIB_OPS.items()}


def registered_kernels() -> frozenset[str]:
    """The ``espnn::*.out`` kernels this installation registered with ExecuTorch's runtime."""
    try:
        # lazy: the extension is optional (built only against the executorch wheel)
        from .. import _et_backend
    except ImportError:
        return frozenset()
    return frozenset(_et_backend.OPLIB_KERNELS)


def check_kernels(names) -> None:
    """Raises OplibError for an ``espnn::`` op without a registered C++ kernel."""
    have = registered_kernels()
    missing = sorted(f"espnn::{n}.out" for n in set(names) if f"espnn::{n}.out" not in have)
    if missing:
        raise OplibError(f"no C++ kernel registered for {', '.join(missing)}: the program would not load in "
                         f"ExecuTorch's runtime (executorch_espnn._et_backend registers "
                         f"{', '.join(sorted(have)) or 'none'})")


def _words(op, spec) -> list[int]:
    """The XTS3 op's parameter words, all of the espnn:: op's: a field appended
    in a later format version may be absent from the op (the writer leaves it
    out at 0, e.g. QUANTIZE's channels_last)."""
    return list(op.params) + [0] * (len(spec.params) - len(op.params))


def _zero_points(writer, op) -> tuple[int, int]:
    """The zero points of the op's input 0 and output in the lowered records
    (the arguments of an op that reads them there: GRU, LSTM)."""
    return writer._tensors[op.inputs[0]].zero_point, writer._tensors[op.outputs[0]].zero_point


class _Rewriter:
    def __init__(self, ep: ExportedProgram):
        self.ep = ep
        self.graph = ep.graph_module.graph
        self.constants = ConstantSource(ep)
        self.ops = define_ops()
        self.by_opcode = _opcode_to_op()
        self.used: set[str] = set()
        self.fake_mode = next(n.meta["val"].fake_mode for n in self.graph.nodes if n.op == "placeholder"
                              and isinstance(n.meta.get("val"), torch.Tensor))
        self._const = 0

    # -- what to replace -------------------------------------------------------
    def members(self, node: Node, compute: bool) -> list[Node] | None:
        """The nodes of `node`'s pattern, or None: nothing to replace, or a
        pattern with a 0-dim value (XTS3 tensors and the kernels' arguments
        have rank >= 1: such a pattern stays on portable kernels, as the
        delegate's partitioner leaves it)."""
        members = self._members(node, compute)
        if members is None or any(self._is_0_dim_value(n) for n in members):
            return None
        return members

    def _is_0_dim_value(self, n: Node) -> bool:
        """A 0-dim value computed at run time (a 0-dim constant, e.g. the
        scalar of x * 0.5, is folded into the op's parameters or constants)."""
        val = n.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() != 0:
            return False
        return not (is_dq(n) and self.constants.is_constant(n.args[0]))

    def _members(self, node: Node, compute: bool) -> list[Node] | None:
        """A compute op's pattern (compute=True), else a standalone quantize or
        dequantize that remained."""
        if compute:
            if is_q(node) and is_dq(node.args[0]) and not self.constants.is_constant(node.args[0].args[0]):
                return [node.args[0], node]  # int8 -> int8 with new parameters: the delegate's REQUANTIZE
            if op_name(node) not in COMPUTE_OPS:
                return None
            ins = node.all_input_nodes
            if op_name(node) in _FLOAT_WEIGHT_OPS:
                ins = [a for a in ins if not self.constants.is_constant(a)]
            if not all(op_name(a) in (DQ_PER_TENSOR, DQ_PER_CHANNEL) for a in ins):
                return None  # an input that is not dequantized: not a quantized pattern
            try:  # every node counts as a member: the pattern is what output_spec follows
                spec = output_spec(node, CheckContext(self.constants, lambda n: True))
            except Unsupported:
                return None
            return ins + [node] + spec.nodes
        if is_q(node) and str(node.args[0].meta["val"].dtype) == "torch.float32":
            return [node]  # a float value entering int8 (the model's input)
        if is_dq(node) and not self.constants.is_constant(node.args[0]):
            return [node]  # an int8 value leaving to float (the model's output, or a portable op)
        return None

    # -- rewriting -------------------------------------------------------------
    def replace(self, members: list[Node]) -> bool:
        sub = Subgraph.from_nodes(members, self.constants)
        try:
            ctx = build(sub)
        except LoweringError:
            return False
        writer = ctx.writer
        for op in writer._ops:
            if op.name not in ("TRANSPOSE", "RESHAPE") and op.name not in self.by_opcode:
                return False
            if op.name in _OUTPUT_NOT_IMPLIED and self._shape_rule(writer, op) != writer._tensors[op.outputs[0]].shape:
                return False
        values: dict[int, Node] = {ctx.values[n].tensor: n for n in sub.inputs}
        anchor = sub.outputs[0]
        with self.graph.inserting_before(anchor):
            for op in writer._ops:
                args = [self._tensor_arg(writer, t, values) for t in op.inputs]
                if op.name == "TRANSPOSE":
                    rank = len(writer._tensors[op.inputs[0]].shape)
                    node = self._call(torch.ops.aten.permute.default, (args[0], list(op.params[:rank])))
                elif op.name == "RESHAPE":
                    node = self._call(torch.ops.aten.reshape.default,
                                      (args[0], list(writer._tensors[op.outputs[0]].shape)))
                else:
                    name = self.by_opcode[op.name]
                    spec = self.ops[name]
                    params = [struct.unpack("<f", struct.pack("<i", w))[0] if n.endswith("_f32") else w
                              for n, w in zip(spec.params, _words(op, spec))]
                    zero_points = _zero_points(writer, op) if spec.zero_points else ()
                    scratch = (self._scratch(writer, op, spec, zero_points or (0, 0)),) if spec.scratch else ()
                    node = self._call(op_overload(name), tuple(args) + tuple(params) + zero_points + scratch)
                    want = writer._tensors[op.outputs[0]].shape
                    got = tuple(node.meta["val"].shape)
                    if got != want and op.name in _OUTPUT_VIEWS and np.prod(got) == np.prod(want):
                        node = self._call(torch.ops.aten.reshape.default, (node, list(want)))
                    elif got != want:  # operators.py's shape rule vs the lowering
                        raise OplibError(f"espnn::{name}: output shape {tuple(node.meta['val'].shape)} from "
                                         f"the op's arguments, {want} from the lowering of {anchor.name}")
                    self.used.add(name)
                values[op.outputs[0]] = node
            for out, t in zip(sub.outputs, writer._outputs):
                want = tuple(out.meta["val"].shape)
                if tuple(values[t].meta["val"].shape) != want:  # a GRU / LSTM's [1, T, H] for PyTorch's [T, H]
                    values[t] = self._call(torch.ops.aten.reshape.default, (values[t], list(want)))
        for out, t in zip(sub.outputs, writer._outputs):
            out.replace_all_uses_with(values[t])
        for n in reversed(members):
            if not n.users:
                self.graph.erase_node(n)
        return True

    def _shape_rule(self, writer, op) -> tuple[int, ...]:
        """The output shape operators.py gives the op's tensors and parameters."""
        spec = self.ops[self.by_opcode[op.name]]
        tensors = [None if t == _native.NO_TENSOR else torch.empty(writer._tensors[t].shape, device="meta")
                   for t in op.inputs]
        return output_shape(spec, tensors, dict(zip(spec.params, _words(op, spec))))

    def _fold_weight_dequantize(self, node: Node) -> None:
        """A per-channel weight dequantize left to portable kernels (its op
        stayed there) becomes its float result, a constant: ExecuTorch's
        runtime has no out variant of quantized_decomposed.dequantize_per_channel."""
        args = [self.constants.tensor(a) if isinstance(a, Node) else a for a in node.args]
        if any(a is None for a in args[:3]):
            return  # not all constant: left as it is
        node.replace_all_uses_with(self._constant(node.target(*args, **node.kwargs)))
        self.graph.erase_node(node)

    def _tensor_arg(self, writer, t: int, values: dict[int, Node]):
        if t == _native.NO_TENSOR:
            return None
        if t in values:
            return values[t]
        rec = writer._tensors[t]
        if rec.memory != "CONSTANT":
            raise OplibError(f"tensor {t} of the lowered pattern has no producer")
        data = torch.from_numpy(np.frombuffer(rec.data, dtype=_NUMPY_DTYPES[rec.dtype]).reshape(rec.shape).copy())
        values[t] = self._constant(data)
        return values[t]

    def _constant(self, data: torch.Tensor) -> Node:
        """A new constant placeholder of the program holding `data`."""
        first_user_input = next(n for n in self.graph.nodes if n.op == "placeholder" and n.name in
                                self.ep.graph_signature.user_inputs)
        with self.graph.inserting_before(first_user_input):
            node = create_constant_placeholder(self.ep, self.graph, f"espnn_const_{self._const}",
                                               InputKind.CONSTANT_TENSOR, data)
        self._const += 1
        return node

    def _scratch(self, writer, op, spec, zero_points: tuple[int, int]) -> Node | None:
        """The op's scratch as a buffer ExecuTorch plans (an ``aten.empty``
        that memory planning places in the method's arena), sized by the
        runtime's own rule for this call (_native.op_scratch_bytes, with the
        zero points the op takes, (0, 0) for one that takes none); None when
        it needs none."""
        def array(t):
            if t == _native.NO_TENSOR:
                return None
            rec = writer._tensors[t]
            dtype = _NUMPY_DTYPES[rec.dtype]
            if rec.memory == "CONSTANT":
                return np.frombuffer(rec.data, dtype=dtype).reshape(rec.shape)
            return np.zeros(rec.shape, dtype)  # contents are not read

        nbytes = _native.op_scratch_bytes(_native.OPCODES[op.name]["opcode"], [array(t) for t in op.inputs],
                                          spec.activations, [array(t) for t in op.outputs], op.params,
                                          zero_points=zero_points)
        if nbytes == 0:
            return None
        return self._call(torch.ops.aten.empty.memory_format, ([nbytes],), {"dtype": torch.uint8})

    def _call(self, target, args, kwargs=None) -> Node:
        node = self.graph.call_function(target, args, kwargs or {})
        with self.fake_mode:
            vals = [a.meta["val"] if isinstance(a, Node) else a for a in args]
            node.meta["val"] = target(*vals, **(kwargs or {}))
        return node

    def run(self) -> None:
        # Compute patterns first (they take their q/dq nodes), then the q/dq
        # nodes left at the program's edges or next to portable ops.
        for compute in (True, False):
            for node in list(self.graph.nodes):
                if node.graph is not self.graph or node.op != "call_function":
                    continue  # erased by an earlier replacement
                members = self.members(node, compute)
                if members:
                    self.replace(members)
                elif not compute and op_name(node) == DQ_PER_CHANNEL:
                    self._fold_weight_dequantize(node)
        self._cancel_inverse_permutes()
        self._drop_dead_constants()
        self.graph.lint()
        self.ep.graph_module.recompile()
        out = self.graph.output_node()
        for spec, arg in zip(self.ep.graph_signature.output_specs, out.args[0]):
            if isinstance(arg, Node):
                spec.arg.name = arg.name

    def _cancel_inverse_permutes(self) -> None:
        """Each pattern converts its NHWC result back to PyTorch's layout and
        the next converts it again: a permute of a permute that restores the
        original order reads the original instead."""
        permute = torch.ops.aten.permute.default
        for node in list(self.graph.nodes):
            if node.target is not permute or node.args[0].target is not permute:
                continue
            first = node.args[0]
            inner, outer = first.args[1], node.args[1]
            if all(inner[outer[i]] == i for i in range(len(outer))):
                node.replace_all_uses_with(first.args[0])
                self.graph.erase_node(node)
                if not first.users:
                    self.graph.erase_node(first)

    def _drop_dead_constants(self) -> None:
        for n in list(self.graph.nodes):
            if n.op == "placeholder" and not n.users and self.constants.is_constant(n):
                delete_constant_placeholder(self.ep, n)


def to_espnn_oplib(exported_program: ExportedProgram, *, compile_config=None):
    """Lowers a quantized ``torch.export`` program (EspNNQuantizer + convert_pt2e)
    to ``espnn::`` ops; returns the EdgeProgramManager (``.to_executorch()``).
    Importing ``executorch_espnn`` registers the kernels with the runtime."""
    ep = copy.deepcopy(exported_program)
    rewriter = _Rewriter(ep)
    rewriter.run()
    check_kernels(rewriter.used)
    # An nn.GRU / nn.LSTM the lowering could not take is PyTorch's op again,
    # which the Edge dialect decomposes into portable ops (as to_espnn_edge does).
    ep = decompose_recurrent(ep)
    load_quantized_kernels()  # q/dq left on portable kernels: their out variants, for to_executorch
    config = compile_config or EdgeCompileConfig(_check_ir_validity=False)
    return to_edge(ep, compile_config=config)
