"""Which nodes ESP-NN takes: the registry's checks, memoized per graph.

Some decisions depend on others (a fused relu is delegated iff its producer
is; a weight's dequantize iff all its consumers are), so checks ask
``cc.in_partition(other)``, which lands back here.
"""

from __future__ import annotations

from torch.fx import Node
from torch.fx.passes.operator_support import OperatorSupportBase

from ..compile_spec import CompileOptions
from ..lowering.context import CheckContext
from ..lowering.graph import ConstantSource
from ..lowering.registry import check_node, lookup


class SupportAnalysis:
    def __init__(self, constants: ConstantSource, options: CompileOptions, excluded: dict[Node, str] | None = None):
        self.excluded = excluded or {}
        self.cc = CheckContext(constants, self.is_supported, options)
        self._reasons: dict[Node, str | None] = {}
        self._active: set[Node] = set()

    def reason(self, node: Node) -> str | None:
        """None if ESP-NN takes the node, else why not."""
        if node in self._reasons:
            return self._reasons[node]
        if node.op != "call_function":
            return f"{node.op} node"
        if node in self.excluded:
            r = self.excluded[node]
        elif node in self._active:
            return "circular support dependency"
        else:
            self._active.add(node)
            try:
                r = check_node(node, self.cc)
            except (ValueError, ArithmeticError) as e:
                # A parameter derivation that fails for these quantization
                # parameters (e.g. softmax_params for an input scale below
                # 2^-26) must not abort the export: the node stays on the CPU
                # with the error as its reason, as lower.build() does when a
                # lowering raises ValueError.
                r = f"ESP-NN parameters cannot be derived for this node: {type(e).__name__}: {e}"
            finally:
                self._active.discard(node)
        self._reasons[node] = r
        return r

    def is_supported(self, node: Node) -> bool:
        return self.reason(node) is None

    @staticmethod
    def is_compute(node: Node) -> bool:
        entry = lookup(node)
        return entry is not None and entry.compute


class EspNNOperatorSupport(OperatorSupportBase):
    def __init__(self, analysis: SupportAnalysis):
        super().__init__()
        self.analysis = analysis

    def is_node_supported(self, submodules, node: Node) -> bool:
        return self.analysis.is_supported(node)
