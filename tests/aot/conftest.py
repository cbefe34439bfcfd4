"""AOT test fixtures. `quantize` is models.espnn_quantize: executorch_espnn.quantize
with EspNNQuantizer, calibrated on the example when a test gives no calibration."""

import pytest

pytest.importorskip("executorch")


@pytest.fixture(scope="session", name="quantize")
def quantize_fixture():
    from models import espnn_quantize

    return espnn_quantize
