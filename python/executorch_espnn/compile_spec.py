"""Compile specs of the ESP-NN backend (the only way to pass options; no
environment variables).

ExecuTorch stores these ``CompileSpec`` (key, bytes) pairs next to each
delegate payload and hands them to ``EspNNBackend.preprocess`` and to the
runtime's ``init()``.
"""

from __future__ import annotations

from dataclasses import dataclass

TARGETS = ("esp32s3", "esp32")
_KEYS = ("target",)


@dataclass(frozen=True)
class CompileOptions:
    """Decoded compile specs (defaults = no specs)."""

    target: str = "esp32s3"

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
        return cls(target=target)


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

    Example::

        specs = EspNNCompileSpecBuilder().set_target("esp32").build()
        edge = to_espnn_edge(ep, compile_specs=specs)
    """

    def __init__(self):
        self._target = CompileOptions.target

    def set_target(self, target: str) -> "EspNNCompileSpecBuilder":
        if target not in TARGETS:
            raise ValueError(f"target {target!r} is not supported; choose one of {list(TARGETS)}")
        self._target = target
        return self

    def build(self) -> list:
        from executorch.exir.backend.compile_spec_schema import CompileSpec

        return [CompileSpec("target", self._target.encode("ascii"))]
