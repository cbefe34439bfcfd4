#!/usr/bin/env python3
"""This project and TensorFlow Lite Micro + ESP-NN side by side on one
emulated ESP32-S3: guest instructions per inference, arena, scratch and app
image size for person detection (MobileNetV1-0.25, 96x96x1 int8) and DS-CNN
keyword spotting. A script that prints figures, not a test
(docs/peer-comparison.md says how to read them).

    export ESPNN_DEVICE_PREFIX=/opt/espnn-device     # tools/device-toolchain/build.sh's prefix
    python benchmarks/peer.py --peer-console peer.log --peer-icount peer-icount.txt \\
        --peer-map tflm_peer.map --peer-source "espressif/esp-tflite-micro@<commit>" [--json out.json]
    python benchmarks/peer.py --from-json out.json   # the table of a recorded run, nothing run

Our side, run here: the runner app (main/, the ESP32-S3 configuration as
shipped: ESP-NN optimized, 240 MHz, octal PSRAM, arena and scratch in
internal RAM first) built with the device tool chain's ESP-IDF, and each
model written in PyTorch with the published layer shapes and random weights
(executorch_espnn.models: vww_mobilenet_v1(grayscale=True), ds_cnn), lowered
by `espnn compile` with the default schedule (auto: fused band by band where
that lowers the arena) and with --schedule layer, for two weight seeds; all
cases in one bundle, run under Espressif's QEMU with tools/qemu-esp's
instruction counter (marks on the runner's espnn_pal_cycle_count around each
timed run).

The peer's side is read, not built: nothing of TensorFlow Lite Micro is in
this repository, nor a recipe that builds it. The caller measures it on the
same emulator (`tools/qemu-esp/qemu-esp run --no-data --icount OUT --mark
SYMBOL` on an app that calls SYMBOL right before and right after each
`Invoke()`) and passes its console and counts. The console lines read are
`PEER model=NAME status=pass runs=N arena_used=B [arena_head=B arena_tail=B]
[arena_mem=internal|psram] [model_bytes=B]` - one per model, in the order the
app ran them, each followed by its N mark pairs; NAME is person_detection or
ds_cnn, or NAME@seedN for the same graph with other weights - and the image
size comes from its linker map, as `idf.py size` computes it.

Emulated figures: instructions, not cycles; nothing here ran on silicon.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()

#: model -> (what both sides run, the peer's model name in its console)
MODELS = {
    "person_detection": "MobileNetV1-0.25, 96x96x1 int8, 2 classes + softmax",
    "ds_cnn": "DS-CNN (MLPerf Tiny KWS), 49x10x1 int8, 12 classes",
}
#: an --arena-budget per model for the "budget" variants: chosen by hand (a few
#: budgets were run) so that arena + ESP-NN scratch stays below the peer's
#: arena; a larger budget than the smallest reachable arena buys fewer band
#: invocations (docs/peer-comparison.md).
BUDGET = {"person_detection": 40_000, "ds_cnn": 14_000}
#: how our side compiles each model: the schedule (auto: the smallest arena;
#: layer; budget: the fewest op invocations within BUDGET) and whether the
#: program takes and returns int8 (--int8-io, the peer's graphs' contract:
#: its Invoke() neither quantizes the input nor dequantizes the output).
VARIANTS = {
    "auto": (),
    "layer": ("--schedule", "layer"),
    "auto-int8io": ("--int8-io",),
    "layer-int8io": ("--schedule", "layer", "--int8-io"),
    "budget-int8io": ("--arena-budget", "{budget}", "--int8-io"),
}
SCHEDULES = tuple(VARIANTS)
#: the cases our side runs: (model, variant, seed). Two seeds for the default
#: schedule show that the instruction count does not depend on weight values.
CASES = [(m, s, 0) for m in MODELS for s in SCHEDULES] + [(m, "auto", 1) for m in MODELS]


def variant_args(model: str, variant: str) -> list[str]:
    return [a.format(budget=BUDGET[model]) for a in VARIANTS[variant]]


# ---------------------------------------------------------------- models
def _zoo(model: str, seed: int):
    from executorch_espnn import models as M

    if model == "person_detection":
        return M.vww_mobilenet_v1(grayscale=True, seed=seed)
    return M.ds_cnn(seed=seed)


# `espnn compile benchmarks/peer.py:<model>_seed<n>` reads these.
def person_detection_seed0():
    return _zoo("person_detection", 0)


def person_detection_seed1():
    return _zoo("person_detection", 1)


def ds_cnn_seed0():
    return _zoo("ds_cnn", 0)


def ds_cnn_seed1():
    return _zoo("ds_cnn", 1)


def stem(model: str, schedule: str, seed: int) -> str:
    return f"{model}-{schedule}-seed{seed}"


# ------------------------------------------------------------ the peer
PEER_LINE = re.compile(r"^PEER model=(\S+)(.*)$", re.M)


def parse_peer(console: str, icount: str) -> dict:
    """The peer's record from its console and the instruction counter's file:
    per model the instructions of each run (consecutive mark pairs, in the
    order of the PEER lines), and the figures its PEER line reports."""
    marks = [int(line.split()[3]) for line in icount.splitlines() if line.startswith("mark ")]
    models, k = {}, 0
    for m in PEER_LINE.finditer(console):
        fields = dict(kv.split("=", 1) for kv in m.group(2).split() if "=" in kv)
        rec = {key: (int(v) if v.isdigit() else v) for key, v in fields.items()}
        if rec.get("status") != "pass":
            raise ValueError(f"peer model {m.group(1)}: status {rec.get('status')!r}")
        n = int(rec.get("runs", 0))
        pairs = marks[k:k + 2 * n]
        if len(pairs) != 2 * n:
            raise ValueError(f"peer model {m.group(1)}: {n} runs but {len(pairs)} marks left")
        k += 2 * n
        rec["instructions"] = [pairs[i + 1] - pairs[i] for i in range(0, 2 * n, 2)]
        models[m.group(1)] = rec
    if not models:
        raise ValueError("no PEER line in the peer's console")
    if k != len(marks):
        raise ValueError(f"{len(marks)} marks, {k} expected from the PEER lines")
    return models


# ------------------------------------------------------------ our side
def compile_cases(work: Path) -> Path:
    """One .pte per case (kept in `work`: a rerun reuses them), all payloads
    in one bundle."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from emulated import espnn

    ptes = []
    for model, schedule, seed in CASES:
        pte = work / f"{stem(model, schedule, seed)}.pte"
        if not pte.is_file():
            t0 = time.monotonic()
            espnn("compile", f"{HERE}:{model}_seed{seed}", "-o", str(pte), "-q", "--verify-samples", "1",
                  *variant_args(model, schedule), "--json", str(pte.with_suffix(".report.json")))
            print(f"  compiled {pte.name} in {time.monotonic() - t0:.0f} s", flush=True)
        ptes.append(pte)
    bundle = work / "peer-ours.xtsb"
    espnn("bundle", *map(str, ptes), "-o", str(bundle), "--runs", "3", "-q")
    return bundle


