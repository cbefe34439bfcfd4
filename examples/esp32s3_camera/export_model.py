"""Writes main/model.pte and main/labels.txt for the ESP32-S3 camera app (host side; this part runs here).

    python examples/esp32s3_camera/export_model.py [--model executorch_espnn.models:mobilenet_v2]
        [--model-args '{"num_classes": 2, "resolution": 96, "width_mult": 0.35}']
        [--labels person,background] [--calibration 8] [--max-lsb 8] [--output-dir examples/esp32s3_camera/main]

`--model module:function` is the zoo/CLI contract: the function returns (an
eval-mode module, example inputs), here one float [1, 3, H, W] image; the app
reads H and W from the .pte. The default is an untrained MobileNetV2 (width
0.35, 96x96, 2 classes) - replace it with your trained model and calibrate
with real camera images normalized like the app does: RGB in [0, 1], then
(x - mean) / std with the ImageNet statistics below (main.cpp's kMean/kStd).
Here calibration uses random images of that distribution.

The program is quantized with EspNNQuantizer, lowered (the delegation table
is printed), written, and run on the host through executorch.runtime (the
delegate on the native runtime) against the int8 PyTorch model before the
app embeds it: within --max-lsb output LSBs (5 measured with the defaults;
narrow networks propagate +-1 LSB rounding through their layers).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from espnn_example import host_check, lower, write_pte  # noqa: E402
from executorch_espnn import quantize  # noqa: E402

MEAN = (0.485, 0.456, 0.406)  # must match main.cpp
STD = (0.229, 0.224, 0.225)
DEFAULT_ARGS = {"num_classes": 2, "resolution": 96, "width_mult": 0.35}


def load_model(spec: str, kwargs: dict):
    module_name, sep, function = spec.partition(":")
    if not sep:
        raise SystemExit(f"--model {spec!r}: expected module:function, e.g. executorch_espnn.models:mobilenet_v2")
    model, example = getattr(importlib.import_module(module_name), function)(**kwargs)
    (x,) = example
    if x.dtype != torch.float32 or x.dim() != 4 or x.shape[0] != 1 or x.shape[1] != 3:
        raise SystemExit(f"--model {spec}: the app feeds one float [1, 3, H, W] image; "
                         f"the example input is {x.dtype} {list(x.shape)}")
    return model, example


def camera_like(n: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Random RGB images in [0, 1] (smooth, like a blurred scene), normalized as main.cpp does."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, max(1, height // 8), max(1, width // 8), generator=g)
    rgb = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    return (rgb - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="executorch_espnn.models:mobilenet_v2")
    parser.add_argument("--model-args", default=None,
                        help=f"JSON keyword arguments for the model function (default for the zoo's "
                             f"mobilenet_v2: {json.dumps(DEFAULT_ARGS)})")
    parser.add_argument("--labels", default=None, help="comma-separated class names (default: class0, class1, ...)")
    parser.add_argument("--calibration", type=int, default=8, help="calibration images (default 8)")
    parser.add_argument("--max-lsb", type=float, default=8, help="bound vs int8 PyTorch in output LSBs (default 8)")
    parser.add_argument("--output-dir", type=Path, default=HERE / "main")
    args = parser.parse_args(argv)

    if args.model_args is not None:
        kwargs = json.loads(args.model_args)
    else:
        kwargs = DEFAULT_ARGS if args.model == "executorch_espnn.models:mobilenet_v2" else {}
    model, example = load_model(args.model, kwargs)
    _, _, height, width = example[0].shape
    images = camera_like(args.calibration + 1, height, width)
    quantized = quantize(model, example, [(images[i:i + 1],) for i in range(args.calibration)])
    edge, report = lower(quantized, example)
    pte = write_pte(edge, args.output_dir / "model.pte")
    lsb = host_check(pte, quantized, [images[-1:].contiguous()])

    with torch.no_grad():
        classes = int(quantized(*example).shape[-1])
    labels = args.labels.split(",") if args.labels else [f"class{i}" for i in range(classes)]
    if len(labels) != classes:
        raise SystemExit(f"--labels names {len(labels)} classes, the model has {classes}")
    (args.output_dir / "labels.txt").write_text("\n".join(labels) + "\n")
    print(f"wrote {args.output_dir / 'labels.txt'} ({classes} classes); the app's input: [1, 3, {height}, {width}]")
    ok = len(report.methods["forward"].partitions) >= 1 and lsb <= args.max_lsb
    print("export_model: " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
