"""Lowering: fx subgraph -> XTS3 program (see docs/lowering.md).

``EspNNBackend`` is imported lazily so that the framework can be imported
without executorch (only torch is needed for the checks).
"""

from .lower import LoweredProgram, LoweringError, ParserRejection, TooLarge, lower_subgraph

__all__ = ["EspNNBackend", "LoweredProgram", "LoweringError", "ParserRejection", "TooLarge", "lower_subgraph"]


def __getattr__(name):
    if name == "EspNNBackend":
        # lazy: backend.py imports executorch; the lowering itself needs only torch
        from .backend import EspNNBackend

        return EspNNBackend
    raise AttributeError(name)
