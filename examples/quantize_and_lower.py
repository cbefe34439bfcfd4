"""The minimal path: export -> quantize (EspNNQuantizer) -> lower (EspNNPartitioner) -> .pte.

    python examples/quantize_and_lower.py [--output build/quantize_and_lower/model.pte]

A small CNN (conv + batch norm + ReLU, depthwise conv, max pool, global
average pool, linear, softmax) is exported, quantized to ESP-NN's int8 scheme
with a few calibration batches, lowered so its int8 part becomes one ESP-NN
delegate, and written as a .pte. Before writing, the lowered program runs on
the host — the delegate on the native runtime (the same C++ as on the ESP32),
the rest in PyTorch — and is compared with the quantized PyTorch model; the
written .pte is then run by ExecuTorch's runtime (executorch.runtime) and
compared again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from executorch_espnn import delegation_report, quantize, to_espnn_edge
from executorch_espnn.runtime import run_edge_program
from executorch_espnn.models import tiny_cnn
from executorch_espnn.runtime import compare_with


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("build/quantize_and_lower/model.pte"))
    args = parser.parse_args(argv)

    model, example = tiny_cnn()
    torch.manual_seed(0)

    # 1. Export and quantize: torch.export, EspNNQuantizer (batch norm folded),
    #    calibration on a few batches, convert.
    quantized = quantize(model, example, [(torch.randn(1, 3, 32, 32),) for _ in range(8)])

    # 2. Lower: the int8 region becomes an EspNNBackend delegate (XTS3 payload).
    edge = to_espnn_edge(torch.export.export(quantized, example))
    report = delegation_report(edge)
    print(report)

    # 3. Check on the host: the delegate runs on the native ESP-NN runtime.
    x = torch.randn(1, 3, 32, 32)
    (got,), delegate_calls = run_edge_program(edge, [x])
    want = quantized(x)
    lsb = ((got - want).abs() * 256).max().item()  # softmax output step is 1/256
    exact = ((got - want).abs() * 256 < 0.5).float().mean().item()
    print(f"host run: {delegate_calls} delegate call(s); vs quantized PyTorch: max {lsb:.0f} LSB, "
          f"{100 * exact:.0f}% of elements exact")

    # 4. The .pte for the ExecuTorch runtime.
    pte = edge.to_executorch()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(pte.buffer)
    print(f"wrote {args.output} ({len(pte.buffer)} bytes)")

    # 5. The written .pte through ExecuTorch's own runtime (executorch.runtime,
    #    with the C++ EspNNBackend registered by importing executorch_espnn).
    pte_lsb = compare_with(args.output, quantized, [x]).max_abs_diff[0] * 256
    print(f".pte on executorch.runtime: vs quantized PyTorch: max {pte_lsb:.0f} LSB")

    cpu_ops = report.to_dict()["forward"]["cpu_ops"]
    ok = delegate_calls == 1 and lsb <= 1 and pte_lsb <= 1 and not cpu_ops
    print("quantize_and_lower: " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
