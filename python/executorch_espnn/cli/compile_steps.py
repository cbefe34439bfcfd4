"""The steps of ``espnn compile``: quantize (PTQ or QAT), lower, serialize,
run on the host, measure accuracy. Every failure becomes a CliError whose one
line names the step, the node when there is one, and what to do."""

from __future__ import annotations

from dataclasses import dataclass

from .. import ET_BACKEND_ERROR, _et_backend, runtime
from ..compile_spec import EspNNCompileSpecBuilder
from ..memory.schedule_search import ScheduleError
from ..pipeline import QuantizationError, output_scales
from ..pipeline import quantize as pt2e_quantize
from .compare import LargestDiffs, as_list
from .errors import ProgramError, UsageError, one_line
from .progress import progress


def _export_failed(what: str, e: BaseException) -> ProgramError:
    return ProgramError(f"torch.export of the {what} failed: {one_line(e, typed=True, limit=400)} "
                         "(the model must be exportable with torch.export: no data-dependent Python control "
                         "flow; see the PyTorch export docs)")


def _export(model, example, what: str):
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    try:
        return torch.export.export(model, example)
    except Exception as e:
        raise _export_failed(what, e) from e


def quantize(model, example, calib, qat_data, args, steps):
    """(quantized GraphModule, QAT info or None): ``executorch_espnn.quantize``
    with progress lines, and its failures as CliErrors."""

    qat_info = {}

    def train(prepared):
        qat_info.update(_train(prepared, qat_data, args.qat_epochs, args.qat_lr), data=qat_data.source)

    def calibration():
        steps(f"calibrating on {calib.source} ({len(calib.batches)} batch(es))")
        for batch in progress(calib.batches, len(calib.batches), "calibrating"):
            yield batch.inputs

    if args.qat_epochs:
        steps(f"exporting for QAT ({args.qat_epochs} epoch(s) on {qat_data.source})")
    else:
        steps("exporting and preparing for quantization (EspNNQuantizer)")
    try:
        quantized = pt2e_quantize(model, example, calibration(), qat=train if args.qat_epochs else None)
    except QuantizationError as e:
        cause = e.__cause__ or e
        if e.step == "export":
            raise _export_failed("model (train mode)" if args.qat_epochs else "model", cause) from cause
        if e.step == "calibrate":
            raise UsageError(f"calibration batch {e.batch} from {calib.source} failed in the model: "
                             f"{one_line(cause, typed=True, limit=300)}") from cause
        if e.step == "prepare":
            what = ("preparing the model for QAT failed" if args.qat_epochs
                    else "EspNNQuantizer could not annotate the model")
            raise ProgramError(f"{what}: {one_line(cause, typed=True)}") from cause
        raise ProgramError(f"convert_pt2e failed: {one_line(cause, typed=True)}") from cause
    return quantized, (qat_info or None)


