"""``espnn compile``: model -> quantized -> lowered -> .pte, verified on the host, with a report."""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

from .. import runtime
from ..compile_spec import parse_size
from ..targets import DEFAULT as DEFAULT_TARGET
from ..targets import TARGETS as _CHIPS
from . import compile_steps, loading, modes
from . import data as data_mod
from .compare import tolerance_arg
from .errors import EXIT_OK, EXIT_VERIFICATION_FAILED, UsageError
from .files import writable_file, write_file
from .loading import DEFAULT_MODEL
from .progress import Stages, warn

DEFAULT_RANDOM_BATCHES = 8
# Beyond this many output steps from the quantized PyTorch model a warning
# explains why (unless --tolerance-lsb makes it a gate). The integer kernels
# and PyTorch's reference round each requantization independently: an op group
# agrees within 1 LSB, and the +-1 flips propagate through deep networks
# (MobileNetV2 224x224: 2 LSB, tests/aot/test_models.py bounds it at 3; the
# U-Net of the zoo 3) and across int8 -> float -> int8 CPU boundaries
# (tests/runtime/test_transformer_fallback.py).
EXPECTED_DEVIATION_LSB = 3


def deviation_warning(verification: dict) -> str | None:
    """The warning for outputs more than EXPECTED_DEVIATION_LSB steps from the
    quantized PyTorch model (None if there are none): how far, and what that
    distance is made of, as measured layer by layer against an exact integer
    reference (tests/aot/test_layerwise_reference.py, docs/lowering.md)."""
    # max_lsb is a difference of dequantized values over the step: whole steps up to float error.
    far = [o for o in verification["quantized_model"]["outputs"]
           if o["lsb"] is not None and o["max_lsb"] is not None and round(o["max_lsb"]) > EXPECTED_DEVIATION_LSB]
    if not far:
        return None
    where = "; ".join(f"output {o['index']} is up to {round(o['max_lsb'])} steps from the quantized PyTorch model "
                      f"({100 * o['differing_fraction']:.1f} % of its elements differ)" for o in far)
    device = verification.get("device_runtime")
    exact = device is not None and all(o["max_abs_diff"] == 0 and o["differing_fraction"] == 0
                                       and not o["nonfinite_mismatches"] for o in device["outputs"])
    same = ("The .pte computes bit for bit what the device runtime computes (checked above), so the distance is "
            "arithmetic, not a runtime error. " if exact else "")
    return (f"{where}, more than the {EXPECTED_DEVIATION_LSB} usual. {same}What int8 rounding does here: ESP-NN's "
            "conv, depthwise, transposed-conv and fully connected kernels requantize as TFLite does "
            "(MultiplyByQuantizedMultiplier rounds twice), which leaves up to about 0.5 % of each layer's outputs "
            "one step from PyTorch's float result rounded once, and later layers amplify those steps, most where an "
            "output's range is narrow (measured layer by layer on the zoo's VWW MobileNetV1, U-Net and detector: "
            "every layer equals an exact integer reference, and this is the only difference; docs/lowering.md). "
            "Judge the accuracy with --eval-data, or make the distance a gate with --tolerance-lsb")


