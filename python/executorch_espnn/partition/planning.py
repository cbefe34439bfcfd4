"""Partition planning: propose, split to the runtime limits, trial-lower.

1. CapabilityBasedPartitioner groups the supported nodes into convex
   partitions.
2. A partition without a compute op (only quantize/dequantize/reshape) is
   left on the CPU: delegating it would only add conversions.
3. Each partition is lowered exactly as EspNNBackend.preprocess will lower it
   and checked by the native parser. If it exceeds a runtime limit (tensors,
   ops, graph inputs/outputs) or the parser refuses it as a whole (no op
   named, e.g. its arena), it is split in two along a topological order of
   its units (see _units) and each half is tried again: never a failure for
   size. If lowering or the parser rejects it, the node at fault (or every
   compute node when the fault has no node) is excluded with the message as
   its reason, and planning starts over with that node on the CPU.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from torch.fx import GraphModule, Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

from ..compile_spec import CompileOptions
from ..lowering.graph import ConstantSource, Subgraph, single_user
from ..lowering.lower import LoweredProgram, LoweringError, ParserRejection, TooLarge, lower_subgraph
from ..lowering.quant import is_clamp, is_dq, is_q
from .support import EspNNOperatorSupport, SupportAnalysis

NO_COMPUTE = "its partition would hold no compute op (only quantize/dequantize/shape ops)"


@dataclass
class Plan:
    partitions: list[list[Node]]  # graph order inside, ordered by first node
    programs: list[LoweredProgram]
    reasons: dict[Node, str] = field(default_factory=dict)  # every call_function node left on the CPU

    def delegated(self) -> set[Node]:
        return {n for p in self.partitions for n in p}


class _Rejected(Exception):
    def __init__(self, nodes: list[Node], reason: str):
        super().__init__(reason)
        self.nodes, self.reason = nodes, reason


def plan_partitions(graph_module: GraphModule, constants: ConstantSource, options: CompileOptions) -> Plan:
    order = {n: i for i, n in enumerate(graph_module.graph.nodes)}
    excluded: dict[Node, str] = {}
    trials: dict[frozenset, object] = {}
    while True:
        analysis = SupportAnalysis(constants, options, excluded)
        proposed = CapabilityBasedPartitioner(graph_module, EspNNOperatorSupport(analysis),
                                              allows_single_node_partition=True).propose_partitions()
        groups = sorted((sorted(p.nodes, key=order.__getitem__) for p in proposed if p.nodes),
                        key=lambda g: order[g[0]])
        soft: dict[Node, str] = {}
        accepted: list[tuple[list[Node], LoweredProgram]] = []
        rejected = False
        for group in groups:
            if not any(analysis.is_compute(n) for n in group):
                soft.update((n, NO_COMPUTE) for n in group)
                continue
            try:
                accepted += _fit(group, constants, options, order, trials, analysis)
            except _Rejected as r:
                for n in r.nodes:
                    excluded[n] = r.reason
                rejected = True
        if rejected:
            continue
        delegated = {n for nodes, _ in accepted for n in nodes}
        reasons = {}
        for n in graph_module.graph.nodes:
            if n.op == "call_function" and n not in delegated:
                reasons[n] = analysis.reason(n) or soft.get(n) or "left out of every partition"
        return Plan([nodes for nodes, _ in accepted], [p for _, p in accepted], reasons)


def _fit(group, constants, options, order, trials, analysis) -> list[tuple[list[Node], LoweredProgram]]:
    key = frozenset(group)
    if key not in trials:
        try:
            trials[key] = lower_subgraph(Subgraph.from_nodes(group, constants), options)
        except LoweringError as e:
            trials[key] = e
    result = trials[key]
    if isinstance(result, LoweredProgram):
        return [(group, result)]
    if isinstance(result, TooLarge) or (isinstance(result, ParserRejection) and result.node is None):
        # Over a limit, or refused as a whole (e.g. the arena): smaller parts may pass.
        halves = _split(group, order)
        if halves is None:
            raise _Rejected([n for n in group if analysis.is_compute(n)] or group,
                            f"partition cannot be split further: {result}")
        return [fit for half in halves for fit in _fit(half, constants, options, order, trials, analysis)]
    by_name = {n.name: n for n in group}
    culprit = by_name.get(result.node) if result.node else None
    nodes = [culprit] if culprit is not None else [n for n in group if analysis.is_compute(n)] or group
    raise _Rejected(nodes, str(result))


def _units(group: list[Node]) -> list[list[Node]]:
    """Groups of nodes that must stay in one XTS3 program: everything except
    a quantize node is joined with its consumers (a float or fused value cannot
    cross a partition boundary), and a quantize -> dequantize -> clamp chain
    stays with the op that absorbs it. An int8 quantize output is where a
    partition may be cut (the next part reads it as an int8 input)."""
    members = set(group)
    parent = {n: n for n in group}

    def find(n):
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in group:
        if is_q(n):
            dq = single_user(n)
            if not (dq is not None and is_dq(dq) and is_clamp(single_user(dq))):
                continue
        for u in n.users:
            if u in members:
                parent[find(u)] = find(n)
    units: dict[Node, list[Node]] = {}
    for n in group:
        units.setdefault(find(n), []).append(n)
    return list(units.values())


def _split(group: list[Node], order: dict[Node, int]) -> tuple[list[Node], list[Node]] | None:
    """Two convex halves: a prefix and suffix of a topological order of the units."""
    units = _units(group)
    if len(units) < 2:
        return None
    unit_of = {n: i for i, u in enumerate(units) for n in u}
    succ = [set() for _ in units]
    indeg = [0] * len(units)
    for i, u in enumerate(units):
        for n in u:
            for user in n.users:
                j = unit_of.get(user)
                if j is not None and j != i and j not in succ[i]:
                    succ[i].add(j)
                    indeg[j] += 1
    first = [min(order[n] for n in u) for u in units]
    heap = [(first[i], i) for i in range(len(units)) if indeg[i] == 0]
    heapq.heapify(heap)
    topo = []
    while heap:
        _, i = heapq.heappop(heap)
        topo.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (first[j], j))
    if len(topo) != len(units):
        return None  # units not convex: do not split
    total, acc, cut = len(group), 0, 1
    best = None
    for k, i in enumerate(topo[:-1], start=1):
        acc += len(units[i])
        if best is None or abs(2 * acc - total) < best:
            best, cut = abs(2 * acc - total), k
    left = {n for i in topo[:cut] for n in units[i]}
    return ([n for n in group if n in left], [n for n in group if n not in left])
