"""EspNNBackend: ExecuTorch's ahead-of-time half of the delegate.

The class name is the backend id; the C++ runtime registers the same name.
"""

from __future__ import annotations

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

from ..compile_spec import CompileOptions
from .graph import Subgraph
from .lower import lower_subgraph


class EspNNBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs) -> PreprocessResult:
        """Partition program -> XTS3 bytes accepted by the native parser.

        Raises LoweringError / ParserRejection (subclasses of RuntimeError)
        when the program cannot be lowered; EspNNPartitioner only proposes
        partitions that it has lowered successfully the same way.
        """
        options = CompileOptions.from_specs(compile_specs)
        program = lower_subgraph(Subgraph.from_exported_program(edge_program), options)
        return PreprocessResult(processed_bytes=program.blob)