def add_parser(sub, parents) -> None:
    p = sub.add_parser(
        "compile", parents=parents, help="quantize, lower and verify a model; write the .pte and a report",
        description="Export a PyTorch model, quantize it with EspNNQuantizer (post-training calibration, "
        "or QAT), lower it with EspNNPartitioner, write the .pte, run it on the host runtime against the "
        "quantized PyTorch model, and print the delegation report.")
    p.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                   help="module:function or path/to/file.py:function returning (nn.Module, example_inputs), "
                   f"or torchvision:<name> (needs torchvision). Default: {DEFAULT_MODEL}")
    p.add_argument("-o", "--output", type=Path, help="the .pte to write (default: <function>.pte)")
    p.add_argument("--json", type=Path, help="the JSON report to write (default: next to the .pte, .report.json)")
    p.add_argument("--html", type=Path, help="also write a self-contained HTML report")
    p.add_argument("--calibration", metavar="SRC",
                   help="calibration data: a folder (.npy / images), .npy, .npz, or module:function yielding "
                   "batches. Default: the --qat-data or --eval-data when given, else random inputs (warned)")
    p.add_argument("--calibration-batches", type=int, default=32, metavar="N",
                   help="use at most N calibration batches (default 32)")
    p.add_argument("--eval-data", metavar="SRC",
                   help="labelled data for the accuracy table (float vs quantized PyTorch vs delegate): "
                   ".npz with x and y, a folder with one sub-folder per class, or module:function "
                   "yielding (inputs, labels)")
    p.add_argument("--qat-epochs", type=int, default=0, metavar="N",
                   help="quantization-aware training for N epochs on --qat-data (default 0: post-training)")
    p.add_argument("--qat-data", metavar="SRC", help="labelled training data for QAT (same forms as --eval-data)")
    p.add_argument("--qat-lr", type=float, default=1e-3, help="QAT learning rate (SGD with momentum 0.9)")
    p.add_argument("--mode", choices=modes.MODES, default=modes.AUTO,
                   help="delegate: ESP-NN delegate partitions (our interpreter, arenas and schedules); oplib: "
                   "espnn:: ExecuTorch custom ops that ExecuTorch plans and calls one by one (docs/oplib.md), "
                   "--schedule and --arena-budget do not apply; auto (default): the delegate for now (docs/cli.md "
                   "says why)")
    p.add_argument("--target", choices=tuple(_CHIPS), default=DEFAULT_TARGET,
                   help="the chip, recorded in the compile specs (default esp32s3)")
    p.add_argument("--arena-budget", metavar="SIZE", type=_size,
                   help="bytes each ESP-NN partition's activation arena must fit in: 320K, 1.5M (K = 1024) or a "
                   "number of bytes. The schedule is then the one with the least recomputation whose peak fits "
                   "(fused band-by-band execution where needed); exit code 3, naming the smallest arena "
                   "reachable, when none fits. Default: no budget, the smallest peak")
    p.add_argument("--schedule", choices=("auto", "layer", "fused"), default="auto",
                   help="auto (default): fused band-by-band execution only where it lowers the peak arena; "
                   "layer: every op on whole tensors (layer by layer); fused: every fusable chain fused")
    p.add_argument("--int8-io", action="store_true",
                   help="the program takes and returns int8 (each input's quantization and each output's "
                        "dequantization move to the caller, as with TFLite int8 models; the report gives their "
                        "scales and zero points)")
    p.add_argument("--strict", action="store_true",
                   help="refuse to leave any op on the CPU (allow_cpu_fallback=False): exit code 3 instead")
    p.add_argument("--verify-samples", type=int, default=4, metavar="N",
                   help="host verification on N calibration batches (default 4)")
    p.add_argument("--tolerance-lsb", type=tolerance_arg, default=None, metavar="N",
                   help="also fail (exit 1) when the program is more than N output steps from the quantized "
                   "PyTorch model (default: measured and shown, not a gate; see docs/cli.md)")
    p.add_argument("--seed", type=int, default=0, help="seed for random calibration data (default 0)")
    p.set_defaults(func=run)


def _size(text: str) -> int:

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _default_output(spec: str) -> Path:
    name = spec.rsplit(":", 1)[-1] or "model"
    return Path("".join(c if c.isalnum() or c in "-_." else "_" for c in name) + ".pte")


