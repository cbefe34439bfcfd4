#!/usr/bin/env python3
"""Guest instructions per inference on Espressif's QEMU (emulated ESP32-S3
and ESP32), per model and per op kind. A script that prints figures, not a
test; tests/idf checks the same builds for correctness.

    python benchmarks/emulated.py --qemu /opt/qemu-esp/bin/qemu-system-xtensa \\
        --build s3-simd=build-s3 --build s3-ansi=build-s3-ansi --build esp32=build-esp32 \\
        [--models ds_cnn,mobilenet_v2_05_96] [--json out.json]

Each --build is an `idf.py build` directory of the runner app (bundle mode,
data partition): `s3-simd` an esp32s3 build with CONFIG_NN_OPTIMIZED (ESP-NN's
S3 assembly), `s3-ansi` the same with CONFIG_NN_ANSI_C, `esp32` a plain
ESP32 build (ESP-NN's ESP32 build: ANSI C for these ops). The script writes
one bundle of single-op cases (one per op kind, sizes typical of a small
CNN) and one per model, runs each on each build under QEMU with
tools/qemu-esp's instruction counter (markers on espnn_pal_cycle_count,
-icount for a repeatable timer), and reports the median instructions
between the two reads of the cycle counter around each timed run.

Emulated figures: instructions, not cycles. QEMU has no pipeline model, no
cache or flash/PSRAM wait states, and counts a 128-bit vector MAC as one
instruction like an add; the ratio SIMD/ANSI says how many fewer
instructions the S3 routines execute, not how much faster silicon is.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from executorch_espnn import bundle as B
from executorch_espnn import quant_params as qp
from executorch_espnn.xts3_writer import Xts3Writer

REPO = Path(__file__).resolve().parents[1]
QEMU_ESP = REPO / "tools/qemu-esp/qemu-esp"
MODELS_FILE = REPO / "tests/idf/emulated_models.py"
S = 0.05  # activation scale of the single-op cases


def _conv(w, rng, op, src, cin, cout, hw, k, pad, groups=1, ch_mult=1):
    cin_g = cin // groups if op == "CONV2D" else 1
    n_out = cout
    weights = rng.integers(-127, 128, (n_out if op == "CONV2D" else 1, k, k, cin_g if op == "CONV2D" else cout),
                           dtype=np.int8)
    mult, shift = qp.conv_multipliers(S, np.full(n_out, 0.01, np.float32), S)
    dst = w.tensor([1, hw, hw, cout], scale=S, zero_point=0)
    extra = dict(groups=groups) if op == "CONV2D" else dict(ch_mult=ch_mult)
    w.op(op, [src, w.constant(weights), w.constant(rng.integers(-500, 500, n_out, dtype=np.int32)),
              w.constant(mult), w.constant(shift)], [dst],
         stride_h=1, stride_w=1, pad_top=pad, pad_left=pad, dilation_h=1, dilation_w=1, input_offset=0,
         output_offset=0, act_min=-128, act_max=127, **extra)
    return dst


def op_cases(runs: int) -> list[B.BundleCase]:
    """One single-op graph per op kind (int8, NHWC, 16-byte aligned arena)."""
    rng = np.random.default_rng(7)
    cases = []

    def one(name, build):
        w = Xts3Writer()
        build(w)
        cases.append(B.make_case(name, w.to_bytes(), seed=len(cases), runs=runs))

    def graph(shape, body):
        def build(w):
            x = w.tensor(shape, scale=S, zero_point=0)
            y = body(w, x)
            w.set_inputs([x])
            w.set_outputs([y])
        return build

    one("conv3x3_16to16_24x24", graph([1, 24, 24, 16], lambda w, x: _conv(w, rng, "CONV2D", x, 16, 16, 24, 3, 1)))
    one("conv1x1_32to32_24x24", graph([1, 24, 24, 32], lambda w, x: _conv(w, rng, "CONV2D", x, 32, 32, 24, 1, 0)))
    one("grouped_conv3x3_g4_32_24x24",
        graph([1, 24, 24, 32], lambda w, x: _conv(w, rng, "CONV2D", x, 32, 32, 24, 3, 1, groups=4)))
    one("depthwise3x3_32_24x24",
        graph([1, 24, 24, 32], lambda w, x: _conv(w, rng, "DEPTHWISE_CONV2D", x, 32, 32, 24, 3, 1)))

    def fc(w, x):
        qf = rng.integers(-127, 128, (64, 256), dtype=np.int8)
        mult, shift = qp.conv_multipliers(S, np.full(64, 0.01, np.float32), S)
        y = w.tensor([1, 64], scale=S, zero_point=0)
        w.op("FULLY_CONNECTED", [x, w.constant(qf), w.constant(rng.integers(-500, 500, 64, dtype=np.int32)),
                                 w.constant(mult), w.constant(shift)], [y],
             input_offset=0, filter_offset=0, output_offset=0, act_min=-128, act_max=127)
        return y
    one("fully_connected_256to64", graph([1, 256], fc))

    def pool(kind):
        def body(w, x):
            y = w.tensor([1, 12, 12, 32], scale=S, zero_point=0)
            w.op(kind, [x], [y], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2, pad_top=0, pad_left=0,
                 act_min=-128, act_max=127)
            return y
        return body
    one("avg_pool2x2_32_24x24", graph([1, 24, 24, 32], pool("AVG_POOL2D")))
    one("max_pool2x2_32_24x24", graph([1, 24, 24, 32], pool("MAX_POOL2D")))

    def binary(kind):
        def build(w):
            a = w.tensor([1, 24, 24, 32], scale=S, zero_point=0)
            b = w.tensor([1, 24, 24, 32], scale=S, zero_point=0)
            y = w.tensor([1, 24, 24, 32], scale=S, zero_point=0)
            if kind == "ADD":
                w.op("ADD", [a, b], [y], input1_offset=0, input2_offset=0, output_offset=0, act_min=-128,
                     act_max=127, **qp.add_params(S, S, S))
            else:
                m, s = qp.mul_multiplier(S, S, S)
                w.op("MUL", [a, b], [y], input1_offset=0, input2_offset=0, output_offset=0, output_mult=m,
                     output_shift=s, act_min=-128, act_max=127)
            w.set_inputs([a, b])
            w.set_outputs([y])
        return build
    one("add_32_24x24", binary("ADD"))
    one("mul_32_24x24", binary("MUL"))

    def softmax(w, x):
        y = w.tensor([1, 8, 64], scale=1 / 256, zero_point=-128)
        w.op("SOFTMAX", [x], [y], **qp.softmax_params(S))
        return y
    one("softmax_8x64", graph([1, 8, 64], softmax))
    return cases


def espnn(*args: str) -> None:
    """Runs the `espnn` command line in this interpreter; raises with its
    stderr tail when it fails."""
    cli = [sys.executable, "-c", "from executorch_espnn.cli import main; raise SystemExit(main())"]
    r = subprocess.run([*cli, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"espnn {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def model_bundle(model: str, work: Path, runs: int) -> Path:
    """`espnn compile` + `espnn bundle` of a model in tests/idf/emulated_models.py."""
    cli = [sys.executable, "-c", "from executorch_espnn.cli import main; raise SystemExit(main())"]
    pte, out = work / f"{model}.pte", work / f"{model}.xtsb"
    subprocess.run([*cli, "compile", f"{MODELS_FILE}:{model}", "-o", str(pte), "-q", "--verify-samples", "1"],
                   check=True, capture_output=True)
    subprocess.run([*cli, "bundle", str(pte), "-o", str(out), "--runs", str(runs), "-q"], check=True,
                   capture_output=True)
    return out


def run_counted(qemu: str, build: Path, bundle: Path, work: Path, timeout: float) -> tuple[B.RunLog, dict]:
    """Runs the bundle with the instruction counter; per case, the
    instructions of each timed run (from the marker pairs)."""
    counts = work / f"icount-{build.name}-{bundle.stem}.txt"
    counts.unlink(missing_ok=True)
    r = subprocess.run([sys.executable, str(QEMU_ESP), "run", "--qemu", qemu, "--build", str(build), "--bundle",
                        str(bundle), "--icount", str(counts), "--timeout", str(timeout)],
                       capture_output=True, text=True)
    # Exit 0: every case passed; 1: the session ended with failures (the
    # caller sees them in the results). Anything else - a crash, a timeout,
    # QEMU refusing the command line - is an error here, never an empty table.
    if r.returncode not in (0, 1):
        raise RuntimeError(f"qemu-esp exit {r.returncode} on {bundle.name} with {build}:\n"
                           f"{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
    run = B.check_run(r.stdout)
    if not run.results:
        raise RuntimeError(f"{bundle.name} on {build}: the session reported no case")
    if not counts.is_file():
        raise RuntimeError(f"the instruction counter wrote nothing ({counts}); stderr:\n{r.stderr[-2000:]}")
    marks = [int(line.split()[3]) for line in counts.read_text().splitlines() if line.startswith("mark ")]
    per_case, k = {}, 0
    for name, rec in run.results.items():
        n = int(rec.get("runs") or 0) if rec.get("status") == "pass" else 0
        pairs = marks[k:k + 2 * n]
        k += 2 * n
        per_case[name] = [pairs[i + 1] - pairs[i] for i in range(0, len(pairs) - 1, 2)]
    if k != len(marks):
        raise RuntimeError(f"{counts}: {len(marks)} marker hits, {k} expected from the result lines")
    return run, per_case


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qemu", required=True, help="Espressif's qemu-system-xtensa")
    ap.add_argument("--build", action="append", required=True, metavar="LABEL=DIR",
                    help="a runner build; LABEL names the column (s3-simd, s3-ansi, esp32, ...)")
    ap.add_argument("--models", default="ds_cnn,mobilenet_v2_05_96")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per case (median reported)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    builds = dict(b.split("=", 1) for b in args.build)
    work = Path(tempfile.mkdtemp(prefix="espnn-emulated-"))
    bundles = {"ops": work / "ops.xtsb"}
    bundles["ops"].write_bytes(B.write_bundle(op_cases(args.runs)))
    for m in filter(None, args.models.split(",")):
        bundles[m] = model_bundle(m, work, args.runs)

    table: dict[str, dict[str, int | str]] = {}
    for label, build in builds.items():
        target = json.loads((Path(build) / "config/sdkconfig.json").read_text())["IDF_TARGET"]
        for tag, bundle in bundles.items():
            if target == "esp32" and tag not in ("ops", "ds_cnn"):
                continue  # no PSRAM: the pool does not hold the larger models
            run, per_case = run_counted(args.qemu, Path(build), bundle, work, args.timeout)
            for name, rec in run.results.items():
                row = table.setdefault(name, {})
                row[label] = (int(statistics.median(per_case[name])) if per_case[name]
                              else f"{rec.get('status')}:{rec.get('stage', '')}")
    labels = list(builds)
    ratio = "s3-simd" in builds and "s3-ansi" in builds
    head = ["case", *labels] + (["SIMD/ANSI"] if ratio else [])
    rows = []
    for name, row in table.items():
        cells = [name, *(f"{row[x]:,}" if isinstance(row.get(x), int) else str(row.get(x, "-")) for x in labels)]
        if ratio:
            a, b = row.get("s3-simd"), row.get("s3-ansi")
            cells.append(f"{a / b:.3f}" if isinstance(a, int) and isinstance(b, int) and b else "-")
        rows.append(cells)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print("guest instructions per inference, emulated (QEMU), not cycles")
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    if args.json:
        args.json.write_text(json.dumps({"builds": builds, "instructions": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
