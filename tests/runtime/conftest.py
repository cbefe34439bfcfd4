"""Fixtures for the .pte end-to-end tests (executorch.runtime + the C++
EspNNBackend); helpers are in pte_harness.py."""

import pytest

pytest.importorskip("executorch")


@pytest.fixture(autouse=True)
def _needs_delegate(request):
    import executorch_espnn

    if executorch_espnn._et_backend is None and request.node.get_closest_marker("no_delegate_ok") is None:
        pytest.fail(f"executorch_espnn._et_backend is missing: {executorch_espnn.ET_BACKEND_ERROR}")
