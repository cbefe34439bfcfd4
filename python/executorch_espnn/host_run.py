"""Run a lowered program on the host, delegates included.

Before a program becomes a .pte, `run_edge_program` executes its Edge graph:
every EspNNBackend delegate runs on the native runtime (the device C++
compiled for the host, `executorch_espnn._native`), every other node as the
PyTorch op it is. Used by the examples and tests to compare a lowered program
with the quantized PyTorch model it came from.
"""

from __future__ import annotations

import numpy as np
import torch

from . import _native


class _DelegatingInterpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__(gm)
        self.delegate_calls = 0
        self._programs: dict[int, _native.Program] = {}

    def call_function(self, target, args, kwargs):
        if getattr(target, "__name__", "") != "executorch_call_delegate":
            return super().call_function(target, args, kwargs)
        lowered = args[0]
        if lowered.backend_id != "EspNNBackend":
            raise NotImplementedError(f"cannot run a {lowered.backend_id} delegate on the host")
        program = self._programs.get(id(lowered))
        if program is None:
            program = self._programs[id(lowered)] = _native.Program(lowered.processed_bytes)
        feeds = [np.ascontiguousarray(a.detach().cpu().numpy()) for a in args[1:]]
        self.delegate_calls += 1
        return tuple(torch.from_numpy(np.asarray(o)) for o in program.run(feeds))


def run_edge_program(edge_manager, inputs, method: str = "forward") -> tuple[list[torch.Tensor], int]:
    """Runs `method` of an EdgeProgramManager on `inputs` (tensors).

    Returns (outputs, number of delegate calls executed natively).
    """
    ep = edge_manager.exported_program(method)
    user = iter(inputs)
    feeds = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            feeds.append(next(user))
        elif spec.target in ep.state_dict:
            feeds.append(ep.state_dict[spec.target])
        else:
            feeds.append(ep.constants[spec.target])
    interp = _DelegatingInterpreter(ep.graph_module)
    out = interp.run(*feeds)
    return (list(out) if isinstance(out, (list, tuple)) else [out]), interp.delegate_calls
