#!/usr/bin/env python3
"""Operator library (espnn:: ops, ExecuTorch plans the memory) vs the delegate
(ESP-NN partitions with our own arena), one run, on the zoo. A script, not a
test (docs/performance.md, "Operator library vs delegate", has a run).

    python benchmarks/oplib_vs_delegate.py                     # the six models of issue 28
    python benchmarks/oplib_vs_delegate.py --models ds_cnn --runs 21 --json out.json
    python benchmarks/oplib_vs_delegate.py --markdown          # the table of docs/performance.md

Per model: the zoo's float model is quantized once with EspNNQuantizer,
exported once, and that one program is lowered both ways (to_espnn_edge and
to_espnn_oplib). Per model and mode it prints ExecuTorch's planned memory
(the sum of the method's planned buffers in the .pte), our arena + scratch
(the delegate payloads' activation arenas plus the largest scratch; 0 for the
operator library, whose scratch buffers are inside ExecuTorch's plan), the
.pte size, the host latency (median of --runs calls of each program, the two
modes interleaved call by call in this one process, and the ratio
oplib/delegate) and whether the outputs are byte-identical on --samples
random inputs.

Host latency is not device speed: it is x86 (or the host's) ANSI C kernels
through ExecuTorch's host runtime, and in the operator library each op call
also builds a one-op program and copies its weights (docs/oplib.md, "What is
left"). The emulated ESP32-S3 columns (app image size, instructions) are
printed as "not measured": the ESP-IDF component does not build the operator
library's kernels yet, so there is no device image of an oplib program.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

MODELS = ("ds_cnn", "mobilenet_v2", "mobilenet_v3_small", "small_vit", "gru_kws", "cpu_island")
NOT_MEASURED = ("not measured: the ESP-IDF component does not build the operator library's kernels yet "
                "(docs/oplib.md), so there is no device image of an oplib program")


def cpu_island():
    """A conv net with one op ESP-NN does not lower (cumsum, float on ExecuTorch's
    portable kernels) between int8 convs: no zoo model has a CPU island."""
    import torch
    from torch import nn

    class Island(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.body = nn.Conv2d(16, 16, 3, padding=1)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            y = torch.cumsum(torch.relu(self.stem(x)), dim=2)  # the island
            y = torch.relu(self.body(y))
            return self.head(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))

    torch.manual_seed(0)
    return Island().eval(), (torch.randn(1, 3, 32, 32),)


def make_model(name: str):
    """(float model in eval mode, example inputs)."""
    from executorch_espnn import models

    return cpu_island() if name == "cpu_island" else models.ZOO[name]()


def _planned(pte: bytes) -> int:
    from executorch_espnn.partition.report import pte_program

    return sum(sum(plan.non_const_buffer_sizes) for plan in pte_program(pte).execution_plan)


def _ours(pte: bytes) -> int:
    """The delegates' arenas (allocated together at load) plus the largest scratch."""
    from executorch_espnn.partition.report import pte_report

    totals = [m.totals() for m in pte_report(pte).methods.values()]
    return sum(t["arena_bytes"] + t["max_scratch_bytes"] for t in totals)


