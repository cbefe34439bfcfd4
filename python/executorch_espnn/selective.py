"""The op list for a selective build of the device runtime: which XTS3 ops
the ESP-NN payloads of one or more programs use, written as the ESP-IDF
sdkconfig lines (Kconfig ESPNN_SELECT_OPS / ESPNN_OP_<NAME>) or the CMake
list (-DESPNN_OPS=...) that link only those kernels (docs/firmware.md,
"Selective build"). Op names come from the binding, so the list always
matches the runtime that will be built.

    python -m executorch_espnn.selective model.pte [more.pte|.xts3 ...]       # names
    python -m executorch_espnn.selective model.pte --sdkconfig >> sdkconfig.defaults
    python -m executorch_espnn.selective model.pte --cmake                     # for -DESPNN_OPS=
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Iterable, Sequence

from . import _native


def _by_opcode(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=lambda n: _native.OPCODES[n]["opcode"])


def payload_ops(blob: bytes) -> list[str]:
    """The ops of one XTS3 payload (parsed by the device parser)."""
    return _by_opcode(op["op"] for op in _native.parse(bytes(blob))["ops"])


def program_ops(pte: bytes) -> list[str]:
    """The ops of every EspNNBackend payload of an ExecuTorch program."""
    # lazy: the partition package loads torch and executorch; listing the ops of XTS3 blobs must load without them
    from .partition.report import BACKEND_ID, pte_payloads

    ops: set[str] = set()
    for _method, _index, backend, blob in pte_payloads(bytes(pte)):
        if backend == BACKEND_ID:
            ops.update(payload_ops(blob))
    return _by_opcode(ops)


def file_ops(path: Path) -> list[str]:
    """The ops of a .pte program or of a bare XTS3 payload."""
    data = Path(path).read_bytes()
    if data[:4] == int(_native.FORMAT_MAGIC).to_bytes(4, "little"):
        return payload_ops(data)
    return program_ops(data)


def sdkconfig_lines(ops: Iterable[str]) -> list[str]:
    """sdkconfig lines that enable the selective build with exactly `ops`."""
    keep = set(ops)
    unknown = keep - set(_native.OPCODES)
    if unknown:
        raise ValueError(f"not ops of this runtime: {', '.join(sorted(unknown))}")
    lines = ["CONFIG_ESPNN_SELECT_OPS=y"]
    for name in _by_opcode(_native.OPCODES):
        lines.append(f"CONFIG_ESPNN_OP_{name}=y" if name in keep else f"# CONFIG_ESPNN_OP_{name} is not set")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m executorch_espnn.selective",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help=".pte programs or XTS3 payloads")
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--sdkconfig", action="store_true", help="sdkconfig lines (ESP-IDF)")
    fmt.add_argument("--cmake", action="store_true", help="a CMake list for -DESPNN_OPS=")
    args = ap.parse_args(argv)
    ops = _by_opcode(op for f in args.files for op in file_ops(f))
    if args.sdkconfig:
        print("\n".join(sdkconfig_lines(ops)))
    elif args.cmake:
        print(";".join(ops))
    else:
        print(" ".join(ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
