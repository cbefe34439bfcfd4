"""EspNNBackend: ExecuTorch's ahead-of-time half of the delegate.

The class name is the backend id; the C++ runtime registers the same name.
"""

from __future__ import annotations

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from torch.fx import Node

from .. import _native
from ..compile_spec import CompileOptions
from .graph import Subgraph, op_name
from .lower import LoweredProgram, lower_subgraph


class EspNNBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        """Partition program -> XTS3 bytes accepted by the native parser,
        and the debug handle map the Inspector uses for the delegate's
        per-op profiling events (see ``debug_handle_map``).

        Raises LoweringError / ParserRejection (subclasses of RuntimeError)
        when the program cannot be lowered; EspNNPartitioner only proposes
        partitions that it has lowered successfully the same way.
        """
        options = CompileOptions.from_specs(compile_specs)
        program = lower_subgraph(Subgraph.from_exported_program(edge_program), options)
        return PreprocessResult(processed_bytes=program.blob,
                                debug_handle_map=debug_handle_map(edge_program, program))


def _handle(node: Node | None) -> int | None:
    h = node.meta.get("debug_handle") if node is not None else None
    return h if isinstance(h, int) and h > 0 else None


def _is_dequantize(node: Node) -> bool:
    return node.op == "call_function" and op_name(node).startswith("quantized_decomposed.dequantize")


def _nearest(node: Node, step, emitting: set[str], members: set[Node]) -> list[Node]:
    """The nodes that emitted XTS3 ops closest to `node`, walking `step`
    (inputs or users) through partition nodes that emitted none."""
    found, seen, todo = [], {node}, list(step(node))
    while todo:
        n = todo.pop(0)
        if n in seen or n not in members:
            continue
        seen.add(n)
        if n.name in emitting:
            found.append(n)
        else:
            todo.extend(step(n))
    return found


def debug_handle_map(edge_program, program: LoweredProgram) -> dict[int, tuple[int, ...]]:
    """Delegate debug identifier -> debug handles of the edge nodes it covers.

    The identifier of an XTS3 op is the debug handle written in its op record
    (read back from the blob): the ``debug_handle`` of the fx node whose
    lowering emitted it. The C++ delegate logs each op's profiling event with
    that number as its delegate debug index, and ExecuTorch's Inspector looks
    it up in this map (stored on the lowered module, then in the ETRecord).
    Ops emitted for one node (e.g. a TRANSPOSE for its input layout and the
    op itself) share the node's identifier.

    The handles are the emitting node's plus those of the partition nodes the
    lowering folded into it without an op of their own: a dequantize counts
    for the op(s) that read it (weights, bias, activation inputs); a quantize,
    a fused activation or a free view counts for the op that produced its
    input.
    """

    # A fused region's BAND_LOOP op comes from no node (it runs the ops after it).
    ops = [op for op in _native.Program(program.blob).summary()["ops"] if op["op"] != "BAND_LOOP"]
    if len(ops) != len(program.op_nodes):
        raise RuntimeError(f"the payload has {len(ops)} ops but the lowering recorded {len(program.op_nodes)}")
    graph = edge_program.graph_module.graph
    by_name = {n.name: n for n in graph.nodes}
    members = {n for n in graph.nodes if n.op == "call_function"}
    emitting = set(program.op_nodes)
    covered: dict[str, set[int]] = {name: {h} for name in emitting if (h := _handle(by_name.get(name)))}
    for node in members:
        if node.name in emitting or _handle(node) is None:
            continue
        if _is_dequantize(node):
            owners = _nearest(node, lambda n: list(n.users), emitting, members)
        else:
            owners = _nearest(node, lambda n: n.all_input_nodes, emitting, members)
        for owner in owners:
            covered.setdefault(owner.name, set()).add(_handle(node))

    mapping: dict[int, set[int]] = {}
    for op, name in zip(ops, program.op_nodes):
        mapping.setdefault(int(op["debug_handle"]), set()).update(covered.get(name, ()))
    return {key: tuple(sorted(handles)) for key, handles in mapping.items()}
