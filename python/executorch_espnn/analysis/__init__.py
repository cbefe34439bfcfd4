"""Static analysis of an XTS3 payload (a delegate's blob).

Everything is computed from what the native parser reads back out of the
blob (``executorch_espnn._native``'s summary): no second parser here.

* ``payload_metrics(blob)``: arena size, its lower bound for the blob's
  execution order, scratch, MACs and which of them ESP-NN's ESP32-S3 build
  runs on a SIMD path (per op, with the reason).
* ``arena_timeline(blob)``: bytes live at every op step (the lower bound's
  count) next to the bytes the stored plan spans at that step.
"""

from .liveness import ArenaStep, arena_lower_bound, arena_timeline
from .metrics import OpMetrics, PayloadMetrics, payload_metrics
from .s3_dispatch import S3Path, s3_path

__all__ = [
    "ArenaStep",
    "OpMetrics",
    "PayloadMetrics",
    "S3Path",
    "arena_lower_bound",
    "arena_timeline",
    "payload_metrics",
    "s3_path",
]
