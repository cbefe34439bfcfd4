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

import threading
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from . import ET_BACKEND_ERROR, _et_backend, _native
from .output_diff import check_tolerance, element_diff
from .pte_check import InvalidProgramError, check_pte
from .quantized_kernels import load_quantized_kernels

__all__ = ["load_program", "run_pte", "InputError", "compare_with", "Comparison", "check_pte", "InvalidProgramError",
           "missing_host_kernels", "run_edge_program"]


def _runtime():
    if _et_backend is None:
        raise RuntimeError(
            "the EspNNBackend delegate is not available in this install "
            f"({ET_BACKEND_ERROR}); reinstall executorch-espnn with the executorch wheel it pins")
    # lazy: executorch.runtime; `import executorch_espnn.runtime` must stay light
    from executorch.runtime import Runtime

    load_quantized_kernels()  # q/dq a program leaves on portable kernels
    return Runtime.get()


class InputError(ValueError):
    """An input that ``run_pte`` refuses before ExecuTorch sees it (wrong
    count, type, dtype or shape): one line naming the input. ExecuTorch's
    binding would abort the process on some of these (a zero-element numpy
    array) or fail with an error code. ``index`` is the input's position
    (None when the error is about the input list as a whole)."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


@dataclass
class _ProgramState:
    """What ``run_pte`` keeps per loaded program: the lock that serializes its
    calls (executorch.runtime caches one ``Method`` per name, and one Method
    must never execute in two threads at once) and the dim order each method
    input was exported with (method -> per input; missing: contiguous)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    dim_orders: dict = field(default_factory=dict)


# executorch.runtime.Program -> _ProgramState; weak, so a program is freed with its last user reference.
_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(program) -> _ProgramState:
    with _STATES_LOCK:
        state = _STATES.get(program)
        if state is None:  # a program loaded without load_program: contiguous inputs assumed
            state = _STATES[program] = _ProgramState()
        return state


def _input_dim_orders(data: bytes) -> dict:
    """method -> the dim order of each tensor input, as the .pte records it."""
    # lazy: the partition package loads torch and executorch; `import executorch_espnn.runtime` must load without them
    from .partition.report import pte_program

    out = {}
    for plan in pte_program(data).execution_plan:
        orders = []
        for index in plan.inputs:
            val = plan.values[index].val
            orders.append(tuple(int(d) for d in val.dim_order) if hasattr(val, "dim_order") else None)
        out[plan.name] = orders
    return out


def load_program(pte: bytes | bytearray | str | Path):
    """An ``executorch.runtime.Program`` from .pte bytes or a path.

    The bytes pass the device's check first (``pte_check.check_pte``:
    InvalidProgramError, a ValueError, for a program ExecuTorch must not
    see), then ExecuTorch's loader with its full verification.
    """
    if isinstance(pte, (str, Path)):
        path = Path(pte)
        if path.is_dir():
            raise IsADirectoryError(f"{path}: is a directory, not a .pte file")
        if path.exists() and not path.is_file():
            raise FileNotFoundError(f"{path}: not a regular file (a .pte program is one)")
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
    # lazy: executorch.runtime; `import executorch_espnn.runtime` must stay light
    from executorch.runtime import Verification

    program = runtime.load_program(data, verification=Verification.InternalConsistency)
    try:
        orders = _input_dim_orders(data)
    except ValueError:  # a program ExecuTorch loads but its Python deserializer cannot read: contiguous assumed
        orders = {}
    with _STATES_LOCK:
        _STATES[program] = _ProgramState(dim_orders=orders)
    return program


def _as_tensors(inputs) -> list:
    # lazy: torch takes seconds to import; `import executorch_espnn.runtime` must load without it
    import torch

    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(np.ascontiguousarray(x))
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"input {i} is a {type(x).__name__}; pass torch tensors or numpy arrays")
        out.append(x)
    return out


def _has_layout(t, order: tuple) -> bool:
    """True when `t`'s strides are exactly those of a dense tensor laid out
    in dim order `order` (outermost first), size-1 dims included: what
    ExecuTorch reads as that dim order."""
    want, step = [0] * t.dim(), 1
    for d in reversed(order):
        want[d] = step
        step *= int(t.shape[d])
    return list(t.stride()) == want and t.storage_offset() == 0


