"""`espnn compile`'s warning when the program is further from the quantized
PyTorch model than deep networks usually are (issue 29: VWW MobileNetV1 6 steps
off, "the CLI warns" without saying what the distance is)."""

from executorch_espnn.cli.compile_cmd import EXPECTED_DEVIATION_LSB, deviation_warning


def _row(index, max_lsb, differing=0.5, lsb=0.05):
    return {"index": index, "max_abs_diff": (max_lsb or 0) * (lsb or 1), "lsb": lsb, "max_lsb": max_lsb,
            "differing_fraction": differing, "nonfinite_mismatches": 0, "first_nonfinite_mismatch": None}


def _verification(model_rows, device_rows=()):
    device = {"outputs": list(device_rows), "passed": True} if device_rows is not None else None
    return {"quantized_model": {"outputs": model_rows}, "device_runtime": device}


def test_names_each_far_output_and_the_double_rounding_that_explains_it():
    text = deviation_warning(_verification([_row(0, 6.0, 0.5), _row(1, 2.0)], [_row(0, 0.0, 0.0), _row(1, 0.0, 0.0)]))
    assert "output 0 is up to 6 steps from the quantized PyTorch model (50.0 % of its elements differ)" in text
    assert "output 1" not in text  # within the usual
    assert f"more than the {EXPECTED_DEVIATION_LSB} usual" in text
    assert "bit for bit what the device runtime computes" in text
    assert "MultiplyByQuantizedMultiplier rounds twice" in text and "exact integer reference" in text
    assert "--eval-data" in text and "--tolerance-lsb" in text


def test_claims_the_device_agreement_only_when_it_was_exact():
    # Without the device comparison (the host runtime lacked a kernel) or with a step off, no claim.
    for device_rows in (None, [_row(0, 1.0, 0.01)]):
        text = deviation_warning(_verification([_row(0, 5.0)], device_rows))
        assert text and "bit for bit" not in text


def test_float_noise_on_the_usual_distance_does_not_warn():
    # 3 steps computed as (a - b) / step in float: 3.0000002, which is 3 steps.
    assert deviation_warning(_verification([_row(0, 3.0000002)], [_row(0, 0.0, 0.0)])) is None
    assert deviation_warning(_verification([_row(0, None, 0.0, lsb=None)], [])) is None  # a float output
