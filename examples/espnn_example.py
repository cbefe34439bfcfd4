"""Steps every example shares besides ``executorch_espnn.quantize`` (export,
EspNNQuantizer, calibrate, convert), kept explicit so each example reads as
the documented flow (README "Lowering a model"):

    lower()      torch.export -> to_espnn_edge -> delegation_report (printed)
    write_pte()  to_executorch() -> .pte file
    host_check() the .pte through executorch.runtime (EspNNBackend = the native
                 runtime, the rest on ExecuTorch's CPU kernels) vs quantized PyTorch

Not a library: the examples import it from their own directory.
"""

from __future__ import annotations

from pathlib import Path

import torch

from executorch_espnn import delegation_report, output_scales, to_espnn_edge
from executorch_espnn.runtime import compare_with


def lower(quantized, example_inputs, **options):
    """The lowered EdgeProgramManager and its delegation report (printed)."""
    edge = to_espnn_edge(torch.export.export(quantized, tuple(example_inputs)), **options)
    report = delegation_report(edge)
    print(report)
    return edge, report


def write_pte(edge, path: Path) -> bytes:
    # Quantize/dequantize nodes left on the CPU need the out-variant kernels of
    # ExecuTorch's quantized-ops library, registered by importing it.
    import executorch.kernels.quantized  # noqa: F401

    data = edge.to_executorch().buffer
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    print(f"wrote {path} ({len(data)} bytes)")
    return data


def host_check(pte, quantized, inputs, label: str = "host run") -> float:
    """Runs the .pte on the host and compares with the quantized PyTorch model;
    prints and returns the largest difference in output LSBs (or in absolute
    value when the output is float)."""
    result = compare_with(pte, quantized, inputs)
    scale = output_scales(quantized)[0]
    diff = result.max_abs_diff[0]
    got, want = result.outputs[0], result.expected[0]
    same_top1 = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    if scale:
        lsb = round(diff / scale, 3)  # diff and scale are float32-rounded: 1 LSB may come out as 1.0000001
        print(f"{label}: .pte on executorch.runtime vs quantized PyTorch: max {lsb:.0f} LSB "
              f"(LSB {scale:.4g}), top-1 agrees on {100 * same_top1:.0f}%")
        return lsb
    print(f"{label}: .pte on executorch.runtime vs quantized PyTorch: max abs diff {diff:.4g}, "
          f"top-1 agrees on {100 * same_top1:.0f}%")
    return diff


def cpu_compute_ops(edge, method: str = "forward") -> list:
    """The report's CPU ops that do real work: every op without an ESP-NN
    lowering counts; ops the lowering registers as data movement or
    quantize/dequantize (compute=False) do not."""
    from executorch_espnn.lowering.registry import lookup

    nodes = {n.name: n for n in edge.exported_program(method).graph.nodes}
    out = []
    for op in delegation_report(edge).methods[method].cpu_ops:
        entry = lookup(nodes[op.node])
        if entry is None or entry.compute:
            out.append(op)
    return out