def run(args: argparse.Namespace) -> int:

    t0 = time.monotonic()
    steps = Stages(7 if args.qat_epochs else 6, quiet=args.quiet)
    warnings: list[str] = []

    def warning(text: str) -> None:
        warnings.append(text)
        warn(text)

    if args.qat_epochs < 0 or args.verify_samples < 1 or args.calibration_batches < 1:
        raise UsageError("--qat-epochs must be >= 0, --verify-samples and --calibration-batches >= 1")
    if args.qat_epochs and not args.qat_data:
        raise UsageError("--qat-epochs needs --qat-data (labelled training batches)")
    mode, mode_reason = modes.resolve(args.mode)
    modes.check_options(mode, args)
    output = args.output or _default_output(args.model)
    if output.suffix != ".pte":
        raise UsageError(f"--output {output}: the program file must end in .pte")
    json_path = args.json or output.with_suffix(".report.json")
    # Before the work, not after it: every file this run writes can be written.
    for path, what in ((output, "--output"), (json_path, "--json"), (args.html, "--html")):
        if path is not None:
            writable_file(path, what)

    steps(f"loading model {args.model}")

    model, example = loading.load_model(args.model)  # looked up at the call: tests replace it
    qat_data = (data_mod.load_dataset(args.qat_data, example, "--qat-data", need_labels=True)
                if args.qat_data else None)
    eval_data = (data_mod.load_dataset(args.eval_data, example, "--eval-data", need_labels=True)
                 if args.eval_data else None)
    for ds in (qat_data, eval_data):
        for note in ds.notes if ds else ():
            warning(note)
    if args.calibration:
        calib = data_mod.load_dataset(args.calibration, example, "--calibration", limit=args.calibration_batches)
        for note in calib.notes:
            warning(note)
    elif qat_data or eval_data:
        src = qat_data or eval_data
        calib = data_mod.Dataset(src.source, src.batches[:args.calibration_batches])
        warning(f"calibrating on {'--qat-data' if qat_data else '--eval-data'} ({src.source}); give "
                "--calibration for a separate set")
    else:
        calib = data_mod.random_dataset(example, DEFAULT_RANDOM_BATCHES, args.seed)
        warning(f"no --calibration data: calibrating on {DEFAULT_RANDOM_BATCHES} random batches shaped like "
                "the example inputs; int8 ranges (and accuracy) on real data may differ")

    quantized, qat_info = compile_steps.quantize(model, example, calib, qat_data, args, steps)
    # lazy: the partition package loads torch and executorch; `espnn --help` must load without them
    from ..partition.report import delegation_report, pte_report

    oplib = mode == modes.OPLIB
    if oplib:
        steps(f"lowering to espnn:: operators for {args.target}" + (" (strict: every op an espnn:: op)"
                                                                    if args.strict else ""))
        edge, io = compile_steps.lower_oplib(quantized, example, int8_io=args.int8_io)
    else:
        budget = f", arena budget {args.arena_budget:,} B" if args.arena_budget else ""
        steps(f"lowering for {args.target} (schedule {args.schedule}{budget})"
              + (" (strict: no CPU fallback)" if args.strict else ""))
        edge, io = compile_steps.lower(quantized, example, args.target, args.strict, schedule=args.schedule,
                                       arena_budget=args.arena_budget, int8_io=args.int8_io)
        report = delegation_report(edge)
    steps(f"writing {output}")
    # to_executorch rewrites the programs in place (out variants, planned allocations), which the
    # reference run of espnn:: ops (their torch.library implementations) cannot execute: it runs a copy.
    reference = copy.deepcopy(edge) if oplib else edge
    pte = compile_steps.to_pte(edge)
    if oplib:
        # No partitions: the program's kernel calls in order (espnn:: and portable), as `espnn report` reads them.
        report = pte_report(pte)
        if args.strict:
            compile_steps.refuse_portable_ops(report)
    write_file(output, pte, "--output")
    if not oplib:
        compile_steps.add_planned_memory(report, pte)
    # lazy: document imports the partition package (torch, executorch); `espnn --help` must load without them
    from .document import memory_warnings

    for text in memory_warnings(report, args.target):
        warning(text)

    steps("running on the host runtime")

    missing = runtime.missing_host_kernels(pte)
    if missing:
        warning(f"this host's ExecuTorch runtime lacks CPU kernel(s) {', '.join(missing)} that {output} calls: "
                "verifying the lowered program instead (delegates on the native runtime, CPU ops in PyTorch); "
                "a device build must link these kernels")
    runner = compile_steps.HostRunner(pte, reference, use_pte=not missing, io=io, oplib=oplib)
    verification = compile_steps.verify(runner, quantized, calib.batches[:args.verify_samples], args.tolerance_lsb)
    far = deviation_warning(verification) if args.tolerance_lsb is None else None
    if far:
        warning(far)
    accuracy = None
    if eval_data is not None:
        steps(f"accuracy on {eval_data.source} ({eval_data.samples} samples)")
        accuracy = compile_steps.accuracy(model, quantized, runner, eval_data)

    # lazy: document imports the partition package (torch, executorch); `espnn --help` must load without them
    from .document import compile_document, print_summary, write_outputs

    doc = compile_document(
        model=args.model, target=args.target, strict=args.strict, schedule=None if oplib else args.schedule,
        arena_budget=args.arena_budget, mode={"requested": args.mode, "used": mode, "reason": mode_reason}, pte_path=output, pte_bytes=len(pte),
        report=report, calibration={"source": calib.source, "batches": len(calib.batches)}, qat=qat_info,
        verification=verification, accuracy=accuracy, missing_kernels=missing, warnings=warnings,
        seconds=time.monotonic() - t0, int8_io=io.as_report() if io else None)
    write_outputs(doc, json_path, args.html)
    print_summary(doc, json_path=json_path, html_path=args.html, verbose=args.verbose)
    return EXIT_OK if verification["passed"] else EXIT_VERIFICATION_FAILED