def _train(prepared, data, epochs: int, lr: float) -> dict:
    """QAT: SGD on cross-entropy of the first output (taken as logits)."""
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch
    import torch.nn.functional as F

    opt = torch.optim.SGD(prepared.parameters(), lr=lr, momentum=0.9)
    losses = []
    for epoch in range(epochs):
        total, n = 0.0, 0
        for batch in progress(data.batches, len(data.batches), f"QAT epoch {epoch + 1}/{epochs}"):
            out = prepared(*batch.inputs)
            out = out[0] if isinstance(out, (tuple, list)) else out
            loss = F.cross_entropy(out.reshape(out.shape[0], -1), batch.labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, n = total + float(loss), n + 1
        losses.append(total / max(n, 1))
    return {"epochs": epochs, "learning_rate": lr, "mean_loss_per_epoch": losses}


_STRICT_PREFIX = "EspNNPartitioner(allow_cpu_fallback=False)"


def _schedule_error(e: BaseException):
    """The ScheduleError behind ``e`` (ExecuTorch may wrap what the partitioner raised), or None."""
    while e is not None:
        if isinstance(e, ScheduleError):
            return e
        e = e.__cause__ or e.__context__
    return None


def lower(quantized, example, target: str, strict: bool, *, schedule: str = "auto", arena_budget: int | None = None,
          int8_io: bool = False):
    """(EdgeProgramManager, QuantizedIO or None). With `int8_io` the program
    takes and returns int8 (ExecuTorch's quantize_io_pass on the exported
    program: each input's quantize and each output's dequantize move to the
    caller)."""
    # lazy: the partition package loads torch and executorch; `espnn --help` must load without them
    from ..partition import to_espnn_edge

    ep = _export(quantized, example, "quantized model")
    io = QuantizedIO.apply(ep) if int8_io else None
    specs = (EspNNCompileSpecBuilder().set_target(target).set_schedule(schedule).set_arena_budget(arena_budget)
             .build())
    try:
        return to_espnn_edge(ep, compile_specs=specs, allow_cpu_fallback=not strict), io
    except Exception as e:
        failure = _lowering_failure(e, schedule)
        if failure is None:
            raise  # not anticipated: an internal error
        raise failure from e


def lower_oplib(quantized, example, int8_io: bool = False):
    """(EdgeProgramManager, QuantizedIO or None) of the operator library
    (``to_espnn_oplib``: espnn:: ops, the rest on portable kernels)."""
    # lazy: the oplib package loads torch and executorch; `espnn --help` must load without them
    from ..oplib import OplibError, to_espnn_oplib

    ep = _export(quantized, example, "quantized model")
    io = QuantizedIO.apply(ep) if int8_io else None
    try:
        return to_espnn_oplib(ep), io
    except OplibError as e:
        raise ProgramError(f"lowering to the operator library failed: {one_line(e)} (--mode delegate may "
                           "lower it)") from e


# Kernel calls of an operator-library program that move or allocate bytes, not compute:
# the layout changes between NHWC ops and PyTorch-layout neighbours.
_OPLIB_LAYOUT_KERNELS = frozenset({"aten.permute_copy.out", "aten.view_copy.out", "aten.clone.out",
                                   "dim_order_ops._empty_dim_order.out",  # an op's scratch buffer
                                   "aten.expand_copy.out"})


def portable_compute_ops(report) -> list[str]:
    """The compute kernel calls of an operator-library program (pte_report)
    that are neither espnn:: ops nor layout copies: what --strict refuses."""
    # lazy: the partition package loads torch and executorch; `espnn --help` must load without them
    from ..partition.op_kinds import COMPUTE

    return [c.op for m in report.methods.values() for c in m.cpu_ops
            if c.kind == COMPUTE and not c.op.startswith("espnn.") and c.op not in _OPLIB_LAYOUT_KERNELS]


def refuse_portable_ops(report) -> None:
    """--strict in oplib mode: every compute op must be an espnn:: op."""
    left = portable_compute_ops(report)
    if left:
        names = ", ".join(sorted(set(left)))
        raise ProgramError(f"--strict: {len(left)} op(s) would run on ExecuTorch's portable kernels instead of "
                           f"espnn:: ops ({names}); change or remove these ops, use --mode delegate, or drop "
                           "--strict")


@dataclass(frozen=True)
class QuantizedIO:
    """--int8-io: the int8 inputs and outputs of a program, as ExecuTorch's
    quantize_io_pass recorded them, (scale, zero_point, quant_min, quant_max)
    each: a caller quantizes a float input with quantize_per_tensor's formula
    and dequantizes an output the same way (the graph's own q/dq ops, moved
    out of the program, the way TFLite int8 models are fed)."""

    inputs: tuple
    outputs: tuple

    @classmethod
    def apply(cls, ep) -> "QuantizedIO":
        # lazy: executorch is an optional install; `espnn --help` must load without it
        from executorch.exir.passes.quantize_io_pass import quantize_input, quantize_output

        sig = ep.graph_signature
        try:
            ins = tuple(quantize_input(ep, i)[:4] for i in range(len(sig.user_inputs)))
            outs = tuple(quantize_output(ep, i)[:4] for i in range(len(sig.user_outputs)))
        except (ValueError, AssertionError) as e:
            raise ProgramError(f"--int8-io: {one_line(e)} (every input must feed exactly one quantize and every "
                               "output come from a dequantize: a model whose first or last op stays a float op "
                               "on the CPU cannot take or return int8)") from e
        return cls(ins, outs)

    def to_program(self, inputs) -> list:
        # lazy: torch takes seconds to import; `espnn --help` must load without it
        import torch

        return [torch.ops.quantized_decomposed.quantize_per_tensor(x, s, zp, lo, hi, torch.int8)
                for x, (s, zp, lo, hi) in zip(inputs, self.inputs)]

    def from_program(self, outputs) -> list:
        # lazy: torch takes seconds to import; `espnn --help` must load without it
        import torch

        return [torch.ops.quantized_decomposed.dequantize_per_tensor(torch.as_tensor(y), s, zp, lo, hi, torch.int8)
                for y, (s, zp, lo, hi) in zip(outputs, self.outputs)]

    def as_report(self) -> dict:
        def rows(params):
            return [{"index": i, "dtype": "int8", "scale": float(s), "zero_point": int(zp)}
                    for i, (s, zp, _lo, _hi) in enumerate(params)]

        return {"inputs": rows(self.inputs), "outputs": rows(self.outputs)}


def _lowering_failure(e: Exception, schedule: str) -> ProgramError | None:
    """The CliError that says what went wrong in to_espnn_edge and what to do
    (None: not a failure the user can act on)."""
    # lazy: the lowering loads torch; `espnn --help` must load without it
    from ..lowering.lower import LoweringError

    budget_error = _schedule_error(e)
    if budget_error is not None:
        hint = (" (or drop --schedule layer: fused execution may reach less)" if schedule == "layer" else "")
        return ProgramError(f"--arena-budget {budget_error.budget:,} B cannot be met: {one_line(budget_error)}; "
                             f"give --arena-budget {budget_error.smallest_peak:,} or more{hint}")
    if isinstance(e, LoweringError):
        node = f" at node {e.node}" if getattr(e, "node", None) else ""
        return ProgramError(f"lowering failed{node}: {one_line(e)} (rerun with --verbose; without --strict "
                             "an op the backend cannot take stays on the CPU)")
    if isinstance(e, RuntimeError):
        text = str(e)
        if text.startswith(_STRICT_PREFIX):
            # The partitioner counts as the report does (partition/op_kinds.py): "N op(s) (+M quantize/dequantize)".
            head = text.splitlines()[0].split(": ", 1)[1].removesuffix(" would run on the CPU:")
            lines = [ln.strip() for ln in text.splitlines()[1:] if ln.startswith("  ")]
            more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
            return ProgramError(f"--strict: {head} would run on the CPU; first: {lines[0]}{more}. "
                                 "Change or remove these ops, or drop --strict to let them run on the CPU "
                                 "(the report then lists them, grouped by op and reason)")
        return ProgramError(f"lowering failed: {one_line(e, typed=True, limit=500)}")
    return None


def to_pte(edge) -> bytes:
    # lazy: the cli must load without executorch
    from ..quantized_kernels import load_quantized_kernels

    load_quantized_kernels()  # q/dq left on the CPU: their out variants

    try:
        return bytes(edge.to_executorch().buffer)
    except Exception as e:
        raise ProgramError(f"serializing the program (to_executorch) failed: "
                            f"{one_line(e, typed=True, limit=400)}") from e


def add_planned_memory(report, pte: bytes) -> None:
    # lazy: the partition package loads torch and executorch; `espnn --help` must load without them
    from ..partition.report import pte_program

    for plan in pte_program(pte).execution_plan:
        if plan.name in report.methods:
            report.methods[plan.name].planned_memory_bytes = sum(plan.non_const_buffer_sizes)


class HostRunner:
    """Runs method `forward` of the program on the host: the .pte through
    executorch.runtime, or (use_pte=False) the lowered Edge program with
    every ESP-NN delegate on the native runtime."""

    def __init__(self, pte: bytes, edge, use_pte: bool, method: str = "forward", io: QuantizedIO | None = None,
                 oplib: bool = False):
        # io: an --int8-io program; the runner takes and returns float, converting at its boundary
        # oplib: an operator-library program (espnn:: ops; run_edge runs their reference implementations)
        self.method, self.edge, self.pte, self.io, self.oplib = method, edge, pte, io, oplib
        self.kind = "pte" if use_pte else "edge"
        self.program = None
        if use_pte:
            if _et_backend is None:
                raise UsageError(f"the EspNNBackend delegate is not available in this install ({ET_BACKEND_ERROR}): "
                                 "install executorch-espnn into the environment that holds the executorch wheel "
                                 "it pins (pip install .)")

            try:
                self.program = runtime.load_program(pte)
            except Exception as e:
                raise ProgramError(f"the host runtime cannot load the .pte: {one_line(e)} (ExecuTorch's "
                                    "log above says why)") from e

    @property
    def description(self) -> str:
        if self.oplib:
            return (".pte on ExecuTorch's runtime (espnn:: kernels + portable kernels)" if self.kind == "pte" else
                    "lowered program: espnn:: ops on the native runtime, other ops in PyTorch")
        return (".pte on ExecuTorch's runtime (C++ EspNNBackend + portable kernels)" if self.kind == "pte" else
                "lowered program: ESP-NN delegates on the native runtime, CPU ops in PyTorch")

    @property
    def reference(self) -> str:
        """What run_edge runs: the gate's reference."""
        if self.oplib:
            return ("the lowered program, every espnn:: op by its reference implementation (the device "
                    "runtime's op through _native.run_op)")
        return "the lowered program, every ESP-NN delegate on the native device runtime"

    def __call__(self, inputs) -> list:
        inputs = self.io.to_program(inputs) if self.io else list(inputs)
        if self.kind == "pte":
            out = runtime.run_pte(None, inputs, self.method, program=self.program)
        else:
            out = runtime.run_edge_program(self.edge, inputs, self.method)[0]
        return self.io.from_program(out) if self.io else out

    def run_edge(self, inputs) -> list:
        """The lowered program with every ESP-NN delegate on the native device runtime."""
        inputs = self.io.to_program(inputs) if self.io else list(inputs)
        out = runtime.run_edge_program(self.edge, inputs, self.method)[0]
        return self.io.from_program(out) if self.io else out


def _rows(cmp) -> list[dict]:
    return [{"index": i, "max_abs_diff": d, "lsb": s, "max_lsb": lsb,
             "differing_fraction": cmp.differing[i] / cmp.elements[i] if cmp.elements[i] else 0.0,
             "nonfinite_mismatches": cmp.nonfinite[i], "first_nonfinite_mismatch": cmp.first_nonfinite[i]}
            for i, (d, s, lsb) in enumerate(zip(cmp.max_abs, cmp.scales, cmp.max_lsb))]


def classifier_shaped(outputs: list, inputs) -> bool:
    """Whether top-1 agreement means something for these outputs: a single
    output of logits, [N, C] or [C] with C > 1, not shaped like an input (an
    autoencoder's reconstruction). Not a detector's several heads."""
    if len(outputs) != 1:
        return False
    out = outputs[0]
    if out.dim() not in (1, 2) or out.shape[-1] < 2:
        return False
    return all(tuple(out.shape) != tuple(getattr(x, "shape", ())) for x in inputs)


def _top1(out):
    return out.argmax(-1)


# The .pte on ExecuTorch's runtime runs the same interpreter as the native
# runtime on the same payload bytes: expected bit-exact; 1 step allows a float
# CPU op (portable kernel vs PyTorch) to round a later requantization differently.
DEVICE_TOLERANCE_LSB = 1.0
# Float outputs (a CPU op last): torch.testing's float32 bounds, |d| <= 1e-5 + 1.3e-6 |want|,
# so a few ulps between ExecuTorch's portable kernels and PyTorch's pass at any magnitude.
FLOAT_RTOL = 1.3e-6


def verify(runner: HostRunner, quantized, batches, tolerance_lsb: float | None, float_atol: float = 1e-5) -> dict:
    """Runs the program on `batches` and compares it (1) with the lowered
    program whose delegates run on the native device runtime — the gate: the
    .pte must compute what the device code computes — and (2) with the
    quantized PyTorch model: measured always, a gate only with `tolerance_lsb`."""
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    scales = output_scales(quantized)
    vs_model = LargestDiffs(scales, float_rtol=FLOAT_RTOL)
    vs_device = LargestDiffs(scales, float_rtol=FLOAT_RTOL) if runner.kind == "pte" else None
    agree = total = 0
    classifier = None  # decided on the first batch (static shapes: the same for every batch)
    with torch.no_grad():
        for batch in batches:
            try:
                got = runner(batch.inputs)
            except Exception as e:
                raise ProgramError(f"running the program on the host failed: "
                                    f"{one_line(e, typed=True, limit=300)}") from e
            want = as_list(quantized(*batch.inputs))
            vs_model.add(got, want)
            if vs_device is not None:
                vs_device.add(got, runner.run_edge(batch.inputs))
            if classifier is None:
                classifier = classifier_shaped(want, batch.inputs)
            if classifier:
                agree += int((_top1(got[0]) == _top1(want[0])).sum())
                total += int(_top1(want[0]).numel())
    device = None if vs_device is None else {
        "reference": runner.reference, "outputs": _rows(vs_device), "tolerance_lsb": DEVICE_TOLERANCE_LSB,
        "passed": vs_device.passed(DEVICE_TOLERANCE_LSB, float_atol)}
    model = {"reference": "quantized PyTorch model", "outputs": _rows(vs_model),
             "top1_agreement": agree / total if classifier and total else None, "tolerance_lsb": tolerance_lsb,
             "passed": tolerance_lsb is None or vs_model.passed(tolerance_lsb, float_atol)}
    return {"runtime": runner.kind, "ran": runner.description, "method": runner.method,
            "samples": vs_model.samples, "device_runtime": device, "quantized_model": model,
            "passed": (device is None or device["passed"]) and model["passed"]}


def accuracy(model, quantized, runner: HostRunner, data) -> dict:
    """Top-1 of the float model, the quantized PyTorch model and the program on
    the host, on labelled batches, and the program's largest deviation from
    the quantized model in output steps."""
    # lazy: torch takes seconds to import; `espnn --help` must load without it
    import torch

    hits = {"float": 0, "quantized": 0, "delegate": 0}
    cmp = LargestDiffs(output_scales(quantized)[:1])
    n = 0
    with torch.no_grad():
        for batch in progress(data.batches, len(data.batches), "accuracy"):
            outs = {"float": as_list(model(*batch.inputs))[0], "quantized": as_list(quantized(*batch.inputs))[0],
                    "delegate": as_list(runner(batch.inputs))[0]}
            for k, o in outs.items():
                hits[k] += int((o.reshape(o.shape[0], -1).argmax(-1) == batch.labels).sum())
            cmp.add([outs["delegate"]], [outs["quantized"]])
            n += int(batch.labels.numel())
    top1 = {k: v / n for k, v in hits.items()}
    return {"data": data.source, "samples": n, "runtime": runner.kind,
            "float_top1": top1["float"], "quantized_top1": top1["quantized"], "delegate_top1": top1["delegate"],
            "delegate_vs_quantized_pp": 100 * (top1["delegate"] - top1["quantized"]),
            "max_abs_error": cmp.max_abs[0], "max_lsb_error": cmp.max_lsb[0]}
