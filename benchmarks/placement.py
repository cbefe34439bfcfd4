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

--probe-budget LO:HI measures how large a block internal RAM still gives the
runner (the internal budget of executorch_espnn/s3_placement.py): bundles of
cases whose only memory is an arena of a chosen size (a tiny input resized
up to [1, H, 1, 16] and max-pooled back, so the bundle stays small), run on
the first --build, narrowed from 4,096-byte to 16-byte steps; it prints the
largest arena the runner placed in internal RAM and the smallest it placed
in PSRAM.

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


def _probe_case(arena_bytes: int):
    """A case whose arena is `arena_bytes` + 16 (its input and output take 16 bytes each, overlapped)."""
    import numpy as np

    from executorch_espnn import bundle as B
    from executorch_espnn.xts3_writer import Xts3Writer

    h, c, s = arena_bytes // 16, 16, 0.05
    w = Xts3Writer()
    x = w.tensor([1, 1, 1, c], scale=s, zero_point=0)
    mid = w.tensor([1, h, 1, c], scale=s, zero_point=0)
    w.op("RESIZE_NEAREST", [x, w.constant(np.zeros(h, np.int32)), w.constant(np.zeros(1, np.int32))], [mid])
    y = w.tensor([1, 1, 1, c], scale=s, zero_point=0)
    w.op("MAX_POOL2D", [mid], [y], kernel_h=h, kernel_w=1, stride_h=h, stride_w=1, pad_top=0, pad_left=0,
         act_min=-128, act_max=127)
    w.set_inputs([x])
    w.set_outputs([y])
    return B.make_case(f"arena{arena_bytes}", w.to_bytes(), seed=1, runs=1)


def probe_budget(qemu: str, build: Path, lo: int, hi: int, timeout: float) -> dict:
    """The largest arena the runner puts in internal RAM, between lo and hi (16-byte resolution)."""
    from executorch_espnn import bundle as B

    run_counted = _emulated().run_counted
    step = 4096
    lo -= lo % 16
    with tempfile.TemporaryDirectory() as tmp:
        while True:
            sizes = list(range(lo, hi + 1, step))
            bundle = Path(tmp) / f"probe{step}.xtsb"
            bundle.write_bytes(B.write_bundle([_probe_case(n) for n in sizes]))
            run, _ = run_counted(qemu, build, bundle, Path(tmp), timeout)
            placed = sorted((r["arena"], r["arena_mem"]) for r in run.results.values() if r.get("status") == "pass")
            inside = [a for a, m in placed if m == "internal"]
            outside = [a for a, m in placed if m == "psram"]
            if not inside or not outside:
                raise RuntimeError(f"no boundary between {lo} and {hi}: widen --probe-budget ({placed})")
            if step == 16:
                return {"largest_internal_arena": max(inside), "smallest_psram_arena": min(outside)}
            lo, hi, step = max(inside) - 16, min(outside), step // 16


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
        found = probe_budget(args.qemu, builds[0][1], int(lo), int(hi), args.timeout)
        print(f"{builds[0][0]}: largest arena in internal RAM {found['largest_internal_arena']:,} B, "
              f"smallest in PSRAM {found['smallest_psram_arena']:,} B")
        if args.json:
            args.json.write_text(json.dumps({"emulated": True, "build": str(builds[0][1]), **found}, indent=1) + "\n")
        return 0
    rows = measure(args.qemu, builds, bundles, args.timeout)
    print("\n".join(table(rows, [b for b, _ in builds])))
    if args.json:
        args.json.write_text(json.dumps({"emulated": True, "builds": {b: str(p) for b, p in builds},
                                         "rows": rows}, indent=1) + "\n")
    return 0 if all(r["status"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
