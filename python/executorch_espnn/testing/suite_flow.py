"""The ``espnn`` flow of ExecuTorch's backend test suite.

ExecuTorch's suite (``executorch.backends.test.suite``) runs every operator
test through a ``TestFlow``: a ``Tester`` that quantizes, exports, lowers and
serializes the model, then runs the .pte and compares it with the exported
(quantized) PyTorch program. Our flow uses the same stages as a user of this
package:

- quantize: ``EspNNQuantizer`` (prepare_pt2e / calibrate on the test's inputs
  / convert_pt2e: the suite's own Quantize stage);
- lower: ``to_edge_transform_and_lower`` with ``EspNNPartitioner`` and the
  default ``EdgeCompileConfig`` (what ``to_espnn_edge`` does);
- run: ``executorch_espnn.runtime.run_pte`` (``executorch.runtime``, the C++
  EspNNBackend for delegates, the wheel's kernels for the CPU parts) instead
  of the harness's pybindings call, so what is tested is the host runtime
  this package ships.

The harness's comparison (atol 0.1, rtol 0.04 against the quantized program)
is left as the suite defines it.
"""

from __future__ import annotations

from executorch.backends.test.harness import Tester
from executorch.backends.test.harness.stages import Quantize, Serialize, StageType, ToEdgeTransformAndLower
from executorch.backends.test.suite.flow import TestFlow
from executorch.exir import EdgeCompileConfig
from torch.utils._pytree import tree_flatten

from ..partition import EspNNPartitioner
from ..quantizer import EspNNQuantizer
from ..runtime import run_pte

FLOW_NAME = "espnn"
BACKEND_NAME = "espnn"


class RuntimeSerialize(Serialize):
    """Serialize stage whose ``run_artifact`` runs the .pte through
    ``executorch.runtime`` with the C++ EspNNBackend registered."""

    def run_artifact(self, inputs):
        flat, _ = tree_flatten(inputs)
        return [t.clone() for t in run_pte(self.buffer, flat)]


def espnn_quantize_stage() -> Quantize:

    return Quantize(quantizer=EspNNQuantizer())


def espnn_lower_stage(*args, **kwargs) -> ToEdgeTransformAndLower:

    # EdgeCompileConfig() (IR validity checked), as to_espnn_edge uses, not the
    # harness default that switches the check off.
    # The stage reads `partitioners` only when `default_partitioner_cls` is set
    # (it builds [EspNNPartitioner()] from it).
    return ToEdgeTransformAndLower(default_partitioner_cls=EspNNPartitioner, edge_compile_config=EdgeCompileConfig())


def _stages(lower, serialize) -> dict:
    """The harness's stages with our quantizer, `lower` and `serialize`."""
    stages = Tester.default_stage_classes()
    stages[StageType.QUANTIZE] = espnn_quantize_stage
    stages[StageType.TO_EDGE_TRANSFORM_AND_LOWER] = lower
    stages[StageType.SERIALIZE] = serialize
    return stages


def _flow(name: str, tester, delegated: bool) -> TestFlow:
    return TestFlow(name, backend=BACKEND_NAME, tester_factory=tester, quantize=True,
                    quantize_stage_factory=espnn_quantize_stage, is_delegated=delegated)


class EspNNTester(Tester):
    def __init__(self, module, example_inputs, dynamic_shapes=None):
        super().__init__(module, example_inputs, stage_classes=_stages(espnn_lower_stage, RuntimeSerialize),
                         dynamic_shapes=dynamic_shapes)


ESPNN_TEST_FLOW = _flow(FLOW_NAME, EspNNTester, delegated=True)


# -- the operator-library flow ------------------------------------------------------------------------------------
# ``espnn_oplib``: the same quantize stage, lowering with ``to_espnn_oplib``
# (espnn:: ops, no delegate), the same runtime. Its lowering stage also lowers
# the same quantized program to the delegate; when the delegate takes the
# model and the oplib program calls nothing but espnn:: ops and layout copies
# (the ops both modes share), running the .pte also runs the delegate's .pte
# on the same inputs and fails unless the outputs are identical byte for byte.

OPLIB_FLOW_NAME = "espnn_oplib"


class OplibLower(ToEdgeTransformAndLower):
    def __init__(self, shared: dict):
        super().__init__(edge_compile_config=EdgeCompileConfig(_check_ir_validity=False))
        self.shared = shared

    def run(self, artifact, inputs=None, generate_etrecord: bool = False) -> None:
        # The flow module is imported by the plugin at pytest start; these load executorch's lowering.
        # lazy: only a case that runs in this flow needs them
        from ..oplib import to_espnn_oplib
        from ..partition import to_espnn_edge

        self.edge_dialect_program = to_espnn_oplib(artifact)
        if generate_etrecord:
            # The suite counts the ops lowered as (ops of the edge program before lowering) - (ops after), read
            # from the ETRecord that to_edge_transform_and_lower keeps: the same record of the unlowered program.
            # lazy: the devtools only when the suite asks for statistics
            from executorch.devtools.etrecord import ETRecord
            from executorch.exir import to_edge

            before = to_edge(artifact, compile_config=self.edge_compile_conf).exported_program()
            self.edge_dialect_program._etrecord = ETRecord(edge_dialect_program=before)
        try:
            self.shared["delegate_pte"] = bytes(to_espnn_edge(artifact).to_executorch().buffer)
        except Exception:  # noqa: BLE001 - the delegate's own flow reports its failures; nothing to compare
            self.shared["delegate_pte"] = None


def _compute_ops_shared(pte: bytes) -> bool:
    """Whether an oplib .pte calls only espnn:: ops and layout copies."""
    # lazy: the CLI's modules only when a case compares the two modes
    from ..cli.compile_steps import portable_compute_ops
    from ..partition.report import pte_report

    return not portable_compute_ops(pte_report(pte))


def _delegates(pte: bytes) -> int:
    # lazy: the report module only when a case compares the two modes
    from ..partition.report import pte_program

    return sum(len(plan.delegates) for plan in pte_program(pte).execution_plan)


class BitExactSerialize(RuntimeSerialize):
    """Runs the oplib .pte; where both modes run the same ops, also the delegate's, and
    fails unless the two agree byte for byte (``shared['compared']`` counts the runs compared)."""

    def __init__(self, shared: dict):
        super().__init__()
        self.shared = shared

    def run_artifact(self, inputs):
        got = super().run_artifact(inputs)
        delegate = self.shared.get("delegate_pte")
        if delegate is not None and _delegates(delegate) and _compute_ops_shared(self.buffer):
            flat, _ = tree_flatten(inputs)
            want = run_pte(delegate, flat)
            if [t.numpy().tobytes() for t in got] != [t.numpy().tobytes() for t in want]:
                raise AssertionError("espnn_oplib: the operator library's outputs differ from the delegate's "
                                     "on the same quantized program (they must be identical byte for byte)")
            self.shared["compared"] = self.shared.get("compared", 0) + 1
        return got


class EspNNOplibTester(Tester):
    def __init__(self, module, example_inputs, dynamic_shapes=None):
        self.shared: dict = {}  # the lowering stage's delegate .pte, for the serialize stage's comparison
        stages = _stages(lambda *a, **k: OplibLower(self.shared), lambda *a, **k: BitExactSerialize(self.shared))
        super().__init__(module, example_inputs, stage_classes=stages, dynamic_shapes=dynamic_shapes)


# espnn:: ops are kernel calls, not CALL_DELEGATE nodes: not a delegated flow.
ESPNN_OPLIB_TEST_FLOW = _flow(OPLIB_FLOW_NAME, EspNNOplibTester, delegated=False)