def image_size(map_file: Path) -> dict:
    """What `idf.py size` reports for a build, from its linker map (the tool
    idf.py size runs, esp_idf_size, in ESP-IDF's Python environment): the
    image size and the internal RAM the image itself takes (.data + .bss)."""
    import os

    env = os.environ.get("IDF_PYTHON_ENV_PATH")
    python = str(Path(env) / "bin/python") if env else sys.executable
    r = subprocess.run([python, "-m", "esp_idf_size", "--format", "json2", str(map_file)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"esp_idf_size {map_file} failed:\n{r.stderr[-2000:]}")
    return size_figures(r.stdout)


def size_figures(json2: str) -> dict:
    """image (total_size) and static internal RAM (DIRAM .data + .bss) from esp_idf_size's json2."""
    data = json.loads(json2[json2.index("{"):])
    static = sum(part.get("size", 0) for area in data.get("layout", []) if area.get("name") == "DIRAM"
                 for name, part in area.get("parts", {}).items() if name in (".data", ".bss"))
    return {"image_size": int(data["total_size"]), "static_dram": static}


def device_tools():
    """tools/espnn_dev's idf_project, once ESPNN_DEVICE_PREFIX's environment
    is applied (ESP-IDF, its Python, QEMU); exits saying what is missing."""
    sys.path[:0] = [str(REPO / "tools"), str(REPO / "benchmarks")]
    from espnn_dev import idf_project  # lazy: only the device run needs ESP-IDF's environment

    why = idf_project.PREFIX_PROBLEM or idf_project.problem("esp32s3") or idf_project.qemu_problem("esp32s3")
    if why:
        raise SystemExit(f"peer: {why}")
    return idf_project


def our_side(work: Path, runner: Path | None) -> dict:
    import os

    import emulated

    idf_project = device_tools()
    bundle = compile_cases(work)
    if runner is None:
        t0 = time.monotonic()
        runner = idf_project.build(work / "runner", "esp32s3").build
        print(f"  built the runner in {time.monotonic() - t0:.0f} s", flush=True)
    sdk = json.loads((runner / "config/sdkconfig.json").read_text())
    if sdk.get("IDF_TARGET") != "esp32s3" or not sdk.get("NN_OPTIMIZED") or sdk.get("ESPNN_RUNNER_MODE_PTE"):
        raise SystemExit(f"peer: {runner} is not the runner as shipped for esp32s3 (bundle mode, ESP-NN optimized)")
    run, per_case = emulated.run_counted(os.environ["ESPNN_QEMU_ESP"], runner, bundle, work, timeout=5400)
    cases = {}
    for name, rec in run.results.items():
        case = name.split(".")[0]
        if rec.get("status") != "pass":
            raise RuntimeError(f"our case {name}: {rec}")
        cases[case] = {**{k: rec[k] for k in ("arena", "scratch", "arena_mem", "scratch_mem", "ops") if k in rec},
                       "instructions": per_case[name]}
    for model, schedule, seed in CASES:
        report = json.loads((work / f"{stem(model, schedule, seed)}.report.json").read_text())
        cases[stem(model, schedule, seed)]["pte_bytes"] = report["pte"]["bytes"] if isinstance(
            report.get("pte"), dict) else (work / f"{stem(model, schedule, seed)}.pte").stat().st_size
    return {"cases": cases, **image_size(next(runner.glob("*.map")))}


# ----------------------------------------------------------------- table
def _median(xs) -> int:
    return int(statistics.median(xs))


def rows(result: dict) -> list[list[str]]:
    """The side-by-side table: per model the peer, then ours per schedule."""
    out = [["model", "stack", "instructions/inference", "vs peer", "arena B", "scratch B", "arena+scratch B",
            "arena in", "model B", "app image B", "static DRAM B"]]
    peer, ours = result["peer"], result["ours"]
    # The peer's app links its models (flatbuffers in .rodata); the runner reads them from a data partition.
    peer_code = peer["image_size"] - sum(p.get("model_bytes", 0) for p in peer["models"].values())
    for model in MODELS:
        p = peer["models"].get(model)
        base = _median(p["instructions"]) if p else None
        if p:
            out.append([model, "TFLite Micro + ESP-NN", f"{base:,}", "1.00", f"{p['arena_used']:,}", "(in arena)",
                        f"{p['arena_used']:,}", p.get("arena_mem", "-"), f"{p.get('model_bytes', 0):,}",
                        f"{peer_code:,}", f"{peer.get('static_dram', 0):,}"])
        for schedule in SCHEDULES:
            c = ours["cases"].get(stem(model, schedule, 0))
            if not c:
                continue
            n = _median(c["instructions"])
            out.append([model, f"ours, schedule={schedule}", f"{n:,}", f"{n / base:.2f}" if base else "-",
                        f"{c['arena']:,}", f"{c['scratch']:,}", f"{c['arena'] + c['scratch']:,}",
                        c.get("arena_mem", "-"), f"{c.get('pte_bytes', 0):,}", f"{ours['image_size']:,}",
                        f"{ours.get('static_dram', 0):,}"])
    return out


def peer_arena_notes(result: dict) -> list[str]:
    """How the peer's arena splits (TFLite Micro's recording allocator): head =
    activations and kernel scratch, planned together; tail = persistent
    interpreter data (tensor and node records, op data)."""
    return [f"  {name}: {p['arena_used']:,} B = head {p['arena_head']:,} + tail {p['arena_tail']:,}"
            + (" (the recording allocator's own records are in its tail; the figure used is the plain "
               "interpreter's)" if p["arena_head"] + p["arena_tail"] != p["arena_used"] else "")
            for name, p in result["peer"]["models"].items() if "arena_head" in p and "arena_tail" in p]


def seed_rows(result: dict) -> list[list[str]]:
    """Instructions of the same graph under two weight seeds, next to the
    spread between timed runs of one program (timer interrupts land at
    different points of a run)."""
    out = [["model", "stack", "seed 0", "seed 1", "difference", "run-to-run spread"]]

    def row(model, stack, a, b):
        x, y = _median(a["instructions"]), _median(b["instructions"])
        spread = max(max(r["instructions"]) - min(r["instructions"]) for r in (a, b))
        out.append([model, stack, f"{x:,}", f"{y:,}", f"{y - x:+,} ({(y - x) / x:+.4%})", f"{spread:,}"])

    for model in MODELS:
        a, b = result["peer"]["models"].get(model), result["peer"]["models"].get(f"{model}@seed1")
        if a and b:
            row(model, "TFLite Micro + ESP-NN", a, b)
        a = result["ours"]["cases"].get(stem(model, "auto", 0))
        b = result["ours"]["cases"].get(stem(model, "auto", 1))
        if a and b:
            row(model, "ours, schedule=auto", a, b)
    return out


def fmt(table: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in table)


def render(result: dict) -> str:
    head = (f"emulated ESP32-S3 (Espressif's QEMU, -icount): guest instructions, not cycles; "
            f"ours at {result.get('commit', '?')[:10]}, peer {result['peer'].get('source', '?')}")
    notes = peer_arena_notes(result)
    peer = result["peer"]
    image_note = (f"app image: idf.py size's total less the model data the app links "
                  f"(peer: {peer['image_size']:,} B with {len(peer['models'])} flatbuffers); ours: the runner "
                  f"(every op, bundle verification), models in a data partition; model B: flatbuffer / .pte")
    arena = ["", "TFLite Micro's arena (activations and scratch in the head, persistent data in the tail):",
             *notes] if notes else []
    return "\n".join([head, "", fmt(rows(result)), image_note, *arena,
                      "", "instructions under two weight seeds (same graph):", fmt(seed_rows(result))])


# ------------------------------------------------------------------ main
def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer-console", type=Path, help="the peer app's console (its PEER lines)")
    ap.add_argument("--peer-icount", type=Path, help="the instruction counter's file of the same run")
    ap.add_argument("--peer-map", type=Path, help="the peer app's linker map (its image size, as idf.py size)")
    ap.add_argument("--runner-build", type=Path,
                    help="an idf.py build directory of the runner (esp32s3, as shipped) made from this commit's "
                         "device code; default: build one in the work directory")
    ap.add_argument("--peer-source", default="", help="what the peer was built from (repository@commit)")
    ap.add_argument("--work", type=Path, help="keep builds and programs here (a rerun reuses the programs)")
    ap.add_argument("--json", type=Path, help="write the whole result here")
    ap.add_argument("--from-json", type=Path, help="print the table of a recorded result; run nothing")
    args = ap.parse_args(argv)
    if args.from_json:
        if args.peer_console or args.peer_icount:
            ap.error("--from-json prints a recorded result: it takes no --peer-console/--peer-icount")
        print(render(json.loads(args.from_json.read_text())))
        return 0
    missing = [o for o, v in (("--peer-console", args.peer_console), ("--peer-icount", args.peer_icount),
                              ("--peer-map", args.peer_map)) if v is None]
    if missing:
        ap.error(f"the peer's measurement is needed: {', '.join(missing)} (or --from-json)")
    for path in (args.peer_console, args.peer_icount, args.peer_map, args.runner_build):
        if path is not None and not path.exists():
            ap.error(f"{path} does not exist")
    peer = {"source": args.peer_source,
            "models": parse_peer(args.peer_console.read_text(errors="replace"), args.peer_icount.read_text())}
    unknown = {name for name in peer["models"] if name.split("@")[0] not in MODELS}
    if unknown:
        ap.error(f"the peer's console names models this table does not have: {sorted(unknown)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="espnn-peer-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"peer: work in {work}", flush=True)
    device_tools()
    peer.update(image_size(args.peer_map))
    result = {"emulated": True, "commit": _git("rev-parse", "HEAD"),
              "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "peer": peer, "ours": our_side(work, args.runner_build)}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
