"""``espnn compile --mode``: the delegate (one XTS3 program per partition)
or the operator library (``espnn::`` ops that ExecuTorch plans and calls,
docs/oplib.md), and what ``auto`` picks."""

from __future__ import annotations

from .errors import UsageError

DELEGATE, OPLIB, AUTO = "delegate", "oplib", "auto"
MODES = (AUTO, DELEGATE, OPLIB)

# What auto picks, and why (docs/performance.md, "Operator library vs delegate",
# benchmarks/oplib_vs_delegate.py and the device evidence). Both modes give the
# same bytes on every zoo model; the delegate is faster on every one, on the host
# and on the emulated ESP32-S3, and needs less memory on most.
AUTO_MODE = DELEGATE
AUTO_REASON = ("auto picks the delegate: on the zoo it is faster on every model, on the host and on the emulated "
               "ESP32-S3 (the operator library runs 1.06x to 3.96x the instructions: layout copies on portable "
               "kernels between NHWC ops and PyTorch-layout neighbours, whole-image depthwise staging, a one-op "
               "program checked per call), and needs less planned memory on DS-CNN, MobileNetV2, the transformer "
               "and the GRU; the operator library's edge where it has one (MobileNetV3-Small by 3 %, a model with "
               "a CPU island by 1.5 KB) does not pay for those slower calls (docs/performance.md, 'Operator "
               "library vs delegate')")


def resolve(requested: str) -> tuple[str, str | None]:
    """(the mode used, why: the reason for auto's choice, else None)."""
    if requested == AUTO:
        return AUTO_MODE, AUTO_REASON
    return requested, None


def check_options(mode: str, args) -> None:
    """Refuses options that only the delegate has (a UsageError, exit code 2):
    silently ignoring a memory budget or a schedule would promise what the
    program does not do. ExecuTorch plans the operator library's memory: there
    is no arena of ours to budget and no band schedule to pick."""
    if mode != OPLIB:
        return
    if args.arena_budget is not None:
        raise UsageError("--arena-budget applies to the delegate's arenas; --mode oplib has none (ExecuTorch "
                         "plans every tensor and scratch buffer): drop --arena-budget or use --mode delegate")
    if args.schedule != AUTO:
        raise UsageError(f"--schedule {args.schedule} applies to the delegate's fused band-by-band execution; "
                         "--mode oplib runs one op at a time: drop --schedule or use --mode delegate")


def pte_mode(report) -> str:
    """The mode a serialized program was compiled in (for ``espnn report``):
    oplib when it calls ``espnn::`` kernels and holds no delegate."""
    methods = report.methods.values()
    if any(m.partitions for m in methods):
        return DELEGATE
    calls_espnn = any(c.op.startswith("espnn.") for m in methods for c in m.cpu_ops)
    return OPLIB if calls_espnn else DELEGATE
