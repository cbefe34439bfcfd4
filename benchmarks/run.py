#!/usr/bin/env python3
"""Benchmark harness: executorch-espnn against ExecuTorch's XNNPACK and
portable paths on the same int8 models, on this host. A script, not a test.

    python benchmarks/run.py                       # every model, table on stdout
    python benchmarks/run.py --models ds_cnn,transformer --iters 20
    python benchmarks/run.py --json out.json        # also JSON (date, commit, figures)

Per model (docs/performance.md says what each column means and how to read it):

* the float model comes from ``executorch_espnn.models`` (random weights,
  settled batch norm) and is quantized ONCE with EspNNQuantizer
  (``executorch_espnn.quantize``: prepare_pt2e -> calibrate -> convert_pt2e);
* that one quantized graph is exported and lowered two ways, each timed:
  ours (``to_espnn_edge`` -> ``to_executorch``) and no delegate at all
  (``to_edge`` -> ``to_executorch``: ExecuTorch's portable and quantized CPU
  kernels), so these two .pte files compute the same quantized model;
* XNNPACK: ExecuTorch 1.5.1's XNNPACK does not take our convert_pt2e graph
  whole (DS-CNN and MobileNetV2: convs left on the CPU; MobileNetV3-Small
  and the transformer block: the delegate fails to init), so the same float
  model is quantized with XNNPACKQuantizer (per-channel symmetric) and
  lowered with ``XnnpackPartitioner`` -- the same network, not the same
  int8 numbers (``--xnnpack-same-graph`` tries ours first and reports why
  it was not used);
* host latency of the three programs in ``executorch.runtime``, interleaved
  (one run of each per round, median over rounds), as ratios to ours;
* arena vs its lower bound and the ESP32-S3 SIMD-eligible MAC share of the
  ESP-NN payloads (``executorch_espnn.analysis``);
* optionally (--xtensa), guest instructions per inference of the ESP-NN
  payloads on an emulated Xtensa lx106 (xtensa-sim, QEMU --icount), and the
  interpreter's cost of an op that computes nothing (a RESHAPE view) as the
  share of the interpreter in those counts. Not S3 cycles: lx106 has no SIMD
  and the count is instructions, not time.

No figure here is a device figure. The host latencies measure the
interpreter with ESP-NN's ANSI C kernels (or the project's stand-in) on
x86-64, not the ESP32-S3 SIMD paths.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("ds_cnn", "mobilenet_v2", "mobilenet_v3_small", "transformer")


# ---------------------------------------------------------------- models
def make_model(name: str):
    """(float model in eval mode, example inputs, calibration batches)."""
    import torch

    from executorch_espnn import models

    if name == "transformer":
        # One pre-norm encoder block (attention + MLP) of the zoo's ViT on 64
        # tokens of width 64.
        from executorch_espnn.models.vit import Block

        torch.manual_seed(0)
        model = Block(dim=64, heads=4, mlp_ratio=4).eval()
        example = (torch.randn(1, 64, 64),)
    else:
        model, example = getattr(models, name)()
    g = torch.Generator().manual_seed(1)
    calibration = [example] + [tuple(torch.randn(x.shape, generator=g) for x in example) for _ in range(3)]
    return model, example, calibration


# ---------------------------------------------------------------- lowering
@dataclass
class Lowered:
    pte: bytes
    seconds: float
    note: str = ""
    cpu_compute_ops: list[str] = field(default_factory=list)  # XNNPACK: what it left on the CPU


def lower_espnn(converted, example) -> tuple[Lowered, list[bytes]]:
    import torch

    from executorch_espnn import delegate_payloads, to_espnn_edge

    t = time.perf_counter()
    edge = to_espnn_edge(torch.export.export(converted, example))
    pte = edge.to_executorch().buffer
    seconds = time.perf_counter() - t
    return Lowered(pte, seconds), delegate_payloads(edge)


def lower_xnnpack(converted, example) -> Lowered:
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    t = time.perf_counter()
    edge = to_edge_transform_and_lower(torch.export.export(converted, example), partitioner=[XnnpackPartitioner()])
    pte = edge.to_executorch().buffer
    seconds = time.perf_counter() - t
    left = _cpu_compute_ops(edge)
    return Lowered(pte, seconds, "same convert_pt2e graph (EspNNQuantizer)"
                   + (f"; {len(left)} conv/linear/matmul ops left on the CPU" if left else ""), left)


def _cpu_compute_ops(edge) -> list[str]:
    """conv / linear / matmul nodes that no delegate took."""
    gm = edge.exported_program().graph_module
    names = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    return [n for n in names if any(k in n for k in ("convolution", "linear", "addmm", ".mm.", "bmm"))]


def lower_xnnpack_own_quantizer(model, example, calibration) -> Lowered:
    """Fallback when XNNPACK cannot run our convert_pt2e graph: XNNPACK's own
    quantizer (per-channel symmetric int8) on the same float model -- the
    same network, but not the same quantized numbers."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)

    from executorch_espnn import quantize

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    lowered = lower_xnnpack(quantize(model, example, calibration, quantizer=quantizer), example)
    lowered.note = "XNNPACKQuantizer on the same float model"
    return lowered


