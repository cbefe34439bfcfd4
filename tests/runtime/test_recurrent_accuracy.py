"""A GRU and an LSTM trained here on a sequence task that needs memory
(benchmarks/recurrent_accuracy.py: which of two markers came first, and the
second's sign; chance 25 %): after int8 quantization and lowering, the .pte
(the delegate's GRU / LSTM op) is as accurate as the convert_pt2e model and
predicts the same class almost always. Shorter training than the benchmark;
its figures are in docs/performance.md."""

import importlib.util
from pathlib import Path

import pytest
from torch import nn

_SPEC = importlib.util.spec_from_file_location(
    "recurrent_accuracy", Path(__file__).resolve().parents[2] / "benchmarks" / "recurrent_accuracy.py")
task = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(task)


@pytest.mark.parametrize("cell", [nn.GRU, nn.LSTM], ids=["gru", "lstm"])
def test_trained_recurrent_model_keeps_its_accuracy_on_the_delegate(cell):
    model = task.train(cell, hidden=32, steps=250)
    r = task.evaluate(model, n_test=300)
    assert r["partitions"] == 1 and r["cpu_ops"] == 0, r
    assert r["float"] > 0.5, f"the task was not learnt: {r}"  # far above chance (0.25)
    assert r["pte"] >= r["pt2e"] - 0.02, r
    assert r["pte_agrees_with_pt2e"] >= 0.97, r
