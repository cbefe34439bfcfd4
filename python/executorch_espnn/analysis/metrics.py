"""payload_metrics: one XTS3 payload's memory and compute figures."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..macs import op_macs
from .liveness import arena_lower_bound
from .s3_dispatch import s3_path
from .summary import parse


@dataclass(frozen=True)
class OpMetrics:
    index: int
    opcode: str
    macs: int
    s3_simd: bool  # the op's main path on an optimized ESP32-S3 build is SIMD
    s3_simd_macs: int  # MACs on the SIMD path (a documented scalar remainder excluded)
    kernel: str
    reason: str


@dataclass(frozen=True)
class PayloadMetrics:
    arena_bytes: int  # the blob's planned activation arena (header)
    arena_lower_bound: int  # no plan for this op order is smaller (analysis.liveness)
    scratch_bytes: int  # this build's scratch (0 on the host's ANSI kernels)
    macs: int
    s3_simd_macs: int
    ops: list[OpMetrics] = field(default_factory=list)

    @property
    def s3_simd_fraction(self) -> float:
        """MAC-weighted share of SIMD-eligible work (1.0 for a graph without MACs)."""
        return self.s3_simd_macs / self.macs if self.macs else 1.0


def payload_metrics(blob) -> PayloadMetrics:
    """Figures of an XTS3 blob (bytes) or of its native summary (dict)."""
    s = parse(blob)
    rows = []
    for op in s["ops"]:
        macs = op_macs(s, op)
        path = s3_path(s, op)
        rows.append(OpMetrics(op["index"], op["op"], macs, path.simd, round(macs * path.simd_fraction),
                              path.kernel, path.reason))
    return PayloadMetrics(
        arena_bytes=s["arena_bytes"],
        arena_lower_bound=arena_lower_bound(s),
        scratch_bytes=s["scratch_bytes"],
        macs=sum(r.macs for r in rows),
        s3_simd_macs=sum(r.s3_simd_macs for r in rows),
        ops=rows,
    )
