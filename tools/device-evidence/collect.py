#!/usr/bin/env python3
"""Device evidence: builds the runner app with the emulation tool chain of
tools/device-toolchain/build.sh, runs every suite below on Espressif's QEMU
(emulated ESP32-S3 with octal PSRAM, and ESP32) with the instruction
counter, and writes docs/device-evidence.json. tools/device-evidence/render.py
then writes the tables in docs/device-evidence.md from it.

    export ESPNN_DEVICE_PREFIX=/opt/espnn-device       # build.sh's prefix
    python tools/device-evidence/collect.py [--only SUITE,...] [--builds LABEL,...]
    python tools/device-evidence/render.py

Each result is what the emulated chip computed compared with the host
runtime's expected outputs, bit for bit (bundle mode), or against the host
ExecuTorch run of the same .pte (.pte mode), plus guest instructions between
the two reads of the cycle counter around a timed run (median). Emulated:
instructions, not cycles; nothing here ran on silicon.

The JSON names the commit the runs were made at; a run on a tree with
uncommitted changes under components/, main/ or the project files is refused
(the evidence would name a commit that does not hold what ran).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tools"), str(REPO / "benchmarks")]  # espnn_dev: cases and builds shared with tests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from device_code import DEVICE_CODE  # noqa: E402
from espnn_dev import idf_project  # noqa: E402

import emulated  # noqa: E402
from executorch_espnn import bundle as B  # noqa: E402

EVIDENCE = REPO / "docs/device-evidence.json"
MODELS_FILE = REPO / "tests/idf/emulated_models.py"



@dataclass
class BuildSpec:
    label: str
    target: str
    defaults: list[str] = field(default_factory=list)
    pte: bool = False
    what: str = ""


BUILDS = [
    BuildSpec("esp32s3", "esp32s3", [], what="as shipped: octal PSRAM, ESP-NN optimized (S3 assembly)"),
    BuildSpec("esp32s3-ansi", "esp32s3", ["CONFIG_NN_ANSI_C=y"], what="as shipped, ESP-NN ANSI C kernels"),
    BuildSpec("esp32", "esp32", [], what="as shipped: no PSRAM"),
    # The operator-library programs were lowered on the host, whose ESP-NN
    # build sizes no SIMD scratch and stages no depthwise input: their kernels
    # take the S3's scratch from ExecuTorch's temp allocator, so its pool
    # holds the largest (in PSRAM). A whole-image staged depthwise conv of
    # MobileNetV2-224 (113 x 113 x 96 int8) needs about 1.2 MB of it.
    BuildSpec("esp32s3-pte", "esp32s3", ["CONFIG_ESPNN_RUNNER_TEMP_POOL_KB=2048"], pte=True,
              what=".pte mode (ExecuTorch runtime + EspNNBackend + espnn:: kernels + portable kernels), "
                   "octal PSRAM, 2 MiB temp pool"),
]


@dataclass
class Suite:
    name: str
    builds: list[str]
    make: object  # (work: Path) -> Path of the bundle / suite file
    kind: str = "bundle"  # bundle | pte
    expect_fail: list[str] = field(default_factory=list)  # the negative control's flipped case


def _op_corpus(work: Path) -> Path:
    from espnn_dev import op_corpus

    path = work / "op_corpus.xtsb"
    path.write_bytes(B.write_bundle(op_corpus.bundle_cases(runs=1)))
    return path


NEGATIVE_CASE = "selfcheck_cnn"


def _negative_control(work: Path) -> Path:
    """The op corpus with one byte of one case's expected output flipped: that
    case must fail on the chip (and only that one)."""
    from espnn_dev import op_corpus

    cases = op_corpus.bundle_cases(runs=1)
    (case,) = [c for c in cases if c.name == NEGATIVE_CASE]
    first = case.expected[0].copy()
    first.reshape(-1).view("uint8")[0] ^= 0x01
    case.expected = [first, *case.expected[1:]]
    path = work / "negative_control.xtsb"
    path.write_bytes(B.write_bundle(cases))
    return path


def _softmax_rows(work: Path) -> Path:
    from espnn_dev.dispatch_cases import softmax_row_cases

    path = work / "softmax_rows.xtsb"
    path.write_bytes(B.write_bundle(softmax_row_cases()))
    return path


def _dispatch(work: Path) -> Path:
    from espnn_dev import dispatch_cases

    path = work / "dispatch.xtsb"
    path.write_bytes(B.write_bundle(dispatch_cases.cases(runs=1)))
    return path


@functools.lru_cache(maxsize=None)
def _dispatch_table() -> dict[str, tuple[str, float]]:
    """case -> (kernel, share of the MACs on SIMD) per analysis/s3_dispatch.py,
    for the s3_dispatch suite."""
    from espnn_dev import dispatch_cases

    from executorch_espnn.analysis import payload_metrics

    out = {}
    for c in dispatch_cases.cases(runs=1):
        (op,) = payload_metrics(c.model).ops
        out[c.name] = (op.kernel, round(op.s3_simd_macs / op.macs, 3) if op.macs else float(op.s3_simd))
    return out


def _model(fn: str, schedule: str = "auto"):
    def make(work: Path) -> Path:
        pte, out = work / f"{fn}-{schedule}.pte", work / f"{fn}-{schedule}.xtsb"
        emulated.espnn("compile", f"{MODELS_FILE}:{fn}", "-o", str(pte), "-q", "--verify-samples", "1",
             "--schedule", schedule)
        emulated.espnn("bundle", str(pte), "-o", str(out), "--runs", "1", "-q")
        return out
    return make


# Every model of the zoo (executorch_espnn.models.ZOO, at its default size,
# a GRU keyword spotter among them), then programs whose float CPU part (ExecuTorch's
# portable kernels: a bidirectional LSTM, cumsum, sin/cos) runs between or
# around EspNNBackend delegates. The CPU part is float code compiled for the
# chip, with the chip's libm: its outputs may differ from the host's in the
# last bits, so those suites accept 1e-5 (absolute, outputs of order 1);
# fully delegated models end in an int8 dequantization and must be exact.
def _pte_models() -> dict[str, tuple[str, float]]:
    from executorch_espnn import models

    zoo = {name: (f"executorch_espnn.models:{name}", 0.0) for name in models.ZOO}
    return {**zoo, **{m: (f"{MODELS_FILE}:{m}", 1e-5) for m in ("lstm_after_conv", "cumsum_island",
                                                                 "cpu_op_at_each_end")}}


PTE_MODELS = _pte_models()
OPLIB_PTE_MODELS = ("ds_cnn", "mobilenet_v2", "mobilenet_v3_small", "small_vit", "gru_kws", "cumsum_island")


def _pte(name: str, spec: str, atol: float, mode: str = "delegate"):
    def make(work: Path) -> Path:
        from executorch_espnn import pte_suite

        stem = name if mode == "delegate" else f"{mode}_{name}"  # the suite name without pte_
        pte, out = work / f"{stem}.pte", work / f"{stem}.xtsp"
        # (CPU fallback is espnn compile's default: what ESP-NN cannot take stays on the CPU.)
        emulated.espnn("compile", spec, "-o", str(pte), "-q", "--verify-samples", "1", "--mode", mode)
        suite = pte_suite.make_suite(pte.read_bytes(), cases=2, runs=1, atol=atol, prefix=f"{name}.")
        out.write_bytes(pte_suite.write_suite(suite))
        return out
    return make


def _dim_order_refusal(work: Path) -> Path:
    """A .pte whose input is recorded channels-last, fed straight into the
    delegate: its one case passes only when Method::execute refuses the input
    with InvalidArgument (EspNNBackend's dim-order check), on the chip."""
    from espnn_dev import pte_models

    from executorch_espnn import pte_suite

    suite = pte_models.dim_order_refusal_suite()
    (work / "dim_order_refusal.pte").write_bytes(suite.pte)
    out = work / "dim_order_refusal.xtsp"
    out.write_bytes(pte_suite.write_suite(suite))
    return out


SIMD_AND_ANSI = ["esp32s3", "esp32s3-ansi"]
# PyTorch's standard modules as users write them (tests/runtime/test_standard_modules_*.py).
STANDARD_MODULE_MODELS = ["gru_kws", "lstm_kws", "transformer_encoder", "causal_encoder", "tcn_dilated",
                          "regnetx_stages", "grouped_stack"]
SUITES = [
    Suite("op_corpus", ["esp32s3", "esp32s3-ansi", "esp32"], _op_corpus),
    Suite("negative_control", ["esp32s3"], _negative_control, expect_fail=[NEGATIVE_CASE]),
    Suite("softmax_rows", ["esp32s3", "esp32"], _softmax_rows),
    Suite("s3_dispatch", SIMD_AND_ANSI, _dispatch),
    Suite("ds_cnn_fused", SIMD_AND_ANSI + ["esp32"], _model("ds_cnn", "fused")),
    Suite("ds_cnn_layer", SIMD_AND_ANSI + ["esp32"], _model("ds_cnn", "layer")),
    Suite("mobilenet_v2_224", SIMD_AND_ANSI, _model("mobilenet_v2_224", "auto")),
    Suite("mobilenet_v3_small_224", SIMD_AND_ANSI, _model("mobilenet_v3_small_224", "auto")),
    Suite("transformer_block", SIMD_AND_ANSI, _model("transformer_block")),
    Suite("small_vit", SIMD_AND_ANSI, _model("small_vit")),
    Suite("efficientnet_b0", SIMD_AND_ANSI, _model("efficientnet_b0")),
    *[Suite(m, SIMD_AND_ANSI, _model(m)) for m in STANDARD_MODULE_MODELS],
    *[Suite(f"pte_{m}", ["esp32s3-pte"], _pte(m, spec, atol), kind="pte") for m, (spec, atol) in PTE_MODELS.items()],
    # The models of docs/performance.md's comparison of the two modes in the
    # operator-library mode too (espnn:: kernels inside ExecuTorch's own memory
    # plan, docs/oplib.md). gru_kws is not among them: its GRU has no espnn:: op.
    *[Suite(f"pte_oplib_{m}", ["esp32s3-pte"], _pte(m, *PTE_MODELS[m], "oplib"), kind="pte")
      for m in OPLIB_PTE_MODELS],
    Suite("pte_dim_order_refusal", ["esp32s3-pte"], _dim_order_refusal, kind="pte"),
]


# ------------------------------------------------------------------ git
def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def source_state() -> dict:
    dirty = _git("status", "--porcelain", "--", *DEVICE_CODE)
    if dirty:
        raise SystemExit(f"collect: uncommitted changes in the device code; commit them first:\n{dirty}")
    return {"commit": _git("rev-parse", "HEAD"),
            "device_code_commit": _git("log", "-1", "--format=%H", "--", *DEVICE_CODE),
            "commit_date": _git("log", "-1", "--format=%cI")}


# ------------------------------------------------------------- builds
def _executorch_for(ptes: list[Path]) -> Path:
    """ExecuTorch cross-built for the S3 with the portable kernels of every
    operator the .pte files run on the CPU (one selective build for all)."""
    ops = sorted({op for p in ptes for op in idf_project.program_operators(p.read_bytes())})
    out, why = idf_project.executorch_build("esp32s3", ops)
    if out is None:
        raise SystemExit(f"collect: {why}")
    return out


def build(spec: BuildSpec, work: Path, executorch: Path | None) -> idf_project.Build:
    defaults, defines = idf_project.pte_mode(executorch) if spec.pte else ([], {})
    # The build's own settings last: a later line wins (the .pte defaults'
    # 16 KiB temp pool once overrode this build's).
    defaults += spec.defaults
    t0 = time.monotonic()
    b = idf_project.build(work / spec.label, spec.target, defaults=defaults, defines=defines)
    ours = idf_project.warnings_in_our_sources(b.log)
    if ours:
        raise RuntimeError(f"{spec.label}: compiler warnings in our sources:\n" + "\n".join(ours))
    print(f"  built {spec.label} in {time.monotonic() - t0:.0f} s", flush=True)
    return b


def build_facts(b: idf_project.Build, spec: BuildSpec) -> dict:
    sdk = b.sdkconfig()
    mem = next((k for k in ("ESPNN_MEMORY_RUNTIME_ALLOCATOR", "ESPNN_MEMORY_INTERNAL_FIRST",
                            "ESPNN_MEMORY_PSRAM_FIRST") if sdk.get(k)), None)
    return {"target": spec.target, "what": spec.what, "extra_defaults": spec.defaults,
            "psram": ("octal" if sdk.get("SPIRAM_MODE_OCT") else "quad") if sdk.get("SPIRAM") else None,
            "espnn_kernels": "ansi" if sdk.get("NN_ANSI_C") else "optimized",
            "memory_source": mem, "mode": "pte" if sdk.get("ESPNN_RUNNER_MODE_PTE") else "bundle",
            "flash_size": sdk.get("ESPTOOLPY_FLASHSIZE")}


# ---------------------------------------------------------------- runs
RECORD_FIELDS = ("status", "stage", "msg", "arena", "scratch", "arena_mem", "scratch_mem", "model_mem",
                 "method_pool", "ops", "runs", "refused")


def run_suite(suite: Suite, label: str, b: idf_project.Build, path: Path, work: Path, state: dict) -> list[dict]:
    t0 = time.monotonic()
    run, per_case = emulated.run_counted(os.environ["ESPNN_QEMU_ESP"], b.build, path, work, timeout=5400)
    rows = []
    for name, rec in run.results.items():
        counts = per_case.get(name) or []
        row = {"suite": suite.name, "case": name, "build": label, "commit": state["commit"],
               "device_code_commit": state["device_code_commit"],
               **{k: rec[k] for k in RECORD_FIELDS if k in rec},
               "instructions": int(statistics.median(counts)) if counts else None}
        # The runner's status for a wrong output is "mismatch" (stage verify).
        row["expected"] = "mismatch" if name in suite.expect_fail else "pass"
        if suite.name == "s3_dispatch":  # what analysis/s3_dispatch.py says the optimized build runs
            row["table_kernel"], row["table_simd_share"] = _dispatch_table()[name]
        rows.append(row)
    bad = [r for r in rows if r.get("status") != r["expected"]]
    print(f"  {suite.name} on {label}: {len(rows)} cases, {len(bad)} unexpected, {time.monotonic() - t0:.0f} s",
          flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated suite names (default: all)")
    ap.add_argument("--builds", help="comma-separated build labels (default: all)")
    ap.add_argument("--work", type=Path, help="keep builds and bundles here (default: a temporary directory)")
    ap.add_argument("--output", type=Path, default=EVIDENCE)
    ap.add_argument("--prepare-only", action="store_true",
                    help="only write the bundles and suites into --work (no ESP-IDF, no QEMU)")
    args = ap.parse_args(argv)
    if args.prepare_only and args.work is None:
        raise SystemExit("collect: --prepare-only needs --work")
    why = None if args.prepare_only else (idf_project.PREFIX_PROBLEM or idf_project.problem("esp32s3")
                                          or idf_project.qemu_problem("esp32s3"))
    if why:
        raise SystemExit(f"collect: {why}")
    state = source_state() if not args.prepare_only else {}
    manifest_path = Path(os.environ.get("ESPNN_DEVICE_PREFIX", "/nonexistent")) / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else None
    only = set(args.only.split(",")) if args.only else None
    labels = set(args.builds.split(",")) if args.builds else None
    suites = [s for s in SUITES if only is None or s.name in only]
    specs = [b for b in BUILDS if (labels is None or b.label in labels) and any(b.label in s.builds for s in suites)]
    work = args.work or Path(tempfile.mkdtemp(prefix="espnn-evidence-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"collect: work in {work}", flush=True)

    # Bundles and suites, once per --work directory (a rerun with the same
    # --work reuses them: the host lowering of MobileNetV2-224 takes minutes).
    made = work / "made.json"
    files = {k: Path(v) for k, v in (json.loads(made.read_text()) if made.is_file() else {}).items()}
    for s in suites:
        if s.name not in files or not files[s.name].is_file():
            t0 = time.monotonic()
            files[s.name] = s.make(work)
            print(f"  made {s.name} in {time.monotonic() - t0:.0f} s", flush=True)
            made.write_text(json.dumps({k: str(v) for k, v in files.items()}))
    if args.prepare_only:
        return 0
    executorch = None
    if any(b.pte for b in specs):
        # Each .pte suite writes its program next to it as <suite name without pte_>.pte. The
        # build selects the CPU operators of every program made in this work directory, not only
        # of this run's: one ExecuTorch build (cached per operator set) serves a partial rerun
        # too, and a rerun of fully delegated programs alone (no CPU operator) still has one.
        ptes = [p for p in (work / f"{s.name.removeprefix('pte_')}.pte" for s in SUITES if s.kind == "pte")
                if p.is_file()]
        executorch = _executorch_for(ptes)

    rows, builds = [], {}
    t_all = time.monotonic()
    for spec in specs:
        b = build(spec, work, executorch)
        builds[spec.label] = build_facts(b, spec)
        for s in suites:
            if spec.label in s.builds:
                rows += run_suite(s, spec.label, b, files[s.name], work, state)
        if args.work is None:
            shutil.rmtree(b.project, ignore_errors=True)

    previous = json.loads(args.output.read_text()) if args.output.is_file() else {}
    # Results of the other builds and suites stay, unless their suite is gone (renamed or removed).
    keep = [r for r in previous.get("cases", []) if r["suite"] in {s.name for s in SUITES}
            and not any(r["suite"] == s.name and r["build"] in builds for s in suites)]
    for r in keep:  # results from before rows named their commit: the previous run's rerun base, else its commit
        r.setdefault("commit", previous.get("partial_rerun_of") or previous.get("commit"))
        r.setdefault("device_code_commit", previous.get("device_code_commit") if r["commit"] == previous.get("commit")
                     else "unknown")
    evidence = {
        "schema": 1,
        "emulated": True,
        "silicon": False,
        "note": "Espressif's QEMU (no cycle model, caches or wait states): guest instructions, not cycles. "
                "Nothing here ran on silicon.",
        **state,
        "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run_seconds": round(time.monotonic() - t_all),
        "toolchain": {k: manifest[k] for k in ("sources", "patches", "tool_versions", "files_missing_from_sources",
                                               "total_seconds", "built_on")} if manifest else None,
        "builds": {**previous.get("builds", {}), **builds},
        "cases": keep + rows,
    }
    if previous and previous.get("commit") != state["commit"] and keep:
        evidence["partial_rerun_of"] = previous.get("commit")
    args.output.write_text(json.dumps(evidence, indent=1) + "\n")
    bad = [r for r in rows if r.get("status") != r["expected"]]
    print(f"collect: {len(rows)} results, {len(bad)} unexpected -> {args.output}")
    for r in bad:
        print(f"  UNEXPECTED {r['suite']}/{r['case']} on {r['build']}: {r.get('status')} {r.get('stage', '')} "
              f"{r.get('msg', '')}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
