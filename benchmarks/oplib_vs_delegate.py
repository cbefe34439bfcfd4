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
through ExecuTorch's host runtime; in the operator library each op call also
writes and checks a one-op program (docs/oplib.md, "What is left").

The emulated ESP32-S3 column is read from the device evidence
(docs/device-evidence.json, or --evidence): the median guest instructions of
the model's .pte suites on the .pte-mode build, pte_<model> (delegate) and
pte_oplib_<model> (operator library), each a program `espnn compile` made
from the same zoo model (its own calibration, so its own scales: instruction
counts do not depend on them beyond rounding paths). The evidence names the
device code it was measured at; the script prints it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

MODELS = ("ds_cnn", "mobilenet_v2", "mobilenet_v3_small", "small_vit", "gru_kws", "cumsum_island")
REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "docs/device-evidence.json"


def make_model(name: str):
    """(float model in eval mode, example inputs). cumsum_island (conv | cumsum
    in float on the CPU | conv, no zoo model has a CPU island) is the device
    evidence's own program (tests/idf/emulated_models.py)."""
    from executorch_espnn import models

    if name == "cumsum_island":
        import importlib.util

        spec = importlib.util.spec_from_file_location("emulated_models", REPO / "tests/idf/emulated_models.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.cumsum_island()
    return models.ZOO[name]()


def s3_instructions(evidence: dict | None, model: str) -> dict[str, int | None]:
    """Median emulated-S3 instructions per mode from the device evidence's .pte suites."""
    out = {}
    for mode, suite in (("delegate", f"pte_{model}"), ("oplib", f"pte_oplib_{model}")):
        counts = [c["instructions"] for c in (evidence or {}).get("cases", [])
                  if c["suite"] == suite and c["build"] == "esp32s3-pte" and c.get("status") == "pass"
                  and c.get("instructions")]
        out[mode] = int(statistics.median(counts)) if counts else None
    return out


def _planned(pte: bytes) -> int:
    from executorch_espnn.partition.report import pte_program

    return sum(sum(plan.non_const_buffer_sizes) for plan in pte_program(pte).execution_plan)


def _ours(pte: bytes) -> int:
    """The delegates' arenas (allocated together at load) plus the largest scratch."""
    from executorch_espnn.partition.report import pte_report

    totals = [m.totals() for m in pte_report(pte).methods.values()]
    return sum(t["arena_bytes"] + t["max_scratch_bytes"] for t in totals)


def measure(name: str, runs: int, samples: int, evidence: dict | None = None) -> dict:
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
    s3 = s3_instructions(evidence, name)
    modes = {mode: {"planned_memory_bytes": _planned(pte), "our_arena_scratch_bytes": _ours(pte),
                    "pte_bytes": len(pte), "host_latency_ms": round(latency[mode], 3),
                    "s3_instructions": s3[mode]}
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
           "oplib/delegate", "byte-identical", "S3 instructions (emulated)")


def rows(result: dict) -> list[list[str]]:
    out = []
    for r in result["models"]:
        for mode, m in r["modes"].items():
            total = m["planned_memory_bytes"] + m["our_arena_scratch_bytes"]
            out.append([r["model"], mode, f"{m['planned_memory_bytes']:,}", f"{m['our_arena_scratch_bytes']:,}",
                        f"{total:,}", f"{m['pte_bytes']:,}", f"{m['host_latency_ms']:.2f}",
                        f"{r['latency_ratio_oplib_over_delegate']:.2f}x" if mode == "oplib" else "",
                        ("yes" if r["outputs_byte_identical"] else "no") if mode == "oplib" else "",
                        f"{m['s3_instructions']:,}" if m.get("s3_instructions") else "not in the evidence"])
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
    ap.add_argument("--evidence", type=Path, default=EVIDENCE,
                    help="device evidence to read the emulated S3 instructions from (default docs/device-evidence.json)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or args.runs < 1 or args.samples < 1:
        ap.error(f"unknown model(s) {unknown} (known: {', '.join(MODELS)})" if unknown else
                 "--runs and --samples must be >= 1")

    import executorch_espnn  # noqa: F401  (registers the espnn:: kernels with ExecuTorch's runtime)

    evidence = json.loads(args.evidence.read_text()) if args.evidence.is_file() else None
    source = (f"{args.evidence} (device code {evidence['device_code_commit'][:7]}, .pte-mode build esp32s3-pte)"
              if evidence else f"no device evidence at {args.evidence}")
    result = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": _commit(),
              "runs": args.runs, "samples": args.samples, "emulated_s3": source, "models": []}
    for name in names:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        result["models"].append(measure(name, args.runs, args.samples, evidence))
    print(markdown_table(result) if args.markdown else text_table(result))
    print(f"\nemulated ESP32-S3 instructions (guest instructions, not cycles): {source}")
    print(f"host latency: median of {args.runs} interleaved calls per mode on this host; not device speed")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
