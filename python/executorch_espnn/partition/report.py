"""delegation_report: what runs on ESP-NN and what stays on the CPU, per method.

Two sources, one shape:

* ``delegation_report(edge_manager)`` reads the lowered graphs themselves
  (executorch_call_delegate nodes and the call_function nodes left beside
  them), so it reflects exactly the program that will be serialized, with the
  partitioner's reason for every op left on the CPU;
* ``pte_report(pte_bytes)`` reads a serialized ``.pte`` with ExecuTorch's own
  flatbuffer deserializer: delegate calls and CPU kernel calls in execution
  order, and ExecuTorch's planned memory. Reasons are not stored in a .pte.

Each ESP-NN partition carries its payload's figures (``PayloadSummary``): the
native parser's summary and ``executorch_espnn.analysis.payload_metrics``
(arena, scratch, MACs, ESP32-S3 SIMD share) and the arena timeline.
``DelegationReport.to_dict()`` is the ``methods`` object of the CLI's JSON
report (docs/report-schema.json).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field

from executorch.exir._serialize._program import deserialize_pte_binary

from .. import _native
from ..analysis import arena_timeline, payload_metrics
from ..compile_spec import CompileOptions
from ..lowering.graph import ConstantSource, op_name
from ..memory.schedule_search import payload_schedule
from ..pte_check import check_pte
from .op_kinds import COMPUTE, QUANTIZE, counts_text, edge_kind, edge_name_kind, kernel_kind, xts3_kind
from .partitioner import CPU_REASON_KEY
from .support import SupportAnalysis

BACKEND_ID = "EspNNBackend"


@dataclass
class PayloadSummary:
    """One ESP-NN payload, as the device parser and the static analysis see it."""

    format_version: int
    num_ops: int
    num_tensors: int
    num_inputs: int  # graph inputs of the payload
    num_outputs: int
    xts3_ops: dict[str, int]  # XTS3 opcode -> count
    arena_bytes: int  # activation arena the payload plans (allocated at init)
    arena_lower_bound: int  # no accepted plan of this op order (and these fused regions) is smaller
    arena_layer_bound: int  # the same for a layer-by-layer plan of this op order (no fused regions)
    schedule: str  # one line: layer-by-layer, or the fused regions and their cost
    fused_regions: list[dict]  # first_op, num_ops, band_rows, in_place of each fused region
    scratch_bytes: int  # ESP-NN scratch of this build (0 for the host's ANSI kernels)
    persistent_bytes: int  # the fused regions' descriptions Interpreter::Init keeps (build-independent)
    macs: int
    s3_simd_macs: int  # MACs on ESP-NN's ESP32-S3 SIMD paths
    target: str | None  # the "target" compile spec (None: not given, the runtime's default esp32s3)
    op_metrics: list[dict] = field(default_factory=list)  # per XTS3 op: macs, SIMD path, kernel, reason
    arena_timeline: list[dict] = field(default_factory=list)  # per op step: live bytes, plan bytes


@dataclass
class PartitionInfo:
    index: int
    backend: str
    ops: dict[str, int]  # edge ops by type (from a .pte: the payload's XTS3 ops)
    num_inputs: int
    num_outputs: int
    payload_bytes: int
    payload: PayloadSummary | None = None  # EspNNBackend partitions only

    def op_kinds(self) -> dict[str, Counter]:
        """{kind: Counter(op -> count)} by op_kinds: the payload's XTS3 ops
        (the same in an Edge program and its .pte), else the ops by name."""
        out = {COMPUTE: Counter(), QUANTIZE: Counter()}
        ops, kind_of = (self.payload.xts3_ops, xts3_kind) if self.payload else (self.ops, edge_name_kind)
        for op, n in ops.items():
            kind = kind_of(op)
            if kind is not None:
                out[kind][op] += n
        return out

    def to_dict(self) -> dict:
        kinds = self.op_kinds()
        return {**asdict(self), "num_delegated_ops": sum(kinds[COMPUTE].values()),
                "num_delegated_quant_ops": sum(kinds[QUANTIZE].values())}


@dataclass
class CpuOp:
    """A kernel call outside the delegates (op_kinds: getitem and aliasing views are none)."""

    node: str
    op: str
    reason: str | None  # None in a report read from a .pte (reasons are not serialized)
    kind: str = COMPUTE  # op_kinds.COMPUTE, or QUANTIZE (counted apart)
    # The reason with node names replaced by <node>: what groups the ops (cpu_op_groups).
    reason_pattern: str | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {"node": self.node, "op": self.op, "reason": self.reason, "kind": self.kind}


@dataclass
class MethodReport:
    partitions: list[PartitionInfo] = field(default_factory=list)
    cpu_ops: list[CpuOp] = field(default_factory=list)
    planned_memory_bytes: int | None = None  # ExecuTorch's memory plan (CPU-side tensors); from a .pte

    @property
    def delegated_ops(self) -> dict[str, int]:
        """The partitions' ops by type, summed as they are (Edge ops with
        their quantize/dequantize nodes; from a .pte, XTS3 ops). The reports
        count delegated_compute_ops instead."""
        total: Counter = Counter()
        for p in self.partitions:
            total.update(p.ops)
        return dict(sorted(total.items()))

    def _delegated_kinds(self) -> dict[str, Counter]:
        """{kind: Counter(op -> count)} summed over the partitions."""
        out = {COMPUTE: Counter(), QUANTIZE: Counter()}
        for p in self.partitions:
            for kind, ops in p.op_kinds().items():
                out[kind].update(ops)
        return out

    @property
    def delegated_compute_ops(self) -> dict[str, int]:
        """Delegated ops by type (op_kinds), quantize/dequantize apart."""
        return dict(sorted(self._delegated_kinds()[COMPUTE].items()))

    @property
    def num_delegated_quant_ops(self) -> int:
        return sum(self._delegated_kinds()[QUANTIZE].values())

    def num_cpu(self, kind: str) -> int:
        return sum(c.kind == kind for c in self.cpu_ops)

    def cpu_op_groups(self) -> list[dict]:
        """The CPU ops grouped by (op, reason with node names generalized),
        largest group first: a model with a thousand CPU ops has a handful
        of causes."""
        groups: dict[tuple, dict] = {}
        for c in self.cpu_ops:
            g = groups.setdefault((c.op, c.reason_pattern), {"op": c.op, "reason": c.reason_pattern, "kind": c.kind,
                                                             "count": 0, "first_node": c.node})
            g["count"] += 1
        return sorted(groups.values(), key=lambda g: -g["count"])  # stable: first seen first among equals

    def totals(self) -> dict:
        """Sums over ESP-NN partitions: payload bytes and MACs add up; the
        arenas of all partitions are allocated together at method load, so
        they add up too; ESP-NN scratch is per partition (largest shown)."""
        pay = [p.payload for p in self.partitions if p.payload is not None]
        return {"payload_bytes": sum(p.payload_bytes for p in self.partitions),
                "arena_bytes": sum(s.arena_bytes for s in pay),
                "max_scratch_bytes": max((s.scratch_bytes for s in pay), default=0),
                "macs": sum(s.macs for s in pay),
                "s3_simd_macs": sum(s.s3_simd_macs for s in pay)}


@dataclass
class DelegationReport:
    methods: dict[str, MethodReport]

    def to_dict(self) -> dict:
        return {name: {"partitions": [p.to_dict() for p in m.partitions],
                       "delegated_ops": m.delegated_compute_ops,
                       "num_delegated_ops": sum(m.delegated_compute_ops.values()),
                       "num_delegated_quant_ops": m.num_delegated_quant_ops,
                       "cpu_ops": [c.to_dict() for c in m.cpu_ops],
                       "cpu_op_groups": m.cpu_op_groups(),
                       "num_cpu_ops": m.num_cpu(COMPUTE),
                       "num_cpu_quant_ops": m.num_cpu(QUANTIZE),
                       "planned_memory_bytes": m.planned_memory_bytes,
                       "totals": m.totals()}
                for name, m in self.methods.items()}

    def __str__(self) -> str:
        lines = []
        for name, m in self.methods.items():
            ops = m.delegated_compute_ops
            lines.append(f"method {name}: {len(m.partitions)} partition(s), "
                         f"{counts_text(sum(ops.values()), m.num_delegated_quant_ops, 'delegated op')}, "
                         f"{counts_text(m.num_cpu(COMPUTE), m.num_cpu(QUANTIZE), 'CPU op')}")
            for p in m.partitions:
                lines.append(f"  partition {p.index} [{p.backend}] {p.num_inputs} in / {p.num_outputs} out, "
                             f"{p.payload_bytes} bytes")
            if ops:
                width = max(len(op) for op in ops)
                lines.append(f"  {'delegated op'.ljust(width)}  count")
                lines += [f"  {op.ljust(width)}  {n}" for op, n in ops.items()]
            groups = m.cpu_op_groups()
            if groups:
                wo = max(len("CPU op"), *(len(g["op"]) for g in groups))
                lines.append(f"  count  {'CPU op'.ljust(wo)}  reason")
                lines += [f"  {g['count']:5d}  {g['op'].ljust(wo)}  {g['reason'] or '-'}" for g in groups]
        return "\n".join(lines)


def _target(compile_specs) -> str | None:
    for spec in compile_specs or ():
        if spec.key == "target":
            return bytes(spec.value).decode("ascii", "replace")
    return None


def payload_summary(blob: bytes, compile_specs=()) -> PayloadSummary:
    """Parses `blob` with the device parser (raises ValueError with the
    parser's message if it is rejected) and adds the static analysis."""

    s = _native.parse(bytes(blob))
    metrics = payload_metrics(s)
    return PayloadSummary(
        format_version=s["version"], num_ops=len(s["ops"]), num_tensors=len(s["tensors"]),
        num_inputs=len(s["inputs"]), num_outputs=len(s["outputs"]),
        xts3_ops=dict(sorted(Counter(op["op"] for op in s["ops"]).items())),
        arena_bytes=metrics.arena_bytes, arena_lower_bound=metrics.arena_lower_bound, **payload_schedule(blob),
        scratch_bytes=metrics.scratch_bytes, persistent_bytes=_native.Program(bytes(blob)).persistent_bytes,
        macs=metrics.macs, s3_simd_macs=metrics.s3_simd_macs,
        target=_target(compile_specs),
        op_metrics=[asdict(o) for o in metrics.ops],
        arena_timeline=[{"index": st.index, "op": st.op, "live_bytes": st.live_bytes, "plan_bytes": st.plan_bytes}
                        for st in arena_timeline(s)])


def _is_delegate_call(node) -> bool:
    return node.op == "call_function" and getattr(node.target, "__name__", "") == "executorch_call_delegate"


def method_report(ep, *, payloads: bool = True) -> MethodReport:

    gm = ep.graph_module
    if any(_is_memory_planning_op(n) for n in gm.graph.nodes):
        # to_executorch() rewrites the manager's programs in place (out variants,
        # memory.alloc nodes): a report read from them would list its allocations
        # as CPU ops and lose the partitioner's reasons.
        raise ValueError("delegation_report() reads the edge programs before serialization, but "
                         "to_executorch() has already rewritten this EdgeProgramManager in place; call "
                         "delegation_report(edge) before edge.to_executorch(), or use "
                         "pte_report(executorch_program.buffer) for the serialized program")
    report = MethodReport()
    analysis = SupportAnalysis(ConstantSource(ep), CompileOptions())
    pattern = _name_generalizer(gm.graph)
    for node in gm.graph.nodes:
        if _is_delegate_call(node):
            lowered = getattr(gm, node.args[0].target)
            inner = lowered.original_module.graph_module.graph
            ops = Counter(op_name(n) for n in inner.nodes if n.op == "call_function")
            out = inner.output_node().args[0]
            payload = (payload_summary(lowered.processed_bytes, lowered.compile_specs)
                       if payloads and lowered.backend_id == BACKEND_ID else None)
            report.partitions.append(PartitionInfo(
                len(report.partitions), lowered.backend_id, dict(sorted(ops.items())), len(node.args) - 1,
                len(out) if isinstance(out, (list, tuple)) else 1, len(lowered.processed_bytes), payload))
        elif node.op == "call_function":
            kind = edge_kind(node)
            if kind is None:  # no kernel call: getitem, a view ExecuTorch aliases
                continue
            # The partitioner's verdict (same checks, on the graph it partitioned) when
            # the node carries it; else the checks again, on this graph.
            reason = node.meta.get(CPU_REASON_KEY) or analysis.reason(node) or "not delegated"
            report.cpu_ops.append(CpuOp(node.name, op_name(node), reason, kind, pattern(reason)))
    return report


_NAME_TOKEN = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?!\w|\.\w)")


