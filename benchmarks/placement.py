#!/usr/bin/env python3
"""Memory placement of the zoo models on the emulated ESP32-S3, and the guest
instructions per inference in each placement. A script that prints figures
(and writes them with --json), not a test.

    python benchmarks/placement.py --qemu $ESPNN_QEMU_ESP \\
        --build internal-first=BUILD_A --build psram=BUILD_B \\
        --bundle ds_cnn=ds_cnn-fused.xtsb --bundle mobilenet_v2_224=mnv2.xtsb ... [--json out.json]
    python benchmarks/placement.py --qemu $ESPNN_QEMU_ESP --build internal-first=BUILD_A \
        --probe-budget 200000:360000 [--json out.json]

Each --build is an `idf.py build` directory of the runner app (bundle mode,
data partition) for esp32s3: `internal-first` with the esp32s3 defaults
(ESPNN_MEMORY_INTERNAL_FIRST: internal RAM first, PSRAM for a block that
does not fit), `psram` with every block forced to PSRAM
(ESPNN_MEMORY_RUNTIME_ALLOCATOR with the pool in PSRAM:
CONFIG_ESPNN_RUNNER_POOL_PSRAM=y, CONFIG_ESPNN_RUNNER_POOL_KB=2048). Each
bundle runs on each build under tools/qemu-esp with the instruction counter
(benchmarks/emulated.py's run_counted); the table gives where the runner put
arena and scratch (its arena_mem= / scratch_mem= fields) and the
instructions of the timed run.

--probe-budget LO:HI measures the free internal blocks the runner finds
(INTERNAL_FREE_BLOCKS of executorch_espnn/s3_placement.py) on the first
--build: cases whose only memory is an arena of a chosen size (a tiny input
resized up to [1, H, 1, 16] and max-pooled back, so the bundle stays small),
narrowed from 4,096-byte to 16-byte steps between LO and HI; then, with an
arena in the big block, cases adding a depthwise conv whose ESP-NN scratch
grows in 16-byte steps. It prints the largest size the runner placed in
internal RAM and the smallest it placed in PSRAM, for each.

Espressif's QEMU counts instructions and models no PSRAM wait states or
caches: the same code runs whichever memory holds the data, so equal counts
are expected and say nothing of the cycle cost of PSRAM, which was not
measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _emulated():
    spec = importlib.util.spec_from_file_location("emulated", HERE / "emulated.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pairs(values: list[str], what: str) -> list[tuple[str, Path]]:
    out = []
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--{what} {v}: expected NAME=PATH")
        out.append((name, Path(path)))
    return out


def measure(qemu: str, builds, bundles, timeout: float) -> list[dict]:
    run_counted = _emulated().run_counted
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, bundle in bundles:
            for build_name, build in builds:
                run, counts = run_counted(qemu, build, bundle, Path(tmp), timeout)
                for case, rec in run.results.items():
                    runs = counts.get(case) or []
                    rows.append({"model": model, "case": case, "build": build_name, "status": rec.get("status"),
                                 "arena": rec.get("arena"), "scratch": rec.get("scratch"),
                                 "arena_mem": rec.get("arena_mem"), "scratch_mem": rec.get("scratch_mem"),
                                 "instructions": min(runs) if runs else None})
    return rows


def with_prediction(rows: list[dict], bundles) -> list[dict]:
    """Adds what executorch_espnn.s3_placement predicts for each case from the
    runner's own arena= and scratch= (the S3 build's scratch) and the model's
    fused-region data: the compile report's rule, checked against the run."""
    from executorch_espnn import _native, s3_placement
    from executorch_espnn import bundle as B

    persistent = {}
    for _, bundle in bundles:
        for c in B.read_bundle(bundle.read_bytes()):
            persistent[c["name"]] = _native.Program(c["model"]).persistent_bytes
    for r in rows:
        if r["status"] != "pass":
            continue
        blocks = _native.predict_placement(r["arena"], r["scratch"], persistent[r["case"]], s3_placement.MEMORY_SOURCE,
                                           True, list(s3_placement.INTERNAL_FREE_BLOCKS))
        r["regions"] = persistent[r["case"]]
        r["predicted"] = {b["block"]: b["memory"] for b in blocks}
    return rows


