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


class EspNNTester(Tester):
    def __init__(self, module, example_inputs, dynamic_shapes=None):
        stages = Tester.default_stage_classes()
        stages[StageType.QUANTIZE] = espnn_quantize_stage
        stages[StageType.TO_EDGE_TRANSFORM_AND_LOWER] = espnn_lower_stage
        stages[StageType.SERIALIZE] = RuntimeSerialize
        super().__init__(module, example_inputs, stage_classes=stages, dynamic_shapes=dynamic_shapes)


ESPNN_TEST_FLOW = TestFlow(
    FLOW_NAME,
    backend=BACKEND_NAME,
    tester_factory=EspNNTester,
    quantize=True,
    quantize_stage_factory=espnn_quantize_stage,
    is_delegated=True,
)
