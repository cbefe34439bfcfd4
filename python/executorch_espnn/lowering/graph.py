"""fx-graph helpers shared by the checks, the lowerings and the partitioner.

The same check and lowering code runs on three kinds of graphs: the ATen
program that ``ops_to_not_decompose`` sees, the Edge program that the
partitioner tags, and the per-partition ExportedProgram that
``EspNNBackend.preprocess`` receives. Edge ops wrap the ATen
``OpOverload`` (``EdgeOpOverload._op``), so everything keys on the ATen
overload and works on all three.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx import Node


class Unsupported(Exception):
    """Raised by an analysis when ESP-NN cannot take a node; the message is the reason."""


def target_of(node: Node) -> Any:
    """The ATen OpOverload (or Python callable) a call_function node runs."""
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return t
    inner = getattr(t, "_op", None)  # executorch's EdgeOpOverload wraps the ATen overload
    return inner if isinstance(inner, torch._ops.OpOverload) else t


def op_name(node: Node) -> str:
    t = target_of(node)
    if t is operator.getitem:
        return "operator.getitem"
    if isinstance(t, torch._ops.OpOverload):
        return str(t)  # "aten.convolution.default"
    return getattr(t, "__name__", str(t))


def arg(node: Node, index: int, name: str, default: Any = None) -> Any:
    """Positional-or-keyword argument of a call (export may keep either form)."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def fake(node: Node) -> torch.Tensor:
    """node.meta['val'] as a (fake) tensor; Unsupported if absent or not a tensor."""
    val = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(val, torch.Tensor):
        raise Unsupported(f"{getattr(node, 'name', node)} has no tensor value in node.meta['val']")
    return val


def static_shape(node: Node) -> tuple[int, ...]:
    shape = fake(node).shape
    if not all(isinstance(d, int) for d in shape):
        raise Unsupported(f"{node.name} has a dynamic shape {tuple(shape)}; XTS3 graphs are static")
    return tuple(int(d) for d in shape)


def dtype_of(node: Node) -> torch.dtype:
    return fake(node).dtype


class ConstantSource:
    """Real constant tensors (weights, quantization scales, biases) of a program.

    Placeholders are resolved through the ExportedProgram's graph signature
    (parameters, buffers, lifted tensor constants); get_attr nodes through
    the graph module. No stand-in values: partitioning and lowering decide on
    the data that will be serialized. ExecuTorch hands partitioners a copy of
    the program whose state dict holds FakeTensors; `real` (a RealConstants
    captured from the real program) maps those back to the real data.
    """

    def __init__(self, exported_program=None, graph_module: torch.fx.GraphModule | None = None,
                 real: "RealConstants | None" = None):
        self._ep = exported_program
        self._gm = graph_module if graph_module is not None else getattr(exported_program, "graph_module", None)
        self._real = real

    def tensor(self, node: Any) -> torch.Tensor | None:
        if not isinstance(node, Node):
            return None
        if node.op == "get_attr" and self._gm is not None:
            obj: Any = self._gm
            for part in str(node.target).split("."):
                obj = getattr(obj, part, None)
            return obj if isinstance(obj, torch.Tensor) else None
        if node.op != "placeholder" or self._ep is None:
            return None
        sig = self._ep.graph_signature
        key = (sig.inputs_to_parameters.get(node.name) or sig.inputs_to_buffers.get(node.name)
               or sig.inputs_to_lifted_tensor_constants.get(node.name))
        if key is None:
            return None
        value = self._ep.state_dict.get(key)
        if value is None:
            value = self._ep.constants.get(key)
        if value is None:
            return None
        if is_fake(value):
            value = RealConstants.resolve(self._real, key, value)
        return value

    def is_constant(self, node: Any) -> bool:
        if not isinstance(node, Node) or node.op not in ("placeholder", "get_attr"):
            return False
        if node.op == "get_attr":
            return self.tensor(node) is not None
        if self._ep is None:
            return False
        sig = self._ep.graph_signature
        return (node.name in sig.inputs_to_parameters or node.name in sig.inputs_to_buffers
                or node.name in sig.inputs_to_lifted_tensor_constants)


