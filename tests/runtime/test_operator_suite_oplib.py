"""ExecuTorch's operator suite in operator-library mode: the ``espnn_oplib``
flow (testing/suite_flow.py) lowers each case with ``to_espnn_oplib`` and,
where the delegate runs the same ops, checks the two modes' outputs byte for
byte. Child run of the ops both modes share, as test_operator_suite_flow.py
does for the delegate flow."""

import pytest
import torch

pytest.importorskip("executorch")
pytest.importorskip("executorch.backends.test.suite.operators")

from suite_harness import run_suite_cases  # noqa: E402

# The ops both modes run as espnn:: ops / delegate records (docs/oplib.md).
SHARED_CASES = [
    ("test_conv2d", "test_conv2d_basic"),
    ("test_convtranspose2d", "test_convtranspose2d_basic"),
    ("test_linear", "test_linear_unbatched"),
    ("test_add", "test_add_f32_bcast_first"),
    ("test_mul", "test_multiply_f32_bcast_first"),
    ("test_hardswish", "test_hardswish_f32_multi_dim"),
    ("test_sigmoid", "test_sigmoid_f32_multi_dim"),  # the LUT op, as tanh, silu and gelu
    ("test_tanh", "test_tanh_f32_multi_dim"),
    ("test_silu", "test_silu_f32_multi_dim"),
    ("test_gelu", "test_gelu_f32_multi_dim"),
    # nn.LSTM whose final state is used: decomposed, its matmuls and adds as espnn:: ops
    ("test_lstm", "test_lstm_feature_sizes"),
]


def test_both_flows_are_registered_with_the_suite():
    from executorch.backends.test.suite import flow

    import executorch_espnn.testing.suite_plugin  # noqa: F401  (installs the flows)

    flows = flow.all_flows()
    assert flows["espnn_oplib"].quantize and not flows["espnn_oplib"].is_delegated
    assert flows["espnn"].is_delegated


class ConvAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y + y


def test_oplib_tester_compares_with_the_delegate_byte_for_byte(monkeypatch):
    from executorch_espnn.partition.report import pte_program
    from executorch_espnn.testing import suite_flow

    torch.manual_seed(0)
    tester = suite_flow.EspNNOplibTester(ConvAdd().eval(), (torch.randn(1, 3, 8, 8),))
    tester.quantize().export().to_edge_transform_and_lower().to_executorch().serialize()
    tester.run_method_and_compare_outputs()
    assert tester.shared["compared"] >= 1
    program = pte_program(tester.get_artifact())
    assert all(not plan.delegates for plan in program.execution_plan)
    assert "espnn::quantized_conv2d" in {op.name for plan in program.execution_plan for op in plan.operators}

    # A delegate that computed other bytes fails the run.
    real = suite_flow.run_pte
    monkeypatch.setattr(suite_flow, "run_pte", lambda pte, flat: [t + 1 for t in real(pte, flat)]
                        if pte == tester.shared["delegate_pte"] else real(pte, flat))
    with pytest.raises(AssertionError, match="byte for byte"):
        tester.run_method_and_compare_outputs()


def test_suite_cases_pass_in_oplib_mode_bit_exact_with_the_delegate(tmp_path):
    proc, rows = run_suite_cases(tmp_path, "espnn_oplib", SHARED_CASES)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    assert {r["test"].split("::")[-1] for r in rows} == {f"{c}[espnn_oplib]" for _, c in SHARED_CASES}
    for r in rows:
        # The suite counts the aten ops lowered away as "delegated"; the program calls espnn:: kernels.
        assert r["result"].startswith("Success"), r
        assert any(op.startswith("espnn::quantized_") for op in r["undelegated_ops"]), r