def loads(pte: bytes) -> str | None:
    """None if executorch.runtime can load the program's forward, else why not."""
    from executorch.runtime import Runtime

    try:
        Runtime.get().load_program(pte).load_method("forward")
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:160]}"
    return None


def lower_portable(converted, example) -> Lowered:
    import executorch.kernels.quantized  # noqa: F401  (out variants of quantized_decomposed ops)
    import torch
    from executorch.exir import to_edge

    t = time.perf_counter()
    pte = to_edge(torch.export.export(converted, example)).to_executorch().buffer
    return Lowered(pte, time.perf_counter() - t, "no delegate: portable + quantized CPU kernels")


# ---------------------------------------------------------------- latency
def set_threads(n: int) -> int:
    """ExecuTorch's CPU threadpool (used by XNNPACK and some portable ops).
    Default 1: our delegate and ESP-NN are single-threaded, and idle pool
    threads spinning after an XNNPACK run would steal a 2-core host's time
    from the next program of the round."""
    from executorch.extension.pybindings import portable_lib

    portable_lib._unsafe_reset_threadpool(n)
    return portable_lib._threadpool_get_thread_count()


def interleaved_latency(programs: dict[str, bytes], example, rounds: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds per forward of each program; every round runs each
    program once, in turn, so machine load hits all of them alike."""
    import executorch_espnn  # noqa: F401  (registers the EspNNBackend delegate)
    import executorch.kernels.quantized  # noqa: F401  (quantized_decomposed kernels for the portable .pte)
    from executorch.runtime import Runtime

    rt = Runtime.get()
    methods = {k: rt.load_program(v).load_method("forward") for k, v in programs.items()}
    inputs = list(example)
    for _ in range(warmup):
        for m in methods.values():
            m.execute(inputs)
    times: dict[str, list[float]] = {k: [] for k in methods}
    for _ in range(rounds):
        for k, m in methods.items():
            t = time.perf_counter()
            m.execute(inputs)
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


# ---------------------------------------------------------------- Xtensa
_XTENSA: dict = {}


def xtensa_icounts(payloads: list[bytes], workdir: Path) -> list[int] | str:
    """Guest instructions of one inference per payload on Xtensa lx106 under
    QEMU: icount(--runs=1) - icount(--runs=0) of the firmware's bundle
    runner (tests/firmware), as tests/firmware/test_xtensa_sim.py measures."""
    sys.path.insert(0, str(REPO / "tools"))  # espnn_dev: the lx106 firmware build the tests use too
    from espnn_dev import xtensa_build as xb

    from executorch_espnn import bundle as B

    why = xb.problem()
    if why:
        return f"skipped: {why}"
    if "build" not in _XTENSA:
        _XTENSA["build"] = xb.build(workdir, None)  # the whole runtime + kernels, once per process
    build = _XTENSA["build"]
    if isinstance(build, str):
        return f"skipped: {build.splitlines()[0]}"
    import re

    def per_run(blob: bytes, tag: str) -> int | str:
        path = workdir / f"{tag}.xtsb"
        path.write_bytes(B.write_bundle([B.make_case(tag, blob)]))
        n = []
        for runs in (0, 1):
            r = build.run("--no-clock", f"--runs={runs}", str(path), icount=True, timeout=600)
            if r.returncode != 0:
                return f"failed: exit {r.returncode}: {r.stdout[-300:]}"
            n.append(int(re.search(r"guest instructions executed: (\d+)", r.stderr).group(1)))
        return n[1] - n[0]

    if "dispatch" not in _XTENSA:
        # Interpreter cost of one op that computes nothing: a RESHAPE view
        # (same arena bytes; its eval decodes two tensor records and returns),
        # from chains of 1 and 101 of them.
        short, long_ = per_run(_view_chain(1), "views1"), per_run(_view_chain(101), "views101")
        _XTENSA["dispatch"] = (long_ - short) / 100 if isinstance(short, int) and isinstance(long_, int) else None
    counts = []
    for i, blob in enumerate(payloads):
        c = per_run(blob, f"p{i}")
        if isinstance(c, str):
            return c
        counts.append(c)
    return counts


def _view_chain(n: int) -> bytes:
    from executorch_espnn.xts3_writer import Xts3Writer

    w = Xts3Writer()
    t = first = w.tensor((16,))
    for k in range(n):
        nxt = w.tensor((4, 4) if k % 2 == 0 else (16,))
        w.op("RESHAPE", [t], [nxt])
        t = nxt
    w.set_inputs([first])
    w.set_outputs([t])
    return w.to_bytes()


# ---------------------------------------------------------------- report
@dataclass
class Row:
    model: str
    macs: int = 0
    partitions: int = 0
    lower_s: float = 0.0
    xnnpack_lower_s: float = 0.0
    portable_lower_s: float = 0.0
    pte_bytes: int = 0
    xnnpack_pte_bytes: int = 0
    arena_bytes: list[int] = field(default_factory=list)
    arena_lower_bound: list[int] = field(default_factory=list)
    s3_simd_fraction: float = 0.0
    latency_s: dict[str, float] = field(default_factory=dict)
    xtensa_instructions: list[int] | str = "not run"
    payloads: list[bytes] = field(default_factory=list, repr=False)  # not in the JSON
    op_counts: list[int] = field(default_factory=list)  # XTS3 ops per payload
    notes: list[str] = field(default_factory=list)


def bench(name: str, rounds: int, xtensa: bool, workdir: Path, xnn_same_graph: bool) -> Row:
    from executorch_espnn import quantize
    from executorch_espnn.analysis import payload_metrics

    # Out variants of quantized_decomposed ops: needed by to_executorch for
    # every q/dq node left on the CPU (ours with fallback, portable).
    import executorch.kernels.quantized  # noqa: F401

    row = Row(name)
    model, example, calibration = make_model(name)
    converted = quantize(model, example, calibration)
    ours, payloads = lower_espnn(converted, example)
    row.lower_s, row.pte_bytes, row.partitions = ours.seconds, len(ours.pte), len(payloads)
    row.payloads = payloads
    metrics = [payload_metrics(p) for p in payloads]
    row.op_counts = [len(m.ops) for m in metrics]
    row.arena_bytes = [m.arena_bytes for m in metrics]
    row.arena_lower_bound = [m.arena_lower_bound for m in metrics]
    row.macs = sum(m.macs for m in metrics)
    row.s3_simd_fraction = sum(m.s3_simd_macs for m in metrics) / row.macs if row.macs else 1.0
    programs = {"espnn": ours.pte}
    try:
        if xnn_same_graph:
            xnn = lower_xnnpack(converted, example)
            why = loads(xnn.pte)
        else:
            xnn, why = Lowered(b"", 0.0, "not tried (--xnnpack-same-graph)"), "not tried"
        if why is not None or xnn.cpu_compute_ops:
            # Not accepted: compare with XNNPACK's own flow instead.
            if xnn_same_graph:
                row.notes.append("xnnpack on our quantized graph: " + (
                    f"lowers but does not load ({why})" if why else xnn.note))
            xnn = lower_xnnpack_own_quantizer(model, example, calibration)
            why = loads(xnn.pte)
            if xnn.cpu_compute_ops:
                xnn.note += f"; {len(xnn.cpu_compute_ops)} conv/linear/matmul ops left on the CPU"
        if why is None:
            row.xnnpack_lower_s, row.xnnpack_pte_bytes = xnn.seconds, len(xnn.pte)
            programs["xnnpack"] = xnn.pte
            row.notes.append(f"xnnpack: {xnn.note}")
        else:
            row.notes.append(f"xnnpack: does not load ({why})")
    except Exception as e:  # noqa: BLE001  (reported, the rest of the row still runs)
        row.notes.append(f"xnnpack lowering failed: {type(e).__name__}: {str(e)[:200]}")
    portable = lower_portable(converted, example)
    row.portable_lower_s = portable.seconds
    programs["portable"] = portable.pte
    row.latency_s = interleaved_latency(programs, example, rounds)
    if xtensa:
        row.xtensa_instructions = xtensa_icounts(payloads, workdir)
    return row


def _kb(n: int) -> str:
    return f"{n / 1024:.1f}K"


def table(rows: list[Row]) -> str:
    head = ["model", "MMAC", "lower s (ours/xnn)", ".pte (ours/xnn)", "arena / bound", "S3 SIMD",
            "host ms ours", "portable/ours", "xnnpack/ours", "lx106 instr/inf"]
    lines = []
    for r in rows:
        lat = r.latency_s
        ours = lat.get("espnn")
        arena = ", ".join(f"{a}/{b}" for a, b in zip(r.arena_bytes, r.arena_lower_bound))
        xt = r.xtensa_instructions
        xt = ", ".join(f"{c / 1e6:.1f}M" for c in xt) if isinstance(xt, list) else xt
        lines.append([
            r.model, f"{r.macs / 1e6:.1f}",
            f"{r.lower_s:.1f}/{r.xnnpack_lower_s:.1f}" if r.xnnpack_pte_bytes else f"{r.lower_s:.1f}/-",
            f"{_kb(r.pte_bytes)}/{_kb(r.xnnpack_pte_bytes)}" if r.xnnpack_pte_bytes else f"{_kb(r.pte_bytes)}/-",
            arena, f"{100 * r.s3_simd_fraction:.1f}%", f"{1e3 * ours:.2f}",
            f"{lat['portable'] / ours:.2f}", f"{lat['xnnpack'] / ours:.2f}" if "xnnpack" in lat else "-", xt,
        ])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = " | ".join(f"{{:{w}}}" for w in widths)
    out = [fmt.format(*head), "-+-".join("-" * w for w in widths)] + [fmt.format(*l) for l in lines]
    return "\n".join(out)


def host_info() -> dict:
    """What the host latencies depend on (they are not device figures)."""
    import os
    import platform

    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"python": sys.version.split()[0], "cpu": cpu, "cpus": os.cpu_count(),
            "load_average_1min_at_end": os.getloadavg()[0]}


def commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    ap.add_argument("--iters", type=int, default=10, help="interleaved latency rounds (median reported)")
    ap.add_argument("--xnnpack-same-graph", action="store_true",
                    help="first try XNNPACK on our own convert_pt2e graph (in ExecuTorch 1.5.1 it leaves convs on "
                         "the CPU or fails to init for these models; then XNNPACKQuantizer is used anyway)")
    ap.add_argument("--xtensa", default="ds_cnn,transformer",
                    help="models whose payloads are counted on Xtensa lx106 under QEMU ('' for none)")
    ap.add_argument("--threads", type=int, default=1, help="ExecuTorch CPU threadpool size (XNNPACK)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--bundle", type=Path,
                    help="also write the ESP-NN payloads as a board bundle for main/ (docs/performance.md §3)")
    ap.add_argument("--bundle-runs", type=int, default=20, help="timed runs per case in --bundle")
    args = ap.parse_args(argv)
    threads = set_threads(args.threads)
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {','.join(MODELS)}")
    xtensa = {m for m in args.xtensa.split(",") if m}
    rows = []
    with tempfile.TemporaryDirectory(prefix="espnn-bench-") as tmp:
        for name in names:
            print(f"[{name}] ...", file=sys.stderr, flush=True)
            rows.append(bench(name, args.iters, name in xtensa, Path(tmp), args.xnnpack_same_graph))
    print(table(rows))
    print(f"  latency: median of {args.iters} interleaved rounds, ExecuTorch threadpool {threads} thread(s)")
    if _XTENSA.get("dispatch") is not None:
        per_op = _XTENSA["dispatch"]
        print(f"  lx106: interpreter cost of an op that computes nothing (RESHAPE view): {per_op:.0f} instructions")
        for r in rows:
            if isinstance(r.xtensa_instructions, list):
                share = per_op * sum(r.op_counts) / sum(r.xtensa_instructions)
                print(f"    {r.model}: {sum(r.op_counts)} ops x {per_op:.0f} = {100 * share:.3f}% of its instructions")
    for r in rows:
        for n in r.notes:
            print(f"  {r.model}: {n}")
    if args.bundle:
        from executorch_espnn import bundle as B

        cases = [B.make_case(f"{r.model}_p{i}", blob, runs=args.bundle_runs)
                 for r in rows for i, blob in enumerate(r.payloads)]
        args.bundle.write_bytes(B.write_bundle(cases))
        print(f"  board bundle: {args.bundle} ({len(cases)} cases, {args.bundle.stat().st_size} bytes)")
    if args.json:
        doc = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit(),
               "host": host_info(), "threads": threads, "rounds": args.iters, "lx106_instructions_per_noop_op": _XTENSA.get("dispatch"),
               "rows": [{k: v for k, v in asdict(r).items() if k != "payloads"} for r in rows]}
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
