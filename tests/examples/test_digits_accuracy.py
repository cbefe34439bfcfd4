"""Accuracy on real data (scikit-learn's bundled handwritten digits): the
ESP-NN delegate, run from the .pte by executorch.runtime, is within 1
percentage point of the int8 PyTorch model, and the trained float model is
sane (> 90%). Runs examples/digits_accuracy.py as documented."""

import re

import pytest

pytest.importorskip("executorch")
pytest.importorskip("sklearn", reason="scikit-learn (a test dependency) provides the digits data")


def percentages(text):
    found = {}
    for label, key in (("float PyTorch", "float"), ("int8 PyTorch", "int8"), ("ESP-NN delegate", "delegate")):
        m = re.search(re.escape(label) + r"[^\n]*?(\d+\.\d+)%", text)
        assert m, f"no {label} accuracy in the output"
        found[key] = float(m.group(1))
    return found


def test_delegate_accuracy_is_within_1_point_of_int8_pytorch(load_example, tmp_path, capsys):
    out = tmp_path / "digits.pte"
    code = load_example("digits_accuracy").main(["--output", str(out)])
    text = capsys.readouterr().out
    acc = percentages(text)
    print(text)
    assert acc["float"] > 90.0
    assert acc["int8"] > 90.0
    assert abs(acc["delegate"] - acc["int8"]) <= 1.0
    assert code == 0 and "digits_accuracy: OK" in text
    assert "1 partition(s)" in text and "0 CPU op(s)" in text  # the whole network on ESP-NN
    assert b"EspNNBackend" in out.read_bytes()


def test_split_is_fixed_and_stratified(load_example):
    module = load_example("digits_accuracy")
    x_tr, y_tr, x_te, y_te = module.load_split()
    assert x_tr.shape == (1347, 1, 8, 8) and x_te.shape == (450, 1, 8, 8)
    assert 0.0 <= float(x_tr.min()) and float(x_tr.max()) <= 1.0
    assert sorted(set(y_te.tolist())) == list(range(10))
    again = module.load_split()
    assert all((a == b).all() for a, b in zip((x_tr, y_tr, x_te, y_te), again))
