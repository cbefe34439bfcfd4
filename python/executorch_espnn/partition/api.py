"""to_espnn_edge: the one call from an exported, quantized program to a lowered EdgeProgramManager."""

from __future__ import annotations

import logging

from executorch.exir import to_edge_transform_and_lower
from torch.export import ExportedProgram

from ..quantized_kernels import load_quantized_kernels
from ..recurrent_ops import RECURRENT_OPS, decompose_recurrent
from .partitioner import CPU_REASON_KEY, EspNNPartitioner
from .shape_chains import requantize_shape_chains_pass

log = logging.getLogger(__name__)


def to_espnn_edge(programs, *, compile_specs=None, allow_cpu_fallback: bool = True, compile_config=None):
    """``executorch.exir.to_edge_transform_and_lower`` with EspNNPartitioner.

    Args:
        programs: a torch.export.ExportedProgram (the method "forward"), or a
            dict method name -> ExportedProgram.
        compile_specs: from EspNNCompileSpecBuilder().build().
        allow_cpu_fallback: False raises if any node would stay on the CPU.
        compile_config: an executorch.exir.EdgeCompileConfig.

    Before partitioning it runs ``shape_chains.requantize_shape_chains_pass``
    (int8 values that the Edge decomposition split into several shape ops).
    A recurrent op of EspNNQuantizer's (espnn::gru / espnn::lstm) that the
    partitioner does not take has no CPU kernel: the program is then lowered
    again with those ops turned back into PyTorch's (recurrent_ops.py), which
    ExecuTorch decomposes into portable ops; a warning names each one and why.
    Returns the EdgeProgramManager; call ``.to_executorch()`` on it, and
    ``delegation_report(manager)`` to see what was delegated.
    """

    def make():
        return [EspNNPartitioner(compile_specs, allow_cpu_fallback=allow_cpu_fallback)]

    if isinstance(programs, ExportedProgram):
        partitioner = make()
    elif isinstance(programs, dict) and programs:
        for name, ep in programs.items():
            if not isinstance(ep, ExportedProgram):
                raise TypeError(f"method {name!r}: expected a torch.export.ExportedProgram, got {type(ep).__name__}")
        partitioner = {name: make() for name in programs}  # one partitioner (and plan) per method
    else:
        raise TypeError(f"to_espnn_edge takes an ExportedProgram or a non-empty dict of them, got "
                        f"{type(programs).__name__}; export the quantized module first: "
                        "torch.export.export(convert_pt2e(m), example_inputs)")

    def lower(programs, partitioner):
        return to_edge_transform_and_lower(programs, partitioner=partitioner, compile_config=compile_config,
                                           transform_passes=[requantize_shape_chains_pass])

    load_quantized_kernels()  # q/dq left on the CPU: their out variants, for to_executorch
    manager = lower(programs, partitioner)
    left = [(name, n) for name in manager.methods for n in manager.exported_program(name).graph.nodes
            if n.op == "call_function" and getattr(n.target, "_op", n.target) in RECURRENT_OPS
            or str(n.target).startswith(("espnn.gru", "espnn.lstm"))]
    if not left:
        return manager
    for name, n in left:
        log.warning("%s: %s stays on the CPU as PyTorch's decomposition: %s", name, n.name,
                    n.meta.get(CPU_REASON_KEY, "not delegated"))
    if isinstance(programs, ExportedProgram):
        return lower(decompose_recurrent(programs), make())
    return lower({name: decompose_recurrent(ep) for name, ep in programs.items()}, {name: make() for name in programs})
