#!/usr/bin/env python3
"""Arena figures of layer-by-layer vs fused (band-by-band) execution. A script,
not a test (docs/performance.md, section 1b, says how to read it).

    python benchmarks/schedules.py                        # the four models of issue 14
    python benchmarks/schedules.py --models ds_cnn --xtensa ds_cnn,mobilenet_v2_96
    python benchmarks/schedules.py --models unet,lraspp_mobilenet_v3_large   # dense prediction (issue 27)
    python benchmarks/schedules.py --json schedules.json

Per model: the zoo's float model (or torchvision's, random weights:
efficientnet_b0, lraspp_mobilenet_v3_large) is
quantized once with EspNNQuantizer, then lowered twice from the same graph:
with compile spec schedule=layer and with the default schedule=auto (the
smallest peak arena, then the fewest op invocations). For every ESP-NN
partition it prints the layer-by-layer arena and its lower bound, the fused
peak and the schedule, all static (from the payloads); then it runs
both payloads on the host interpreter (the device C++) on the same random
int8 inputs and says whether the outputs are bit-identical (executed). With
--xtensa it counts guest instructions per inference of both payloads on an
emulated Xtensa lx106 (QEMU --icount; benchmarks/run.py's xtensa_icounts).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("ds_cnn", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "mobilenet_v2_96", "unet",
          "lraspp_mobilenet_v3_large", "se_net")
DEFAULT_MODELS = ("ds_cnn", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0")


def make_model(name: str):
    """(float model in eval mode, example inputs, calibration batches)."""
    import torch

    from executorch_espnn import models

    if name == "efficientnet_b0":
        torch.manual_seed(0)
        model = _torchvision_efficientnet_b0().eval()
        example = (torch.randn(1, 3, 224, 224),)
    elif name == "lraspp_mobilenet_v3_large":
        torch.manual_seed(0)
        lraspp = _torchvision("segmentation.lraspp", "lraspp_mobilenet_v3_large")
        model = _segmentation_logits(lraspp(weights=None, weights_backbone=None)).eval()
        example = (torch.randn(1, 3, 224, 224),)
    elif name == "mobilenet_v2_96":  # reduced resolution: small enough for the lx106 emulator
        model, example = models.mobilenet_v2(resolution=96)
    else:
        model, example = getattr(models, name)()
    g = torch.Generator().manual_seed(1)
    calibration = [example] + [tuple(torch.randn(x.shape, generator=g) for x in example) for _ in range(3)]
    return model, example, calibration


def _torchvision(module: str, builder: str):
    """torchvision.models.<module>.<builder> (the models are torchvision's,
    built with random weights). A torchvision wheel built for another torch
    fails in its package __init__ (registering its C++ ops, e.g. "operator
    torchvision::nms does not exist"); the model definitions are plain Python
    and need none of them, so then their modules are loaded without that
    __init__."""
    import importlib
    import importlib.util
    import types

    try:
        import torchvision  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"{builder} needs torchvision (the model is torchvision's, random weights): {e}")
    except RuntimeError:
        spec = importlib.util.find_spec("torchvision")
        for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[mod]  # the half-imported package
        pkg = types.ModuleType("torchvision")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["torchvision"] = pkg
    return getattr(importlib.import_module(f"torchvision.models.{module}"), builder)


def _torchvision_efficientnet_b0():
    """torchvision's efficientnet_b0(weights=None) (tests/idf/emulated_models.py uses it too)."""
    return _torchvision("efficientnet", "efficientnet_b0")(weights=None)


def _segmentation_logits(model):
    """torchvision's segmentation models return {"out": logits}; the
    delegate's export wants the tensor."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(x)["out"]

    return Logits()


def lower(converted, example, schedule: str) -> tuple[list[bytes], float]:
    import torch

    from executorch_espnn import EspNNCompileSpecBuilder, delegate_payloads, to_espnn_edge

    t = time.perf_counter()
    specs = EspNNCompileSpecBuilder().set_schedule(schedule).build()
    edge = to_espnn_edge(torch.export.export(converted, example), compile_specs=specs)
    return delegate_payloads(edge), time.perf_counter() - t


def bit_identical(a: bytes, b: bytes, seed: int = 0) -> bool:
    """Both payloads on the host interpreter, the same random inputs (int8
    over the whole range; float inputs, which the payload quantizes, wide
    enough to saturate some elements)."""
    import numpy as np

    from executorch_espnn import _native

    s = _native.parse(a)
    rng = np.random.default_rng(seed)
    inputs = []
    for t in s["inputs"]:
        rec = s["tensors"][t]
        dtype = {"INT8": np.int8, "INT32": np.int32, "FLOAT32": np.float32}[rec["dtype"]]
        shape = tuple(rec["shape"])
        x = (rng.integers(-128, 128, shape) if dtype is np.int8 else 4 * rng.standard_normal(shape)).astype(dtype)
        inputs.append(x)
    out_a, out_b = _native.Program(a).run(inputs), _native.Program(b).run(inputs)
    return all(np.array_equal(x, y) for x, y in zip(out_a, out_b))


@dataclass
class Partition:
    layer_arena: int
    layer_bound: int
    fused_arena: int
    macs: int
    schedule: str
    bit_identical: bool
    floor_outside: int  # bytes of the busiest step outside every fusable run (e.g. the input QUANTIZE)
    floor_fused: int  # least busiest step of the fusable runs, fused (fused_regions + arena rule)
    lx106_layer: int | str = "not run"
    lx106_fused: int | str = "not run"


@dataclass
class Row:
    model: str
    lower_s_layer: float = 0.0
    lower_s_auto: float = 0.0
    partitions: list[Partition] = field(default_factory=list)


def bench(name: str, xtensa: bool, workdir: Path) -> Row:
    from executorch_espnn import quantize
    from executorch_espnn.partition.report import payload_summary

    model, example, calibration = make_model(name)
    converted = quantize(model, example, calibration)
    layer, t_layer = lower(converted, example, "layer")
    auto, t_auto = lower(converted, example, "auto")
    if len(layer) != len(auto):
        raise RuntimeError(f"{name}: {len(layer)} partitions layer by layer but {len(auto)} fused")
    row = Row(name, t_layer, t_auto)
    for lb, fb in zip(layer, auto):
        ls, fs = payload_summary(lb), payload_summary(fb)
        row.partitions.append(Partition(ls.arena_bytes, ls.arena_layer_bound, fs.arena_bytes, fs.macs, fs.schedule,
                                        bit_identical(lb, fb), *floors(lb)))
    if xtensa:
        sys.path.insert(0, str(HERE))
        from run import xtensa_icounts

        counts_l, counts_f = xtensa_icounts(layer, workdir), xtensa_icounts(auto, workdir)
        for i, p in enumerate(row.partitions):
            p.lx106_layer = counts_l[i] if isinstance(counts_l, list) else counts_l
            p.lx106_fused = counts_f[i] if isinstance(counts_f, list) else counts_f
    return row


def floors(layer_blob: bytes) -> tuple[int, int]:
    """What sets the smallest fused peak (memory.schedule_search.fused_floor)."""
    from executorch_espnn.memory import ArenaGraph
    from executorch_espnn.memory.schedule_search import fused_floor

    return fused_floor(ArenaGraph.from_blob(layer_blob))


def table(rows: list[Row]) -> str:
    head = ["model", "part", "layer arena / bound", "fused peak", "saved", "bit-identical",
            "floor: outside runs / runs fused", "lx106 instr layer/fused", "schedule"]
    lines = []
    for r in rows:
        for i, p in enumerate(r.partitions):
            xt = (f"{p.lx106_layer / 1e6:.1f}M/{p.lx106_fused / 1e6:.1f}M "
                  f"({100 * (p.lx106_fused / p.lx106_layer - 1):+.1f}%)"
                  if isinstance(p.lx106_layer, int) and isinstance(p.lx106_fused, int) else str(p.lx106_layer))
            lines.append([r.model, str(i), f"{p.layer_arena:,} / {p.layer_bound:,}", f"{p.fused_arena:,}",
                          f"{100 * (1 - p.fused_arena / p.layer_arena):.0f}%" if p.layer_arena else "-",
                          "yes" if p.bit_identical else "NO",
                          f"{p.floor_outside:,} / {p.floor_fused:,}", xt, p.schedule])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = " | ".join(f"{{:{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), "-+-".join("-" * w for w in widths)] + [fmt.format(*l) for l in lines])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"comma-separated subset of {','.join(MODELS)}")
    ap.add_argument("--xtensa", default="", help="models whose payloads are counted on Xtensa lx106 under QEMU, "
                    "layer by layer and fused (e.g. ds_cnn,mobilenet_v2_96)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    xtensa = {m for m in args.xtensa.split(",") if m}
    unknown = sorted((set(names) | xtensa) - set(MODELS))
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {','.join(MODELS)}")
    names += [m for m in sorted(xtensa) if m not in names]
    rows = []
    with tempfile.TemporaryDirectory(prefix="espnn-schedules-") as tmp:
        for name in names:
            print(f"[{name}] ...", file=sys.stderr, flush=True)
            rows.append(bench(name, name in xtensa, Path(tmp)))
    print(table(rows))
    if args.json:
        sys.path.insert(0, str(HERE))
        from run import commit

        doc = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "commit": commit(),
               "rows": [asdict(r) for r in rows]}
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
