"""One clear line per error (which file/node, what to do), --verbose for the
traceback, and the documented exit codes."""

import subprocess
import sys

import numpy as np
import pytest

from cli_harness import HERE, error_line, espnn

MODELS = HERE / "cli_models.py"


def test_exit_codes_are_the_documented_ones():
    from executorch_espnn.cli import errors

    doc = (HERE.parent.parent / "docs" / "cli.md").read_text()
    for code, meaning in errors.EXIT_CODES.items():
        assert f"| {code} |" in doc, f"exit code {code} ({meaning}) is not in docs/cli.md"
    assert (errors.EXIT_OK, errors.EXIT_VERIFICATION_FAILED, errors.EXIT_USAGE, errors.EXIT_LOWERING,
            errors.EXIT_INTERNAL) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("spec, words", [
    ("no_colon_here", ["not of the form module:function"]),
    ("no_such_module_xyz:f", ["no module named 'no_such_module_xyz'"]),
    ("executorch_espnn.models:no_such_model", ["has no attribute 'no_such_model'", "tiny_cnn"]),
    (f"{MODELS}:broken", ["calling it failed", "the model zoo is on fire"]),
    (f"{MODELS}:not_a_pair", ["must return (torch.nn.Module, example_inputs)"]),
    ("missing/file.py:f", ["missing/file.py does not exist"]),
])
def test_bad_model_specs_are_usage_errors(spec, words):
    r = espnn("compile", spec)
    assert r.code == 2, r
    line = error_line(r)
    for w in words:
        assert w in line
    assert "Traceback" not in r.err


def test_torchvision_model_without_torchvision_says_so():
    pytest.importorskip("executorch")
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torchvision is installed here; the error cannot happen")
    r = espnn("compile", "torchvision:mobilenet_v2")
    assert r.code == 2
    line = error_line(r)
    assert "needs torchvision, which is not installed" in line and "pip install torchvision" in line


def test_export_failure_is_a_lowering_error_naming_the_step():
    r = espnn("compile", f"{MODELS}:data_dependent", "-q")
    assert r.code == 3, r
    assert "torch.export of the model failed" in error_line(r)


def test_verbose_shows_the_traceback():
    r = espnn("compile", f"{MODELS}:broken", "--verbose")
    assert r.code == 2
    assert "Traceback (most recent call last)" in r.err and "the model zoo is on fire" in r.err
    error_line(r)  # still ends with the one line


def test_calibration_file_errors(tmp_path):
    r = espnn("compile", f"{MODELS}:mlp", "--calibration", tmp_path / "nope.npy")
    assert r.code == 2 and "does not exist" in error_line(r)
    np.save(tmp_path / "bad.npy", np.zeros((3, 15), np.float32))
    r = espnn("compile", f"{MODELS}:mlp", "--calibration", tmp_path / "bad.npy")
    assert r.code == 2
    line = error_line(r)
    assert "bad.npy" in line and "(3, 15)" in line and "expected (N, 16)" in line
    r = espnn("compile", f"{MODELS}:mlp", "--calibration", f"{MODELS}:wrong_shape_batches")
    assert r.code == 2 and "batch 0 has input shapes [(1, 15)]" in error_line(r)
    r = espnn("compile", f"{MODELS}:mlp", "--eval-data", f"{MODELS}:unlabelled_batches")
    assert r.code == 2 and "has no labels" in error_line(r)
    r = espnn("compile", f"{MODELS}:mlp", "--qat-epochs", "1")
    assert r.code == 2 and "--qat-epochs needs --qat-data" in error_line(r)


def test_image_folder_needs_pillow_or_loads(tmp_path):
    folder = tmp_path / "imgs" / "cat"
    folder.mkdir(parents=True)
    try:
        from PIL import Image
    except ImportError:
        (folder / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # never opened: Pillow is checked first
        from executorch_espnn.cli.data import load_dataset

        import torch
        from executorch_espnn.cli.errors import UsageError

        with pytest.raises(UsageError, match="needs Pillow, which is not installed"):
            load_dataset(str(tmp_path / "imgs"), (torch.zeros(1, 3, 8, 8),), "--calibration")
    else:
        import torch

        from executorch_espnn.cli.data import load_dataset

        Image.new("RGB", (20, 10), (255, 0, 0)).save(folder / "a.png")
        ds = load_dataset(str(tmp_path / "imgs"), (torch.zeros(1, 3, 8, 8),), "--calibration")
        (x,), y = ds.batches[0].inputs, ds.batches[0].labels
        assert x.shape == (1, 3, 8, 8) and float(x[0, 0].min()) == 1.0 and y.tolist() == [0]


def test_an_unexpected_exception_is_an_internal_error(monkeypatch):
    from executorch_espnn.cli import loading

    def boom(spec):
        raise KeyError("surprise")

    monkeypatch.setattr(loading, "load_model", boom)
    r = espnn("compile")
    assert r.code == 4
    line = error_line(r)
    assert line.startswith("espnn: internal error: KeyError") and "--verbose" in line


def test_usage_errors_exit_2_and_no_command_prints_help():
    assert espnn("compile", "--target", "esp32c3").code == 2
    assert espnn("frobnicate").code == 2
    r = espnn()
    assert r.code == 2 and "compile" in r.err


def test_python_dash_m_runs_the_same_command():
    out = subprocess.run([sys.executable, "-m", "executorch_espnn", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    for word in ("compile", "report", "run", "bundle", "exit codes"):
        assert word in out.stdout


def test_one_line_is_the_one_message_helper_of_library_and_cli():
    from executorch_espnn import pipeline
    from executorch_espnn.cli import compile_steps, errors
    from executorch_espnn.error_text import one_line

    assert errors.one_line is one_line and pipeline.one_line is one_line and compile_steps.one_line is one_line
    e = ValueError("first line\n  second\tline ")
    assert one_line(e) == "first line second line"
    assert one_line(e, typed=True) == "ValueError: first line second line"
    assert one_line(e, typed=True, limit=5) == "ValueError: first"  # the limit cuts the text, not the type
    assert one_line(KeyError(), typed=True) == "KeyError"  # no dangling ": " when there is no text
