"""Run .pte programs on the host through ExecuTorch's own runtime.

The program runs in ``executorch.runtime`` (the C++ runtime of the executorch
wheel): portable/CPU kernels for the CPU parts, and the C++ EspNNBackend
delegate (the same code as on the ESP32, registered when ``executorch_espnn``
is imported) for every ESP-NN partition.

    from executorch_espnn.runtime import run_pte, compare_with
    outputs = run_pte("model.pte", [x])                  # list of torch tensors
    report = compare_with("model.pte", quantized, [x])   # vs the PyTorch model
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import ET_BACKEND_ERROR, _et_backend
from .pte_check import InvalidProgramError, check_pte

__all__ = ["load_program", "run_pte", "compare_with", "Comparison", "check_pte", "InvalidProgramError"]


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
