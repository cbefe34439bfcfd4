"""``espnn compile --mode``: the delegate (one XTS3 program per partition)
or the operator library (``espnn::`` ops that ExecuTorch plans and calls,
docs/oplib.md), and what ``auto`` picks."""

from __future__ import annotations

from .errors import UsageError

DELEGATE, OPLIB, AUTO = "delegate", "oplib", "auto"
MODES = (AUTO, DELEGATE, OPLIB)

# What auto picks, and why (docs/performance.md, "Operator library vs delegate",
# benchmarks/oplib_vs_delegate.py). The operator library lowers only some ops yet:
# what it lacks runs in float on portable kernels (not the delegate's bytes), and
# each op call copies its weights and activations into a one-op program.
AUTO_MODE = DELEGATE
AUTO_REASON = ("auto picks the delegate: on the zoo it needs less planned memory on five of six models, a smaller "
               ".pte on all and less host time on all but the smallest, and the operator library covers conv, "
               "depthwise conv, linear, add and the pools so far (other ops run in float on ExecuTorch's portable "
               "kernels, not bit-exact with the delegate) (docs/performance.md, 'Operator library vs delegate')")


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
