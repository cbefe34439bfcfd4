"""The runtime's limits, read from the native binding (xts3_format.h)."""

from __future__ import annotations

from .. import _native


def runtime_limits() -> dict[str, int]:
    """LIMITS of the XTS3 runtime. Partition sizes and ESP-NN's uint16
    geometry are checked against these; tests may monkeypatch this function
    to exercise partition splitting with small limits."""

    return dict(_native.LIMITS)