def _probe_case(arena_bytes: int, dw: tuple[int, int] | None = None):
    """A case whose arena is about `arena_bytes` + 16: a tiny input resized up
    to [1, H, 1, 16] and max-pooled back (input and output take 16 bytes
    each). With dw=(h, w), also a 3x3 depthwise conv on [1, h, w, 16], whose
    ESP-NN scratch on the S3 build grows with (h + 2) * (w + 2); the resized
    tensor shrinks by its input so the arena stays about the same."""
    import numpy as np

    from executorch_espnn import bundle as B
    from executorch_espnn import quant_params as qp
    from executorch_espnn.xts3_writer import Xts3Writer

    c, s = 16, 0.05
    w = Xts3Writer()
    inputs, outputs = [], []
    if dw is not None:
        rng = np.random.default_rng(3)
        a = w.tensor([1, dw[0], dw[1], c], scale=s, zero_point=0)
        b = w.tensor([1, dw[0], dw[1], c], scale=s, zero_point=0)
        mult, shift = qp.conv_multipliers(s, np.full(c, 0.01, np.float32), s)
        w.op("DEPTHWISE_CONV2D", [a, w.constant(rng.integers(-127, 128, (1, 3, 3, c), dtype=np.int8)),
                                  w.constant(rng.integers(-500, 500, c, dtype=np.int32)), w.constant(mult),
                                  w.constant(shift)], [b],
             stride_h=1, stride_w=1, pad_top=1, pad_left=1, dilation_h=1, dilation_w=1, input_offset=0,
             output_offset=0, act_min=-128, act_max=127, ch_mult=1)
        inputs.append(a)
        outputs.append(b)
    h = arena_bytes // 16
    x = w.tensor([1, 1, 1, c], scale=s, zero_point=0)
    mid = w.tensor([1, h, 1, c], scale=s, zero_point=0)
    w.op("RESIZE_NEAREST", [x, w.constant(np.zeros(h, np.int32)), w.constant(np.zeros(1, np.int32))], [mid])
    y = w.tensor([1, 1, 1, c], scale=s, zero_point=0)
    w.op("MAX_POOL2D", [mid], [y], kernel_h=h, kernel_w=1, stride_h=h, stride_w=1, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    w.set_inputs(inputs + [x])
    w.set_outputs(outputs + [y])
    name = f"arena{arena_bytes}" + (f"_dw{dw[0]}x{dw[1]}" if dw else "")
    return B.make_case(name, w.to_bytes(), seed=1, runs=1)


def _run_probe(qemu: str, build: Path, cases: list, work: Path, timeout: float, block: str) -> dict:
    """Runs probe cases; the largest `block` size placed internally and the smallest placed in PSRAM."""
    from executorch_espnn import bundle as B

    bundle = work / "probe.xtsb"
    bundle.write_bytes(B.write_bundle(cases))
    run, _ = _emulated().run_counted(qemu, build, bundle, work, timeout)
    placed = sorted((r[block], r[f"{block}_mem"], r["arena"]) for r in run.results.values()
                    if r.get("status") == "pass" and r.get(f"{block}_mem"))
    inside = [p for p in placed if p[1] == "internal"]
    outside = [p for p in placed if p[1] == "psram"]
    if not inside or not outside:
        raise RuntimeError(f"no boundary among the probe's {block} sizes: {placed}")
    return {"largest_internal": max(inside)[0], "smallest_psram": min(outside)[0],
            "arena": max(inside)[2] if block != "arena" else None}


def probe_free_blocks(qemu: str, build: Path, lo: int, hi: int, timeout: float) -> dict:
    """The two largest blocks internal RAM gives the runner: one arena alone
    (between lo and hi, narrowed from 4,096- to 16-byte steps); then, with an
    arena in that block, the largest ESP-NN scratch still placed internally."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        step, lo = 4096, lo - lo % 16
        while True:
            one = _run_probe(qemu, build, [_probe_case(n) for n in range(lo, hi + 1, step)], work, timeout, "arena")
            if step == 16:
                break
            lo, hi, step = one["largest_internal"] - 16, one["smallest_psram"], step // 16
        # An arena just below the big block (its inputs and outputs add 16-byte
        # pieces), then depthwise scratches: (h, 16) in steps of eight rows, of
        # one row, then every (h + 2) * (w + 2) between the two rows around the
        # boundary (the S3 build's scratch is 16 bytes per padded pixel and a
        # constant; the runner's scratch= field is what is read).
        arena = one["largest_internal"] - 1024

        def scratch_probe(shapes):
            return _run_probe(qemu, build, [_probe_case(arena - h * w * 16, (h, w)) for h, w in shapes], work,
                              timeout, "scratch")

        coarse = scratch_probe([(h, 16) for h in range(4, 200, 8)])
        row = (coarse["largest_internal"] - 176) // (16 * 18) - 2
        rows = scratch_probe([(h, 16) for h in range(row, row + 10)])
        k_lo, k_hi = (rows["largest_internal"] - 176) // 16, (rows["smallest_psram"] - 176) // 16
        shapes = []
        for k in range(k_lo, k_hi + 1):
            f = next((d for d in range(3, 64) if k % d == 0 and k // d >= 3), None)
            if f is not None:
                shapes.append((k // f - 2, f - 2))
        second = scratch_probe(shapes)
    return {"one_block": {k: v for k, v in one.items() if k != "arena"},
            "after_an_arena_in_the_big_block": second}


def table(rows: list[dict], builds: list[str]) -> list[str]:
    lines = ["| model | arena B | scratch B (S3) | " + " | ".join(f"{b}: arena / scratch in | {b}: instructions"
                                                        for b in builds) + " |",
             "|---|---:|---:|" + "---|---:|" * len(builds)]
    for case in dict.fromkeys(r["case"] for r in rows):
        by = {r["build"]: r for r in rows if r["case"] == case}
        first = next(iter(by.values()))
        cells = []
        for b in builds:
            r = by.get(b)
            cells += ["-", "-"] if r is None else [f"{r['arena_mem']} / {r['scratch_mem'] or '-'}",
                                                   f"{r['instructions']:,}" if r["instructions"] else "-"]
        lines.append(f"| {first['model']} | {first['arena']:,} | {first['scratch']:,} | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qemu", required=True)
    ap.add_argument("--build", action="append", required=True, help="NAME=idf.py build directory")
    ap.add_argument("--bundle", action="append", default=[], help="MODEL=bundle file (.xtsb)")
    ap.add_argument("--probe-budget", metavar="LO:HI", help="measure the internal budget on the first --build")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    builds, bundles = _pairs(args.build, "build"), _pairs(args.bundle, "bundle")
    if args.probe_budget:
        lo, _, hi = args.probe_budget.partition(":")
        found = probe_free_blocks(args.qemu, builds[0][1], int(lo), int(hi), args.timeout)
        one, two = found["one_block"], found["after_an_arena_in_the_big_block"]
        print(f"{builds[0][0]}: one block: internal up to {one['largest_internal']:,} B, PSRAM from "
              f"{one['smallest_psram']:,} B; after an arena of {two['arena']:,} B: internal up to "
              f"{two['largest_internal']:,} B, PSRAM from {two['smallest_psram']:,} B")
        if args.json:
            args.json.write_text(json.dumps({"emulated": True, "build": str(builds[0][1]),
                                             "internal_free_blocks": found}, indent=1) + "\n")
        return 0
    rows = with_prediction(measure(args.qemu, builds, bundles, args.timeout), bundles)
    print("\n".join(table(rows, [b for b, _ in builds])))
    if args.json:
        args.json.write_text(json.dumps({"emulated": True, "builds": {b: str(p) for b, p in builds},
                                         "rows": rows}, indent=1) + "\n")
    return 0 if all(r["status"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
