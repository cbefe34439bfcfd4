"""Which ESP-NN path each XTS3 op takes on an optimized ESP32-S3 build.

The runtime's kernels decide it, once, in C++ (components/espnn_runtime/src/ops/
s3_route.h): each op family's routing function is what its eval() calls on
the chip with ``kEspnnS3Optimized``, and the host build's description adds
which routine ESP-NN 1.2.3's own S3 dispatch then picks inside the call
(mult8_1x1, im2col, general asm, s16 mult1, ...). The native ``Program``
reports it per op (``op_routes()``, the summary's ``"s3_routes"``), with the
data pointers of its own arena, so alignment-dependent routes (misaligned
images, rows) are the ones an interpreter on that arena takes. This module
only turns that answer into :class:`S3Path`; it states no rule.

"SIMD" means the kernel's inner product (or elementwise body) runs on the
S3's vector unit (PIE: QACC/ACCX multiply-accumulate, 128-bit loads), i.e.
the ``_esp32s3`` assembly or its inline-asm C dispatchers, as opposed to
ESP-NN's scalar ANSI C, generic ``_opt`` C or the interpreter's own loops.
This is a static statement from the documented rules: nothing here was run
on an ESP32-S3. ``simd_fraction`` is the share of the op's MACs on the SIMD
path (1.0 or 0.0, except where a path does a remainder in scalar code, e.g.
the 1x1 conv's in_ch % 8 tail, or where some images of a batch are
misaligned).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import _native


@dataclass(frozen=True)
class S3Path:
    simd: bool
    simd_fraction: float  # share of the op's MACs on the SIMD path
    kernel: str  # which implementation runs
    reason: str  # the rule that decided


def _routes(source) -> list[dict]:
    """The native per-op routes of a summary dict, a ``_native.Program`` or XTS3 bytes."""
    if isinstance(source, dict):
        if "s3_routes" not in source:
            raise ValueError("a summary without 's3_routes': pass the native parser's summary, "
                             "a _native.Program or the blob")
        return source["s3_routes"]
    if isinstance(source, _native.Program):
        return source.op_routes()
    return _native.Program(bytes(source)).op_routes()


def s3_path(source, op: dict) -> S3Path:
    """The S3 path of one op (a summary's op dict) of `source`: the native
    summary it came from, the ``_native.Program`` or the XTS3 blob."""
    return S3Path(**_routes(source)[op["index"]])


def _rule(opcode: str) -> Callable[[dict, dict], S3Path]:
    def rule(source, op: dict) -> S3Path:
        assert op["op"] == opcode, (op["op"], opcode)
        return s3_path(source, op)

    rule.__name__ = opcode.lower()
    rule.__doc__ = _native.S3_ROUTE_RULES[opcode]["doc"]
    return rule


# opcode -> its route (the runtime's rule text as the docstring), for the op
# families the runtime describes; any other op runs the interpreter's own code.
RULES: dict[str, Callable[[dict, dict], S3Path]] = {name: _rule(name) for name in _native.S3_ROUTE_RULES}

# opcode -> every kernel its route can name (the device-evidence cases must reach each).
KERNELS: dict[str, tuple[str, ...]] = {name: tuple(r["kernels"]) for name, r in _native.S3_ROUTE_RULES.items()}
# The kernel of every other op.
DEFAULT_KERNEL: str = _native.S3_ROUTE_DEFAULT["kernel"]