def is_fake(t) -> bool:

    return isinstance(t, FakeTensor)


class RealConstants:
    """Real state-dict tensors captured from the programs ExecuTorch shows a
    partitioner's hooks (transform_for_pre_decomposition, ops_to_not_decompose),
    looked up by state-dict key when partition() sees FakeTensors."""

    def __init__(self):
        self._by_key: dict[str, torch.Tensor] = {}
        self._ambiguous: set[str] = set()

    def capture(self, exported_program) -> None:
        for items in (exported_program.state_dict.items(), exported_program.constants.items()):
            for key, value in items:
                if not isinstance(value, torch.Tensor) or is_fake(value):
                    continue
                old = self._by_key.get(key)
                if old is not None and old is not value and not (
                        old.shape == value.shape and old.dtype == value.dtype and torch.equal(old, value)):
                    self._ambiguous.add(key)
                self._by_key[key] = value

    @staticmethod
    def resolve(real: "RealConstants | None", key: str, fake: torch.Tensor) -> torch.Tensor:
        value = real._by_key.get(key) if real is not None else None
        if value is None or key in real._ambiguous or value.shape != fake.shape or value.dtype != fake.dtype:
            why = ("several programs have a different tensor under this name: use one EspNNPartitioner per method"
                   if real is not None and key in real._ambiguous else
                   "lower with to_espnn_edge or executorch.exir.to_edge_transform_and_lower, which show the "
                   "partitioner the real program")
            raise RuntimeError(f"EspNNPartitioner needs the real value of constant {key!r} but only has a "
                               f"FakeTensor; {why}")
        return value


@dataclass
class Subgraph:
    """What one XTS3 program is lowered from: a convex set of call_function
    nodes (topological order), the values entering it (non-constant, in the
    order of the program's inputs) and the values leaving it (in output order).
    """

    nodes: list[Node]
    inputs: list[Node]
    outputs: list[Node]
    constants: ConstantSource
    _members: set = field(default_factory=set, repr=False)

    def __post_init__(self):
        self._members = set(self.nodes)

    def __contains__(self, node: Node) -> bool:
        return node in self._members

    @classmethod
    def from_exported_program(cls, ep) -> "Subgraph":
        """The partition program that ExecuTorch hands to preprocess."""
        constants = ConstantSource(ep)
        graph = ep.graph_module.graph
        user_inputs = set(ep.graph_signature.user_inputs)
        inputs = [n for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs]
        nodes = [n for n in graph.nodes if n.op == "call_function"]
        out = graph.output_node()
        outs = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        outputs = [a for a in outs if isinstance(a, Node)]
        if len(outputs) != len(outs):
            raise ValueError("the partition program returns a non-tensor value")
        return cls(nodes, inputs, outputs, constants)

    @classmethod
    def from_nodes(cls, nodes: Iterable[Node], constants: ConstantSource) -> "Subgraph":
        """A candidate partition of a larger graph (used for trial lowering)."""
        members = set(nodes)
        graph_order = {n: i for i, n in enumerate(next(iter(members)).graph.nodes)} if members else {}
        ordered = sorted(members, key=graph_order.__getitem__)
        inputs: list[Node] = []
        seen = set()
        for n in ordered:
            for a in n.all_input_nodes:
                if a in members or a in seen or constants.is_constant(a):
                    continue
                seen.add(a)
                inputs.append(a)
        outputs = [n for n in ordered if any(u not in members for u in n.users)]
        return cls(ordered, inputs, outputs, constants)


def single_user(node: Node) -> Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def int_list(value: Any, n: int, what: str) -> list[int]:
    """An int or a list of ints (PyTorch's broadcasting of conv/pool params)."""
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    if len(value) == 1 and n > 1:
        value = value * n
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise Unsupported(f"{what} = {value} is not {n} integers")
    return [int(v) for v in value]


def check_kernel_dims(values: dict[str, int], limit: int) -> None:
    """ESP-NN narrows conv/pool/FC geometry to uint16."""
    for what, v in values.items():
        if v > limit:
            raise Unsupported(f"{what} = {v} exceeds ESP-NN's uint16 limit {limit}")
