"""The examples run as documented."""

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("executorch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quantize_and_lower_writes_a_fully_delegated_pte(tmp_path, capsys):
    out = tmp_path / "model.pte"
    assert _load("quantize_and_lower").main(["--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "1 partition(s)" in text and "0 CPU op(s)" in text
    assert "max 0 LSB" in text or "max 1 LSB" in text
    assert re.search(r"\.pte on executorch\.runtime: vs quantized PyTorch: max [01] LSB", text)
    data = out.read_bytes()
    assert data[4:8] == b"ET12"  # ExecuTorch program flatbuffer identifier
    assert b"EspNNBackend" in data