def _name_generalizer(graph):
    """reason -> the reason with every node name in it replaced by <node>:
    the names of this graph's nodes and of the nodes they come from (a
    decomposed aten.linear is named in its parts' reasons). Plain words
    (a placeholder called ``x`` or ``input``) stay: only names with an
    underscore or a digit are replaced."""
    names = set()

    def add(sources):
        for src in sources or ():
            names.add(getattr(src, "name", None))
            add(getattr(src, "from_node", None))

    for n in graph.nodes:
        names.add(n.name)
        add(n.meta.get("from_node"))
    names = {x for x in names if isinstance(x, str) and any(c == "_" or c.isdigit() for c in x)}

    def generalize(reason: str | None) -> str | None:
        if reason is None:
            return None
        return _NAME_TOKEN.sub(lambda m: "<node>" if m.group(0) in names else m.group(0), reason)

    return generalize


def _is_memory_planning_op(node) -> bool:
    return node.op == "call_function" and getattr(node.target, "__module__", "") == "executorch.exir.memory"


def delegation_report(edge_manager, *, payloads: bool = True) -> DelegationReport:
    """Per method of an EdgeProgramManager (e.g. from to_espnn_edge): the
    partitions (backend, ops by type, I/O count, payload size and, with
    `payloads`, each ESP-NN payload's summary) and every op left on the CPU
    with the reason. ``print(report)`` gives a table, ``report.to_dict()`` a dict.
    Call it before ``edge_manager.to_executorch()``, which rewrites the programs
    in place (ValueError after); ``pte_report`` reads the serialized program."""
    return DelegationReport({name: method_report(edge_manager.exported_program(name), payloads=payloads)
                             for name in edge_manager.methods})


