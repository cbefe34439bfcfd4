"""delegation_report: what runs on ESP-NN and what stays on the CPU, per method.

Derived from the lowered graphs themselves (executorch_call_delegate nodes and
the call_function nodes left beside them), so it reflects exactly the program
that will be serialized, for every method, however it was lowered.
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import asdict, dataclass, field

from ..compile_spec import CompileOptions
from ..lowering.graph import ConstantSource, op_name
from .partitioner import CPU_REASON_KEY
from .support import SupportAnalysis


@dataclass
class PartitionInfo:
    index: int
    backend: str
    ops: dict[str, int]
    num_inputs: int
    num_outputs: int
    payload_bytes: int


@dataclass
class CpuOp:
    node: str
    op: str
    reason: str


@dataclass
class MethodReport:
    partitions: list[PartitionInfo] = field(default_factory=list)
    cpu_ops: list[CpuOp] = field(default_factory=list)

    @property
    def delegated_ops(self) -> dict[str, int]:
        total: Counter = Counter()
        for p in self.partitions:
            total.update(p.ops)
        return dict(sorted(total.items()))


@dataclass
class DelegationReport:
    methods: dict[str, MethodReport]

    def to_dict(self) -> dict:
        return {name: {"partitions": [asdict(p) for p in m.partitions],
                       "delegated_ops": m.delegated_ops,
                       "num_delegated_ops": sum(m.delegated_ops.values()),
                       "cpu_ops": [asdict(c) for c in m.cpu_ops],
                       "num_cpu_ops": len(m.cpu_ops)}
                for name, m in self.methods.items()}

    def __str__(self) -> str:
        lines = []
        for name, m in self.methods.items():
            lines.append(f"method {name}: {len(m.partitions)} partition(s), "
                         f"{sum(m.delegated_ops.values())} delegated op(s), {len(m.cpu_ops)} CPU op(s)")
            for p in m.partitions:
                lines.append(f"  partition {p.index} [{p.backend}] {p.num_inputs} in / {p.num_outputs} out, "
                             f"{p.payload_bytes} bytes")
            if m.partitions:
                width = max(len(op) for op in m.delegated_ops)
                lines.append(f"  {'delegated op'.ljust(width)}  count")
                lines += [f"  {op.ljust(width)}  {n}" for op, n in m.delegated_ops.items()]
            if m.cpu_ops:
                wn = max(len("node"), *(len(c.node) for c in m.cpu_ops))
                wo = max(len("CPU op"), *(len(c.op) for c in m.cpu_ops))
                lines.append(f"  {'node'.ljust(wn)}  {'CPU op'.ljust(wo)}  reason")
                lines += [f"  {c.node.ljust(wn)}  {c.op.ljust(wo)}  {c.reason}" for c in m.cpu_ops]
        return "\n".join(lines)


def _is_delegate_call(node) -> bool:
    return node.op == "call_function" and getattr(node.target, "__name__", "") == "executorch_call_delegate"


def method_report(ep) -> MethodReport:
    gm = ep.graph_module
    report = MethodReport()
    analysis = SupportAnalysis(ConstantSource(ep), CompileOptions())
    for node in gm.graph.nodes:
        if _is_delegate_call(node):
            lowered = getattr(gm, node.args[0].target)
            inner = lowered.original_module.graph_module.graph
            ops = Counter(op_name(n) for n in inner.nodes if n.op == "call_function")
            out = inner.output_node().args[0]
            report.partitions.append(PartitionInfo(
                len(report.partitions), lowered.backend_id, dict(sorted(ops.items())), len(node.args) - 1,
                len(out) if isinstance(out, (list, tuple)) else 1, len(lowered.processed_bytes)))
        elif node.op == "call_function":
            if node.target is operator.getitem and _is_delegate_call(node.args[0]):
                continue
            # The partitioner's verdict (same checks, on the graph it partitioned) when
            # the node carries it; else the checks again, on this graph.
            reason = node.meta.get(CPU_REASON_KEY) or analysis.reason(node) or "not delegated"
            report.cpu_ops.append(CpuOp(node.name, op_name(node), reason))
    return report


def delegation_report(edge_manager) -> DelegationReport:
    """Per method of an EdgeProgramManager (e.g. from to_espnn_edge): the
    partitions (backend, ops by type, I/O count, payload size) and every op
    left on the CPU with the reason. ``print(report)`` gives a table,
    ``report.to_dict()`` a dict."""
    return DelegationReport({name: method_report(edge_manager.exported_program(name))
                             for name in edge_manager.methods})
