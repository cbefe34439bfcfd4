"""executorch-espnn: ExecuTorch backend for Espressif's ESP-NN int8 kernels.

``executorch_espnn._native`` is the device runtime (XTS3 parser and int8
interpreter, the same C++ that runs on the ESP32) compiled for the host.

The ExecuTorch-facing API is imported lazily, so ``import executorch_espnn``
(and ``_native``, ``serialization``) work without torch or executorch:

    quantize, EspNNQuantizer, EspNNPartitioner, EspNNBackend, to_espnn_edge,
    delegation_report, EspNNCompileSpecBuilder, delegate_payloads,
    output_scales, QuantizationError, ScheduleError

``quantize(model, example_inputs, calibration, qat=...)`` is the whole PT2E
flow (export, prepare, calibrate, convert) with ``EspNNQuantizer``; see
``executorch_espnn.pipeline``.

Importing the package also loads ``_et_backend`` (when it was built): that
maps libexecutorch.so from the executorch wheel — not torch or executorch's
Python code — and registers the C++ EspNNBackend delegate there, so
``executorch.runtime.Runtime`` runs .pte files that use it (see
``executorch_espnn.runtime`` and docs/runtime.md).
"""

import importlib
from importlib import metadata


def _version() -> str:
    """The installed distribution's version: defined once, in pyproject.toml
    ([project] version; the component manifest and the release tag must
    agree with it, .github/scripts/check_release.py). A source tree on
    PYTHONPATH without installed metadata (scripts/dev-build.sh) says so."""

    try:
        return metadata.version("executorch-espnn")
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()

try:  # registers EspNNBackend with ExecuTorch's C++ runtime
    from . import _et_backend
except ImportError as _e:  # built without executorch, or the wheel is missing
    _et_backend = None
    ET_BACKEND_ERROR = str(_e)
else:
    ET_BACKEND_ERROR = None

_LAZY = {
    "quantize": ("executorch_espnn.pipeline", "quantize"),
    "QuantizationError": ("executorch_espnn.pipeline", "QuantizationError"),
    "delegate_payloads": ("executorch_espnn.pipeline", "delegate_payloads"),
    "output_scales": ("executorch_espnn.pipeline", "output_scales"),
    "EspNNQuantizer": ("executorch_espnn.quantizer", "EspNNQuantizer"),
    "EspNNPartitioner": ("executorch_espnn.partition", "EspNNPartitioner"),
    "EspNNBackend": ("executorch_espnn.lowering.backend", "EspNNBackend"),
    "to_espnn_edge": ("executorch_espnn.partition", "to_espnn_edge"),
    "delegation_report": ("executorch_espnn.partition", "delegation_report"),
    "EspNNCompileSpecBuilder": ("executorch_espnn.compile_spec", "EspNNCompileSpecBuilder"),
    "ScheduleError": ("executorch_espnn.memory.schedule_search", "ScheduleError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'executorch_espnn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
