"""What the operator-library kernels add to the ESP32-S3 app image.

Builds the firmware's .pte runner (ExecuTorch runtime + EspNNBackend +
portable kernels, sdkconfig.defaults.pte) twice with ESP-IDF, with and
without CONFIG_ESPNN_EXECUTORCH_OPLIB, against one ExecuTorch cross-build,
and prints the app image size and static internal RAM of each as `idf.py
size` computes them (benchmarks/peer.py's image_size). Both images hold the
delegate and the XTS3 interpreter: the operator library's kernels run the
interpreter's ops (RunSingleOp), so the difference is the kernels' glue and
their registration. A script, not a test: it needs the device tool chain
(tools/device-toolchain, ESPNN_DEVICE_PREFIX) and an ExecuTorch build of
scripts/build-executorch-esp.sh (--executorch).

    python benchmarks/oplib_image_size.py --executorch ~/.cache/espnn-executorch/esp32s3-<key> --work /tmp/sz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks")]

from peer import device_tools, image_size  # noqa: E402


def build_size(idf_project, work: Path, executorch: Path, oplib: bool) -> dict:
    defaults, defines = idf_project.pte_mode(executorch)
    defaults.append(f"CONFIG_ESPNN_EXECUTORCH_OPLIB={'y' if oplib else 'n'}")
    b = idf_project.build(work / ("with-oplib" if oplib else "without-oplib"), "esp32s3", defaults=defaults,
                          defines=defines)
    if bool(b.sdkconfig().get("ESPNN_EXECUTORCH_OPLIB")) != oplib:
        raise SystemExit(f"oplib_image_size: the build did not take CONFIG_ESPNN_EXECUTORCH_OPLIB={oplib}")
    (map_file,) = b.build.glob("*.map")
    return image_size(map_file)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executorch", type=Path, required=True,
                    help="an ExecuTorch build for esp32s3 (scripts/build-executorch-esp.sh --out)")
    ap.add_argument("--work", type=Path, required=True, help="a directory for the two ESP-IDF projects")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    idf_project = device_tools()
    sizes = {name: build_size(idf_project, args.work, args.executorch, oplib)
             for name, oplib in (("without_oplib", False), ("with_oplib", True))}
    added = {k: sizes["with_oplib"][k] - sizes["without_oplib"][k] for k in sizes["with_oplib"]}
    print(f"{'ESP32-S3 .pte runner':28} {'app image B':>12} {'static DRAM B':>14}")
    for name, s in sizes.items():
        print(f"{name:28} {s['image_size']:>12,} {s['static_dram']:>14,}")
    print(f"{'added by the oplib kernels':28} {added['image_size']:>12,} {added['static_dram']:>14,}")
    if args.json:
        args.json.write_text(json.dumps({**sizes, "added": added}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
