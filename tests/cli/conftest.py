"""Fixtures of the espnn CLI tests: run the command in-process (torch is
imported once) and share compiled programs across a module."""

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("executorch")
torch = pytest.importorskip("torch")

HERE = Path(__file__).parent
SCHEMA = HERE.parent.parent / "docs" / "report-schema.json"


class Result:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    def __repr__(self):
        return f"Result(code={self.code}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


def espnn(*args, cwd=None) -> Result:
    """Runs `espnn args...` in-process; returns exit code, stdout, stderr."""
    import os

    from executorch_espnn.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


def error_line(result: Result) -> str:
    """The one `espnn: error:` line of a failed command (asserts there is exactly one)."""
    lines = [ln for ln in result.err.splitlines() if ln.startswith("espnn: ")]
    errors = [ln for ln in lines if ln.startswith(("espnn: error:", "espnn: internal error:"))]
    assert len(errors) == 1, result
    return errors[0]


def validate(doc: dict) -> None:
    """Validates a report against docs/report-schema.json. Without jsonschema
    (the `test` extra) only test_schema.py is skipped; the callers' own
    assertions still run."""
    try:
        import jsonschema
    except ImportError:
        return
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


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
