"""A small vision transformer on ESP-NN: one delegate, nothing left on ExecuTorch's CPU kernels.

    python examples/small_vit.py [--image-size 32] [--patch-size 4] [--dim 64] [--depth 2] [--heads 4]
                                 [--calibration 8] [--max-lsb 3] [--output build/small_vit/small_vit.pte]

The zoo's SmallViT (patch embedding conv, pre-norm transformer blocks, mean
over tokens, linear head; random weights) is quantized with EspNNQuantizer and
lowered with CPU fallback on (the default, so anything ESP-NN could not take
would stay on the CPU with a reason in the delegation report). The patch
embedding convolution, every linear layer, layer norm, GELU, softmax, the
residual adds, the attention matmuls (BATCH_MATMUL), the head split/merge
(select, permute, reshape) and the token mean all land in one ESP-NN delegate.
The .pte runs on the host through executorch.runtime and is compared with the
int8 PyTorch model (1 LSB measured with the defaults on one image)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from espnn_example import cpu_compute_ops, host_check, lower, write_pte  # noqa: E402
from executorch_espnn import quantize  # noqa: E402
from executorch_espnn.models import small_vit  # noqa: E402

# Ops the example expects on ESP-NN (the point of the example); nothing stays on the CPU.
DELEGATED = ("aten.convolution.default", "aten.linear.default", "aten.layer_norm.default",
             "aten.matmul.default", "aten.mean.dim")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--patch-size", type=int, default=4)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2, help="transformer blocks (default 2)")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--calibration", type=int, default=8, help="calibration images (default 8)")
    # 3, not the 1 measured on one host: PyTorch's int8 reference computes every op in float
    # between quantize/dequantize, and which values land on a rounding boundary depends on
    # the host's float kernels; layer norm scales its input's flips by gamma / sigma.
    parser.add_argument("--max-lsb", type=float, default=3, help="bound vs int8 PyTorch in output LSBs (default 3)")
    parser.add_argument("--output", type=Path, default=Path("build/small_vit/small_vit.pte"))
    args = parser.parse_args(argv)

    model, example = small_vit(args.image_size, args.patch_size, args.dim, args.depth, args.heads)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(args.calibration + 1, 3, args.image_size, args.image_size, generator=g)
    calibration = [(images[i:i + 1],) for i in range(args.calibration)]
    image = images[-1:].contiguous()  # not used for calibration

    quantized = quantize(model, example, calibration)
    edge, report = lower(quantized, example)  # allow_cpu_fallback=True (the default)
    forward = report.methods["forward"]

    # Summary of the table above: which compute ops stayed on the CPU, and why.
    cpu_compute = cpu_compute_ops(edge)
    print(f"{len(forward.partitions)} ESP-NN partition(s); CPU compute ops by kind:")
    for (op, reason), n in sorted(Counter((c.op, c.reason) for c in cpu_compute).items()):
        print(f"  {n:2d} x {op}: {reason}")
    linears = 4 * args.depth + 1  # qkv, proj, two MLP linears per block + the head
    delegated = forward.delegated_ops
    cpu_kinds = {c.op for c in cpu_compute}
    norms = 2 * args.depth + 1  # two per block + the final one
    matmuls = 2 * args.depth  # q @ k^T and attn @ v per block
    ok = (delegated.get("aten.convolution.default") == 1 and delegated.get("aten.linear.default") == linears
          and delegated.get("aten.layer_norm.default") == norms and delegated.get("aten.matmul.default") == matmuls
          and delegated.get("aten.mean.dim") == 1 and not cpu_kinds and len(forward.partitions) == 1)

    pte = write_pte(edge, args.output)
    lsb = host_check(pte, quantized, [image])
    ok = ok and lsb <= args.max_lsb
    print("small_vit: " + ("OK" if ok else "FAILED") + f" (one delegate: conv, {linears} linears, {norms} layer "
          f"norms, {matmuls} matmuls and the token mean on ESP-NN; no CPU compute op; within {args.max_lsb:g} LSB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