def _prepare_inputs(program, method: str, inputs: Sequence) -> list:
    """The method's inputs as tensors ExecuTorch reads correctly: each one
    checked against the method's dtype and shape (InputError), in the dim
    order the program recorded (contiguous unless it was exported otherwise),
    at an aligned address. A differently laid out input (channels-last,
    transposed or sliced views, Fortran order, negative strides, misaligned
    memory, other byte order) is converted, with a warning saying so; its
    values are never reinterpreted."""
    # lazy: torch takes seconds to import; `import executorch_espnn.runtime` must load without it
    import torch

    # lazy: pte_suite imports this module (load_program, run_pte): a cycle
    from .pte_suite import method_input_specs

    specs = method_input_specs(None, method, program)
    if len(inputs) != len(specs):
        raise InputError(f"method {method!r} takes {len(specs)} input(s), got {len(inputs)}")
    orders = _state(program).dim_orders.get(method) or [None] * len(specs)
    out = []
    for i, (x, (shape, dtype)) in enumerate(zip(inputs, specs)):
        converted = []
        if isinstance(x, np.ndarray):
            if x.dtype.byteorder not in "=|" and x.dtype.newbyteorder("=") == dtype:
                x = x.astype(dtype)  # the same values in this host's byte order
                converted.append("byte order")
            got_dtype = x.dtype
        elif isinstance(x, torch.Tensor):
            if x.layout != torch.strided or x.device.type != "cpu" or x.is_quantized:
                raise InputError(f"input {i}: a {x.layout} tensor on {x.device}; pass a dense CPU tensor", i)
            try:
                got_dtype = np.dtype(str(x.dtype).removeprefix("torch."))
            except TypeError:
                got_dtype = str(x.dtype).removeprefix("torch.")
        else:
            raise InputError(f"input {i} is a {type(x).__name__}; pass a torch tensor or a numpy array", i)
        if got_dtype != dtype:
            raise InputError(f"input {i}: dtype {got_dtype}, method {method!r} expects {dtype} (cast it first; "
                             "a value-changing cast is never done silently)", i)
        if tuple(x.shape) != tuple(shape):
            raise InputError(f"input {i}: shape {tuple(x.shape)}, method {method!r} expects {tuple(shape)}", i)
        if isinstance(x, np.ndarray):
            if not (x.flags.c_contiguous and x.flags.aligned):
                converted.append("Fortran order" if x.flags.f_contiguous and x.ndim > 1 else "strided view"
                                 if x.flags.aligned else "misaligned memory")
                x = np.require(x, requirements=["C", "A"]).copy()
            x = torch.from_numpy(x)
        x = x.detach()
        order = orders[i] if i < len(orders) and orders[i] is not None else tuple(range(x.dim()))
        if not _has_layout(x, order) or x.data_ptr() % max(x.element_size(), 1):
            if not converted:
                converted.append("channels-last" if x.dim() == 4 and x.is_contiguous(
                    memory_format=torch.channels_last) else "strided view")
            inverse = [order.index(d) for d in range(len(order))]
            x = x.permute(*order).clone(memory_format=torch.contiguous_format).permute(*inverse)
        if converted:
            warnings.warn(f"input {i}: {' and '.join(converted)} converted to the program's dim order "
                          f"{order} (the values are unchanged)", stacklevel=3)
        out.append(x)
    return out


def run_pte(pte, inputs: Sequence, method: str = "forward", *, program=None) -> list:
    """Runs `method` of a .pte (bytes or path) on `inputs` (torch tensors or
    numpy arrays); returns the outputs as torch tensors.

    Pass `program` (from ``load_program``) to reuse a loaded program. Each
    input must have the method's dtype and shape (InputError, a ValueError,
    otherwise); any memory layout is accepted and converted to the program's
    (see ``_prepare_inputs``). Safe to call from several threads, also with
    one shared `program`: calls on one program take turns (a lock per
    program), calls on different programs run side by side.
    Raises InvalidProgramError (a ValueError) for a .pte that fails the
    device's check, RuntimeError when loading or executing fails (ExecuTorch
    logs the reason, e.g. the delegate's dtype/shape check, to stderr).
    """
    program = program if program is not None else load_program(pte)
    if method not in program.method_names:
        raise ValueError(f"the program has no method {method!r}; it has {sorted(program.method_names)}")
    feeds = _prepare_inputs(program, method, list(inputs))
    with _state(program).lock:
        loaded = program.load_method(method)
        return list(loaded.execute(feeds))


@dataclass
class Comparison:
    outputs: list  # the .pte's outputs
    expected: list  # the reference model's outputs
    max_abs_diff: list[float]  # per output, over the element pairs that are both finite
    # per output: element pairs where a NaN/inf of one side is not matched by the
    # other (output_diff's rule: inf matches inf of the same sign, NaN matches nothing)
    nonfinite_mismatches: list[int]

    def within(self, atol: float) -> bool:
        """Every output within `atol` (a finite number >= 0) of its reference
        and no NaN/inf mismatch."""
        atol = check_tolerance(atol, "atol")
        return all(n == 0 and d <= atol for d, n in zip(self.max_abs_diff, self.nonfinite_mismatches))


def compare_with(pte, model, inputs: Sequence, method: str = "forward") -> Comparison:
    """Runs the .pte and `model` (a callable such as the quantized PyTorch
    GraphModule) on the same inputs and reports, per output, the largest
    absolute difference and the NaN/inf mismatches (``output_diff``)."""
    # lazy: torch takes seconds to import; `import executorch_espnn.runtime` must load without it
    import torch

    got = run_pte(pte, inputs, method)
    with torch.no_grad():
        want = model(*_as_tensors(inputs))
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    if len(got) != len(want):
        raise ValueError(f"the .pte returned {len(got)} outputs, the model {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if tuple(g.shape) != tuple(w.shape):
            raise ValueError(f"output {i}: the .pte returned shape {tuple(g.shape)}, the model {tuple(w.shape)}")
    diffs = [element_diff(g, w) for g, w in zip(got, want)]
    return Comparison(got, want, [d.max_abs for d in diffs], [d.nonfinite_mismatches for d in diffs])


def missing_host_kernels(pte: bytes, method: str | None = None) -> list[str]:
    """CPU kernels a .pte calls that this host's ExecuTorch runtime does not
    register ([] when all are there or the runtime cannot be asked)."""
    # lazy: the partition package loads torch and executorch; `import executorch_espnn.runtime` must load without them
    from .partition.report import pte_program

    try:
        # lazy: ExecuTorch's pybindings are optional; without them the check is skipped
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
    # lazy: torch takes seconds to import; `import executorch_espnn.runtime` must load without it
    import torch

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