def measure(name: str, runs: int, samples: int) -> dict:
    import executorch.kernels.quantized  # noqa: F401  (out variants of the quantize/dequantize ops left portable)
    import torch

    from executorch_espnn import pipeline, runtime, to_espnn_edge
    from executorch_espnn.oplib import to_espnn_oplib

    model, example = make_model(name)
    torch.manual_seed(0)
    calib = [tuple(torch.randn_like(x) for x in example) for _ in range(4)]
    quantized = pipeline.quantize(model, example, calib)
    ep = torch.export.export(quantized, example)
    lower = {"delegate": to_espnn_edge, "oplib": to_espnn_oplib}
    ptes, failed = {}, {}
    for mode, fn in lower.items():
        try:
            ptes[mode] = bytes(fn(ep).to_executorch().buffer)
        except Exception as e:  # noqa: BLE001 - a mode that cannot lower the model is a result, not a crash
            failed[mode] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}" if str(e) else type(e).__name__
    both = not failed  # the comparisons need both programs; each one's own figures do not
    programs = {mode: runtime.load_program(pte) for mode, pte in ptes.items()}

    gen = torch.Generator().manual_seed(1)
    inputs = [tuple(torch.randn(x.shape, generator=gen) for x in example) for _ in range(samples)]
    identical = True if both else None
    for x in inputs if both else ():
        outs = {mode: runtime.run_pte(None, x, program=p) for mode, p in programs.items()}
        identical &= all(a.numpy().tobytes() == b.numpy().tobytes()
                         for a, b in zip(outs["oplib"], outs["delegate"]))

    times = {mode: [] for mode in programs}
    for _ in range(runs):  # interleaved: a slower moment of the machine hits both modes
        for mode, p in programs.items():
            t = time.perf_counter()
            runtime.run_pte(None, inputs[0], program=p)
            times[mode].append(time.perf_counter() - t)
    latency = {mode: statistics.median(ts) * 1e3 for mode, ts in times.items()}
    modes = {mode: {"planned_memory_bytes": _planned(pte), "our_arena_scratch_bytes": _ours(pte),
                    "pte_bytes": len(pte), "host_latency_ms": round(latency[mode], 3),
                    "s3_app_image_bytes": None, "s3_instructions": None}
             for mode, pte in ptes.items()}
    ratio = round(latency["oplib"] / latency["delegate"], 3) if both else None
    return {"model": name, "failed": failed, "modes": modes, "latency_ratio_oplib_over_delegate": ratio,
            "outputs_byte_identical": identical}


def _commit() -> str | None:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


COLUMNS = ("model", "mode", "ET planned B", "our arena+scratch B", "planned total B", ".pte B", "host ms",
           "oplib/delegate", "byte-identical")


def rows(result: dict) -> list[list[str]]:
    out = []
    for r in result["models"]:
        for mode, m in r["modes"].items():
            total = m["planned_memory_bytes"] + m["our_arena_scratch_bytes"]
            out.append([r["model"], mode, f"{m['planned_memory_bytes']:,}", f"{m['our_arena_scratch_bytes']:,}",
                        f"{total:,}", f"{m['pte_bytes']:,}", f"{m['host_latency_ms']:.2f}",
                        f"{r['latency_ratio_oplib_over_delegate']:.2f}x" if mode == "oplib" else "",
                        ("yes" if r["outputs_byte_identical"] else "no") if mode == "oplib" else ""])
        for mode, why in r["failed"].items():
            out.append([r["model"], mode, f"lowering failed: {why}"] + [""] * (len(COLUMNS) - 3))
    return out


def text_table(result: dict) -> str:
    table = [list(COLUMNS)] + rows(result)
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     .rstrip() for r in table)


def markdown_table(result: dict) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(COLUMNS) - 2)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows(result)]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    ap.add_argument("--runs", type=int, default=11, help="timed calls per mode (median; default 11)")
    ap.add_argument("--samples", type=int, default=3, help="random inputs compared byte for byte (default 3)")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/performance.md)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or args.runs < 1 or args.samples < 1:
        ap.error(f"unknown model(s) {unknown} (known: {', '.join(MODELS)})" if unknown else
                 "--runs and --samples must be >= 1")

    import executorch_espnn  # noqa: F401  (registers the espnn:: kernels with ExecuTorch's runtime)

    result = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": _commit(),
              "runs": args.runs, "samples": args.samples, "emulated_s3": NOT_MEASURED, "models": []}
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        result["models"].append(measure(name, args.runs, args.samples))
    print(markdown_table(result) if args.markdown else text_table(result))
    print(f"\nemulated ESP32-S3 app image size and instructions: {NOT_MEASURED}")
    print(f"host latency: median of {args.runs} interleaved calls per mode on this host; not device speed")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
