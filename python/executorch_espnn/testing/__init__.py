"""Test helpers for ExecuTorch's shared backend test suite.

``suite_flow`` defines the ``espnn`` int8 flow (EspNNQuantizer +
EspNNPartitioner, the .pte run by ``executorch.runtime`` with the C++
EspNNBackend); ``suite_plugin`` is the pytest plugin that adds it to the
suite's flow registry. See docs/runtime.md, "ExecuTorch's operator suite".
"""
