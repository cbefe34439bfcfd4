"""Image classification: MobileNetV2 as one ESP-NN delegate with no compute op left on the CPU.

    python examples/mobilenet_v2.py [--arch mobilenet_v2] [--resolution 224] [--width-mult 1.0] [--num-classes 1000]
                                    [--calibration 4] [--max-lsb 3] [--output build/mobilenet_v2/mobilenet_v2.pte]

The zoo's MobileNetV2 (torchvision's architecture, random weights with
settled batch-norm statistics: no pretrained weights ship and torchvision is
not a dependency) is quantized with EspNNQuantizer, lowered and written as a
.pte. The example checks what matters for the ESP32-S3: the whole network is
one partition and no compute op (convolution, add, pooling, linear) stays on
the CPU. The .pte then runs on the host through executorch.runtime (the
delegate on the native runtime) and is compared with the int8 PyTorch model:
through 52 requantizing layers +-1 LSB rounding differences can propagate, so
the bound is 3 LSB at full size (--max-lsb; tests/aot/test_models.py checks the
same). Narrow networks propagate more (fewer channels average the rounding
out): 4 LSB measured at --resolution 96 --width-mult 0.5, 6 at 64/0.35 (2 at
the defaults). The untrained network's 1000 logits are nearly tied, so the
printed top-1 agreement on the single test image can flip on 1 LSB.

No image data ships with the project: calibration and the test image are
random normalized images. Smaller --resolution / --width-mult run faster.
--arch mobilenet_v3_small applies the same checks to MobileNetV3-Small
(squeeze-and-excite, hard-swish, hard-sigmoid): 1 partition, 0 CPU ops and
5 LSB measured with --resolution 96 (so pass --max-lsb 6 there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from espnn_example import cpu_compute_ops, host_check, lower, write_pte  # noqa: E402
from executorch_espnn import quantize  # noqa: E402
from executorch_espnn.models import mobilenet_v2, mobilenet_v3_small  # noqa: E402

ARCHS = {"mobilenet_v2": mobilenet_v2, "mobilenet_v3_small": mobilenet_v3_small}
from executorch_espnn.runtime import run_pte  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(ARCHS), default="mobilenet_v2",
                        help="mobilenet_v3_small: the same checks on MobileNetV3-Small (SE blocks, hard-swish)")
    parser.add_argument("--resolution", type=int, default=224, help="input height and width, a multiple of 32")
    parser.add_argument("--width-mult", type=float, default=1.0, help="channel width multiplier (default 1.0)")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--calibration", type=int, default=4, help="calibration images (default 4)")
    parser.add_argument("--max-lsb", type=float, default=3, help="bound vs int8 PyTorch in output LSBs (default 3)")
    parser.add_argument("--output", type=Path, default=Path("build/mobilenet_v2/mobilenet_v2.pte"))
    args = parser.parse_args(argv)

    model, example = ARCHS[args.arch](args.num_classes, args.resolution, args.width_mult)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(args.calibration + 1, 3, args.resolution, args.resolution, generator=g)
    calibration = [(images[i:i + 1],) for i in range(args.calibration)]
    image = images[-1:].contiguous()  # not used for calibration

    quantized = quantize(model, example, calibration)
    edge, report = lower(quantized, example)
    partitions = len(report.methods["forward"].partitions)
    cpu_compute = cpu_compute_ops(edge)
    print(f"{partitions} partition(s), {len(cpu_compute)} CPU compute op(s)"
          + "".join(f"\n  on the CPU: {c.node} ({c.op}): {c.reason}" for c in cpu_compute))
    pte = write_pte(edge, args.output)
    lsb = host_check(pte, quantized, [image])

    (logits,) = run_pte(pte, [image])
    top5 = logits[0].topk(5)
    print("top-5 classes (untrained weights, arbitrary): "
          + ", ".join(f"{int(i)} ({float(v):.2f})" for v, i in zip(top5.values, top5.indices)))
    ok = partitions == 1 and not cpu_compute and lsb <= args.max_lsb
    verdict = "OK" if ok else "FAILED"
    print(f"{args.arch}: {verdict} (1 partition, 0 CPU compute ops, within {args.max_lsb:g} LSB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