def pte_program(pte: bytes):
    """The ``executorch.exir.schema.Program`` of a .pte, delegate payloads
    inlined (ExecuTorch's deserializer). Raises ValueError for bytes that are
    not a .pte."""

    data = bytes(pte)
    if len(data) < 8 or data[4:6] != b"ET":
        raise ValueError("not an ExecuTorch program (no 'ET' flatbuffer identifier at byte 4)")
    check_pte(data)  # the device's check, before any reader trusts the delegate entries
    try:
        return deserialize_pte_binary(data).program
    except Exception as e:  # the flatbuffer reader's errors are of many types
        raise ValueError(f"cannot deserialize the program: {type(e).__name__}: {e}") from e


def pte_payloads(pte: bytes, method: str | None = None) -> list[tuple[str, int, str, bytes]]:
    """(method, delegate index, backend id, payload bytes) of every delegate in a .pte."""
    program = pte_program(pte)
    out = []
    for plan in program.execution_plan:
        if method is not None and plan.name != method:
            continue
        for i, d in enumerate(plan.delegates):
            out.append((plan.name, i, d.id, bytes(program.backend_delegate_data[d.processed.index].data)))
    return out


def pte_report(pte: bytes) -> DelegationReport:
    """The delegation report of a serialized program: per method, the
    delegate calls (ESP-NN payloads parsed and analysed) and the CPU kernel
    calls, in execution order, and ExecuTorch's planned memory."""
    program = pte_program(pte)
    methods = {}
    for plan in program.execution_plan:
        report = MethodReport(planned_memory_bytes=sum(plan.non_const_buffer_sizes))
        kernel_calls = 0
        for chain in plan.chains:
            for instr in chain.instructions:
                kind = type(instr.instr_args).__name__
                if kind == "DelegateCall":
                    d = plan.delegates[instr.instr_args.delegate_index]
                    blob = bytes(program.backend_delegate_data[d.processed.index].data)
                    payload = payload_summary(blob, d.compile_specs) if d.id == BACKEND_ID else None
                    # DelegateCall args are inputs and outputs together; the payload tells them apart.
                    n_args = len(instr.instr_args.args)
                    n_in = payload.num_inputs if payload else n_args
                    report.partitions.append(PartitionInfo(
                        len(report.partitions), d.id, payload.xts3_ops if payload else {},
                        n_in, n_args - n_in, len(blob), payload))
                elif kind == "KernelCall":
                    name = _kernel_name(plan.operators[instr.instr_args.op_index])
                    report.cpu_ops.append(CpuOp(f"kernel_call_{kernel_calls}", name, None, kernel_kind(name)))
                    kernel_calls += 1
        methods[plan.name] = report
    return DelegationReport(methods)


def _kernel_name(op) -> str:
    """``aten::add.out`` -> ``aten.add.out`` (the edge report's spelling)."""
    name = op.name.replace("::", ".")
    return f"{name}.{op.overload}" if op.overload else name
