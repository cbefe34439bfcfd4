"""Compile specs of the ESP-NN backend (the only way to pass options; no
environment variables).

ExecuTorch stores these ``CompileSpec`` (key, bytes) pairs next to each
delegate payload and hands them to ``EspNNBackend.preprocess`` and to the
runtime's ``init()``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

from .memory.schedule_search import SCHEDULE_MODES
from .targets import TARGETS as _CHIPS

TARGETS = tuple(_CHIPS)  # ("esp32s3", "esp32"): the chips of targets.py
_KEYS = ("target", "arena_budget", "schedule")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]i?[bB]?|[bB])?\s*$")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 * 1024}


def parse_size(text) -> int:
    """Bytes from ``"320K"``, ``"1.5M"``, ``"16000"`` (K = 1024 bytes, M =
    1024 K; ``KB``/``KiB``/``B`` also read) or an int. ValueError, saying
    which forms are read, for anything else or a size that is not a whole,
    positive number of bytes."""
    if isinstance(text, bool):
        raise ValueError(f"arena budget {text!r} is not a size")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise ValueError(f"arena budget {text!r} is not a size: give bytes (16000) or a number with K or M "
                             "(320K, 1.5M; K = 1024 bytes)")
        number, unit = m.group(1), (m.group(2) or "")[:1].lower()
        # Exact decimal arithmetic: a float would print 1.0000000001K as "(1024)".
        scaled = Decimal(number) * _UNITS[unit]
        if scaled != scaled.to_integral_value():
            raise ValueError(f"arena budget {text!r} is not a whole number of bytes ({scaled} B; "
                             f"give {math.floor(scaled)} or {math.ceil(scaled)})")
        value = int(scaled)
    if value <= 0:
        raise ValueError(f"arena budget {text!r} must be more than 0 bytes")
    if value >= 2**32:
        raise ValueError(f"arena budget {text!r} ({value:,} B) exceeds the 32-bit arena size of the format")
    return value


@dataclass(frozen=True)
class CompileOptions:
    """Decoded compile specs (defaults = no specs)."""

    target: str = "esp32s3"
    arena_budget: int | None = None  # bytes each partition's arena must fit in (None: the smallest the mode reaches)
    schedule: str = "auto"  # memory.schedule_search.SCHEDULE_MODES

    @classmethod
    def from_specs(cls, specs) -> "CompileOptions":
        values: dict[str, str] = {}
        for spec in specs or ():
            key = spec.key
            if key not in _KEYS:
                raise ValueError(f"unknown EspNNBackend compile spec {key!r}; known: {list(_KEYS)} "
                                 "(build them with EspNNCompileSpecBuilder)")
            if key in values:
                raise ValueError(f"compile spec {key!r} is given twice")
            raw = bytes(spec.value)
            try:
                values[key] = raw.decode("ascii")
            except UnicodeDecodeError:
                raise ValueError(f"compile spec {key!r} must be ASCII text, got {raw!r}") from None
        target = values.get("target", cls.target)
        if target not in TARGETS:
            raise ValueError(f"compile spec target={target!r} is not supported; choose one of {list(TARGETS)}")
        schedule = values.get("schedule", cls.schedule)
        if schedule not in SCHEDULE_MODES:
            raise ValueError(f"compile spec schedule={schedule!r} is not supported; choose one of "
                             f"{list(SCHEDULE_MODES)}")
        budget = values.get("arena_budget")
        if budget is not None:
            if not budget.isdigit():
                raise ValueError(f"compile spec arena_budget={budget!r} must be a decimal number of bytes "
                                 "(EspNNCompileSpecBuilder.set_arena_budget writes it)")
            budget = parse_size(int(budget))
        return cls(target=target, arena_budget=budget, schedule=schedule)


class EspNNCompileSpecBuilder:
    """Builds the compile specs of ``EspNNPartitioner`` / ``to_espnn_edge``.

    Options:

    * ``set_target(name)`` - the chip the program is compiled for:
      ``"esp32s3"`` (default; ESP-NN's SIMD kernels) or ``"esp32"`` (ESP-NN's
      generic C paths). Format version 1 programs are the same bytes for both
      targets: everything target-specific (ESP-NN scratch sizes, routing around
      kernel defects) is decided by the runtime at ``init()``. The target is
      recorded in the compile specs so that the runtime and tools can tell
      which chip a ``.pte`` was built for.

    * ``set_schedule(mode)`` - how each partition's ops run (format version 2
      for fused): ``"auto"`` (default: fused band-by-band execution only where
      it lowers the peak arena; the smallest peak, then the fewest op
      invocations), ``"layer"`` (every op on whole tensors, as format
      version 1 programs), ``"fused"`` (every fusable chain fused).
    * ``set_arena_budget(size)`` - bytes each partition's arena must fit in:
      an int or ``"320K"``/``"1.5M"`` (K = 1024). The schedule then is the one
      with the fewest op invocations whose peak fits; lowering raises
      ``ScheduleError`` (naming the smallest peak reachable) when none fits.

    Example::

        specs = EspNNCompileSpecBuilder().set_target("esp32").set_arena_budget("320K").build()
        edge = to_espnn_edge(ep, compile_specs=specs)
    """

    def __init__(self):
        self._target = CompileOptions.target
        self._schedule: str | None = None
        self._budget: int | None = None

    def set_target(self, target: str) -> "EspNNCompileSpecBuilder":
        if target not in TARGETS:
            raise ValueError(f"target {target!r} is not supported; choose one of {list(TARGETS)}")
        self._target = target
        return self

    def set_schedule(self, mode: str) -> "EspNNCompileSpecBuilder":
        if mode not in SCHEDULE_MODES:
            raise ValueError(f"schedule {mode!r} is not supported; choose one of {list(SCHEDULE_MODES)}")
        self._schedule = mode
        return self

    def set_arena_budget(self, size) -> "EspNNCompileSpecBuilder":
        """``size``: bytes (int) or a string such as ``"320K"``; None clears it."""
        self._budget = None if size is None else parse_size(size)
        return self

    def build(self) -> list:
        # lazy: executorch; the spec builder and parse_size are used without it (the CLI's arguments)
        from executorch.exir.backend.compile_spec_schema import CompileSpec

        specs = [CompileSpec("target", self._target.encode("ascii"))]
        if self._schedule is not None:
            specs.append(CompileSpec("schedule", self._schedule.encode("ascii")))
        if self._budget is not None:
            specs.append(CompileSpec("arena_budget", str(self._budget).encode("ascii")))
        return specs
