"""Fixtures of the espnn CLI tests: share compiled programs across a module
(helpers: cli_harness.py)."""

import numpy as np
import pytest

pytest.importorskip("executorch")
torch = pytest.importorskip("torch")

from cli_harness import espnn  # noqa: E402


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """Calibration .npy and labelled .npz for the default model (tiny_cnn,
    1x3x32x32); labels are the float model's own predictions, so float top-1 is 100%."""
    from executorch_espnn.models import tiny_cnn

    d = tmp_path_factory.mktemp("tiny_data")
    rng = np.random.default_rng(0)
    calib = rng.standard_normal((6, 3, 32, 32)).astype(np.float32)
    np.save(d / "calib.npy", calib)
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    model, _ = tiny_cnn()
    with torch.no_grad():
        y = model(torch.from_numpy(x)).argmax(-1).numpy()
    np.savez(d / "eval.npz", x=x, y=y)
    return d


@pytest.fixture(scope="session")
def compiled(tmp_path_factory, tiny_data):
    """`espnn compile` of the default model with calibration, labelled data,
    JSON and HTML: the main job of the README."""
    d = tmp_path_factory.mktemp("compiled")
    r = espnn("compile", "-o", d / "tiny.pte", "--calibration", tiny_data / "calib.npy",
              "--eval-data", tiny_data / "eval.npz", "--html", d / "tiny.html")
    return r, d
