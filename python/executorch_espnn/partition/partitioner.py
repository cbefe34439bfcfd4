"""EspNNPartitioner: tags the int8 regions of an Edge program for EspNNBackend."""

from __future__ import annotations

import logging

import torch
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data

from ..compile_spec import CompileOptions
from ..lowering.backend import EspNNBackend
from ..lowering.graph import ConstantSource, RealConstants, op_name
from ..lowering.registry import preserved_ops
from .op_kinds import COMPUTE, QUANTIZE, counts_text, edge_kind
from .planning import Plan, plan_partitions

# node.meta key set on every call_function node the partitioner leaves on the
# CPU: the reason, read back by delegation_report.
CPU_REASON_KEY = "espnn_cpu_reason"

log = logging.getLogger(__name__)


class EspNNPartitioner(Partitioner):
    """Delegates what ESP-NN can run with the program's real constants.

    Args:
        compile_specs: from EspNNCompileSpecBuilder (default: target esp32s3).
        allow_cpu_fallback: True (default) leaves every node ESP-NN cannot take
            on ExecuTorch's portable CPU kernels. False raises a RuntimeError
            listing every node that would stay on the CPU, its op and why.
    """

    def __init__(self, compile_specs=None, *, allow_cpu_fallback: bool = True):
        specs = list(compile_specs or [])
        self.options = CompileOptions.from_specs(specs)  # validates the specs early
        self.delegation_spec = DelegationSpec(EspNNBackend.__name__, specs)
        self.allow_cpu_fallback = allow_cpu_fallback
        self._real = RealConstants()
        # name -> (op, reason) of each preserved ATen op (aten.linear) that
        # ops_to_not_decompose let decompose because it stays on the CPU: the
        # ops it becomes (permute, addmm) are reported with that reason.
        self._decomposed: dict[str, tuple[str, str]] = {}
        super().__init__()

    def plan(self, exported_program) -> Plan:
        constants = ConstantSource(exported_program, real=self._real)
        return plan_partitions(exported_program.graph_module, constants, self.options)

    def transform_for_pre_decomposition(self, exported_program):
        # ExecuTorch shows partition() a copy whose weights are FakeTensors;
        # the hooks that run before it see the real program: remember its data.
        self._real.capture(exported_program)
        return exported_program

    def partition(self, exported_program) -> PartitionResult:
        plan = self.plan(exported_program)
        for n in plan.reasons:
            src = _decomposed_from(n, self._decomposed)
            if src is not None:
                name, (op, why) = src, self._decomposed[src]
                plan.reasons[n] = f"part of {name} ({op}), decomposed because ESP-NN does not take it: {why}"
        if not self.allow_cpu_fallback:
            # What the report would list as CPU ops (op_kinds): kernel calls, not getitems or aliasing views.
            left = [n for n in plan.reasons if edge_kind(n) is not None]
            if left:
                raise RuntimeError(strict_mode_message(left, plan.reasons))
        tags = {}
        for i, nodes in enumerate(plan.partitions):
            tag = f"espnn_{i}"
            tags[tag] = self.delegation_spec
            for n in nodes:
                n.meta["delegation_tag"] = tag
        for n, reason in plan.reasons.items():
            n.meta[CPU_REASON_KEY] = reason
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def ops_to_not_decompose(self, ep):
        """Keeps aten.linear (and the other registered `preserve` ops) whole,
        but only where the node will be delegated: the filter plans the
        partitions of this very program, so an op that ends up on the CPU is
        decomposed into ops the portable kernels have."""
        self._real.capture(ep)
        names = set(preserved_ops())
        ops = [_resolve(n) for n in sorted(names)]
        cache: dict[str, set] = {}

        def keep(node: torch.fx.Node) -> bool:
            if node.op != "call_function" or op_name(node) not in names:
                return False
            if "delegated" not in cache:
                try:
                    plan = self.plan(ep)
                    cache["delegated"] = plan.delegated()
                    self._decomposed.update((n.name, (op_name(n), r)) for n, r in plan.reasons.items()
                                            if op_name(n) in names)
                except Exception as e:  # planning bugs must not break export: decompose instead
                    log.warning("EspNNPartitioner: planning for ops_to_not_decompose failed: %s", e)
                    cache["delegated"] = set()
            return node in cache["delegated"]

        return ops, keep


def _decomposed_from(node, decomposed: dict) -> str | None:
    """Name of the preserved op `node` was decomposed from, if it is in `decomposed`."""
    for src in node.meta.get("from_node") or ():
        if getattr(src, "name", None) in decomposed:
            return src.name
    return None


def _resolve(name: str):
    ns, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload)


def strict_mode_message(nodes, reasons) -> str:
    """The refusal: the count in the reports' terms (op_kinds: compute ops,
    quantize/dequantize apart), then one line per node, compute ops first."""
    quant = [n for n in nodes if edge_kind(n) == QUANTIZE]
    compute = [n for n in nodes if edge_kind(n) == COMPUTE]
    lines = [f"EspNNPartitioner(allow_cpu_fallback=False): {counts_text(len(compute), len(quant), 'op')} "
             "would run on the CPU:"]
    for n in compute + quant:
        lines.append(f"  {n.name} ({op_name(n)}): {reasons[n]}")
    lines.append("Change or remove these ops, quantize them, or allow CPU fallback.")
    return "\n".join(lines)
