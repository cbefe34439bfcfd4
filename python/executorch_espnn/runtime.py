"""Run programs on the host: the .pte, or the lowered program before it.

A ``.pte`` runs in ``executorch.runtime`` (the C++ runtime of the executorch
wheel): portable/CPU kernels for the CPU parts, and the C++ EspNNBackend
delegate (the same code as on the ESP32, registered when ``executorch_espnn``
is imported) for every ESP-NN partition. ``missing_host_kernels`` names the
CPU kernels a .pte calls that this runtime lacks.

Before serialization, ``run_edge_program`` executes a lowered program's Edge
graph: every EspNNBackend delegate on the native runtime (the device C++
compiled for the host, ``executorch_espnn._native``), every other node as the
PyTorch op it is.

    from executorch_espnn.runtime import run_pte, compare_with, run_edge_program
    outputs = run_pte("model.pte", [x])                  # list of torch tensors
    report = compare_with("model.pte", quantized, [x])   # vs the PyTorch model
    outputs, delegate_calls = run_edge_program(edge, [x])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import ET_BACKEND_ERROR, _et_backend
from .pte_check import InvalidProgramError, check_pte

__all__ = ["load_program", "run_pte", "compare_with", "Comparison", "check_pte", "InvalidProgramError",
           "missing_host_kernels", "run_edge_program"]


def _runtime():
    if _et_backend is None:
        raise RuntimeError(
            "the EspNNBackend delegate is not available in this install "
            f"({ET_BACKEND_ERROR}); reinstall executorch-espnn with the executorch wheel it pins")
    from executorch.runtime import Runtime

    return Runtime.get()


def load_program(pte: bytes | bytearray | str | Path):
    """An ``executorch.runtime.Program`` from .pte bytes or a path.

    The bytes pass the device's check first (``pte_check.check_pte``:
    InvalidProgramError, a ValueError, for a program ExecuTorch must not
    see), then ExecuTorch's loader with its full verification.
    """
    if isinstance(pte, (str, Path)):
        path = Path(pte)
        try:
            data, name = path.read_bytes(), str(path)
        except OSError as e:
            raise FileNotFoundError(f"{path}: cannot read it: {e.strerror or e}") from e
    elif isinstance(pte, (bytes, bytearray)):
        data, name = bytes(pte), "the .pte"
    else:
        raise TypeError(f"expected .pte bytes or a path, got {type(pte).__name__}")
    runtime = _runtime()
    check_pte(data, name)
    from executorch.runtime import Verification

    return runtime.load_program(data, verification=Verification.InternalConsistency)


def _as_tensors(inputs) -> list:
    import numpy as np
    import torch

    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(np.ascontiguousarray(x))
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"input {i} is a {type(x).__name__}; pass torch tensors or numpy arrays")
        out.append(x)
    return out


def run_pte(pte, inputs: Sequence, method: str = "forward", *, program=None) -> list:
    """Runs `method` of a .pte (bytes or path) on `inputs` (torch tensors or
    numpy arrays); returns the outputs as torch tensors.

    Pass `program` (from ``load_program``) to reuse a loaded program.
    Raises InvalidProgramError (a ValueError) for a .pte that fails the
    device's check, RuntimeError when loading or executing fails (ExecuTorch
    logs the reason, e.g. the delegate's dtype/shape check, to stderr).
    """
    program = program if program is not None else load_program(pte)
    if method not in program.method_names:
        raise ValueError(f"the program has no method {method!r}; it has {sorted(program.method_names)}")
    loaded = program.load_method(method)
    return list(loaded.execute(_as_tensors(inputs)))


@dataclass
class Comparison:
    outputs: list  # the .pte's outputs
    expected: list  # the reference model's outputs
    max_abs_diff: list[float]  # per output

    def within(self, atol: float) -> bool:
        return all(d <= atol for d in self.max_abs_diff)


def compare_with(pte, model, inputs: Sequence, method: str = "forward") -> Comparison:
    """Runs the .pte and `model` (a callable such as the quantized PyTorch
    GraphModule) on the same inputs and reports the largest absolute
    difference per output."""
    import torch

    got = run_pte(pte, inputs, method)
    with torch.no_grad():
        want = model(*_as_tensors(inputs))
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    if len(got) != len(want):
        raise ValueError(f"the .pte returned {len(got)} outputs, the model {len(want)}")
    diffs = [float((g.double() - w.double()).abs().max()) if g.numel() else 0.0 for g, w in zip(got, want)]
    return Comparison(got, want, diffs)


def missing_host_kernels(pte: bytes, method: str | None = None) -> list[str]:
    """CPU kernels a .pte calls that this host's ExecuTorch runtime does not
    register ([] when all are there or the runtime cannot be asked)."""
    from .partition.report import pte_program

    try:
        from executorch.extension.pybindings import portable_lib

        available = set(portable_lib._get_operator_names())
    except Exception:  # noqa: BLE001 - a private helper; without it, just try to load
        return []
    wanted = set()
    for plan in pte_program(pte).execution_plan:
        if method is None or plan.name == method:
            wanted |= {f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators}
    return sorted(wanted - available)


def run_edge_program(edge_manager, inputs, method: str = "forward") -> tuple[list, int]:
    """Runs `method` of an EdgeProgramManager on `inputs` (torch tensors),
    every EspNNBackend delegate on the native runtime.

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
    interp = _delegating_interpreter(ep.graph_module)
    out = interp.run(*feeds)
    return (list(out) if isinstance(out, (list, tuple)) else [out]), interp.delegate_calls


def _delegating_interpreter(gm):
    """A torch.fx.Interpreter of `gm` that runs executorch_call_delegate on
    the native runtime (torch is imported here, not with this module)."""
    import numpy as np
    import torch

    from . import _native

    class DelegatingInterpreter(torch.fx.Interpreter):
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

    return DelegatingInterpreter(gm)
