"""NaN and infinity in every comparison of the product: a NaN where the other
side has a number (or the reverse) is a mismatch whatever the tolerance;
inf matches only the same inf; both sides NaN is equal only with
equal_nan=True (numpy's rule), which no gate of the product uses."""

import numpy as np
import pytest
import torch

from cli_harness import espnn
from executorch_espnn.cli.compare import LargestDiffs
from executorch_espnn.output_diff import element_diff

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])


def _random_pair(rng):
    shape = tuple(rng.integers(1, 5, rng.integers(1, 4)))
    want = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
    got = want + rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 1)
    for arr in (got, want):  # inject specials at random places, sometimes the same on both sides
        k = rng.integers(0, 3)
        idx = rng.integers(0, arr.size, k)
        arr.reshape(-1)[idx] = rng.choice(SPECIALS, k)
    if rng.random() < 0.3:
        idx = rng.integers(0, got.size)
        got.reshape(-1)[idx] = want.reshape(-1)[idx] = rng.choice(SPECIALS[:3])
    return got, want


@pytest.mark.parametrize("equal_nan", [False, True])
def test_the_float_rule_is_numpys_allclose(equal_nan):
    rng = np.random.default_rng(1)
    checked = agreed_nonfinite = 0
    for _ in range(3000):
        got, want = _random_pair(rng)
        atol = float(10.0 ** rng.integers(-6, 1))
        rtol = float(rng.choice([0.0, 1.3e-6, 1e-3]))
        cmp = LargestDiffs([None], float_rtol=rtol, equal_nan=equal_nan)
        cmp.add([torch.from_numpy(got)], [torch.from_numpy(want)])
        expected = bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan))
        assert cmp.passed(0.0, atol) == expected, (got, want, atol, rtol)
        checked += 1
        agreed_nonfinite += expected and not np.isfinite(want).all()
    assert checked == 3000 and agreed_nonfinite > 50  # the specials were exercised on the passing side too


def test_nan_is_never_folded_into_the_maximum():
    """The defect: max(0.0, nan) is 0.0, so an all-NaN reference 'matched'."""
    for got, want in [(np.zeros(4), np.full(4, np.nan)), (np.full(4, 1e6), np.r_[np.full(3, 1e6), np.nan]),
                      (np.full(4, np.nan), np.zeros(4)), (np.array([np.inf]), np.array([-np.inf])),
                      (np.array([np.inf]), np.array([1.0]))]:
        cmp = LargestDiffs([None])
        cmp.add([torch.from_numpy(got)], [torch.from_numpy(want)])
        assert not cmp.passed(0.0, 1e30)
        assert cmp.nonfinite[0] >= 1 and "got" in cmp.first_nonfinite[0]
    cmp = LargestDiffs([None])
    cmp.add([torch.tensor([np.nan, 1.0])], [torch.tensor([np.nan, 1.0])])
    assert not cmp.passed(0.0, 0.0)  # the gates' rule: a NaN never passes
    # int8 outputs judged in steps: a NaN against a dequantized value fails whatever the tolerance
    cmp = LargestDiffs([0.1])
    cmp.add([torch.tensor([0.1, np.nan])], [torch.tensor([0.1, 0.2])])
    assert not cmp.passed(1000.0, 0.0) and cmp.first_nonfinite[0] == "sample 0 index (1,): got nan, reference 0.2"


def test_element_diff_names_the_first_mismatch():
    e = element_diff(torch.tensor([[1.0, 2.0], [np.inf, 4.0]]), torch.tensor([[1.0, 2.0], [3.0, np.nan]]))
    assert e.nonfinite_mismatches == 2 and e.first_mismatch == "index (1, 0): got inf, reference 3"
    assert e.max_abs == 0.0


def test_compare_with_fails_on_nan(compiled):
    from executorch_espnn import runtime

    _, d = compiled
    x = torch.randn(1, 3, 32, 32)
    ok = runtime.compare_with(d / "tiny.pte", lambda x: runtime.run_pte(d / "tiny.pte", [x])[0], [x])
    assert ok.within(0.0) and ok.nonfinite_mismatches == [0]
    bad = runtime.compare_with(d / "tiny.pte", lambda x: torch.full((1, 10), float("nan")), [x])
    assert not bad.within(1e30) and bad.nonfinite_mismatches == [10]
    with pytest.raises(ValueError, match="finite number >= 0"):
        ok.within(float("nan"))


@pytest.fixture(scope="module")
def tiny_output(compiled, tmp_path_factory):
    _, d = compiled
    t = tmp_path_factory.mktemp("nan_refs")
    r = espnn("run", d / "tiny.pte", "--save", t)
    assert r.code == 0, r
    return d / "tiny.pte", np.load(t / "output_0.npy"), t


@pytest.mark.parametrize("case", ["all_nan", "big_plus_one_nan", "one_nan_else_exact", "inf"])
def test_run_reference_with_nan_differs(tiny_output, case):
    pte, out, t = tiny_output
    ref = out.copy()
    if case == "all_nan":
        ref[:] = np.nan
    elif case == "big_plus_one_nan":
        ref[:] = 1e6
        ref[0, 3] = np.nan
    elif case == "one_nan_else_exact":
        ref[0, 3] = np.nan
    else:
        ref[0, 3] = np.inf
    np.save(t / f"{case}.npy", ref)
    r = espnn("run", pte, "--reference", t / f"{case}.npy", "--atol", "1e30")
    assert r.code == 1, r
    assert "DIFFERS FROM the reference" in r.out and "NaN/inf element(s)" in r.out
    first = 0 if case == "all_nan" else 3
    assert f"first at sample 0 index (0, {first})" in r.out


def test_run_reference_exact_still_matches(tiny_output):
    pte, out, t = tiny_output
    np.save(t / "exact.npy", out)
    r = espnn("run", pte, "--reference", t / "exact.npy")
    assert r.code == 0 and "matches the reference" in r.out, r


def test_compile_fails_when_the_program_outputs_nan(tmp_path, monkeypatch):
    """The host-verification gate of `espnn compile`: the .pte's outputs with
    one NaN (as a delegate that computed garbage would give) fail it, exit 1."""
    from executorch_espnn import runtime

    real = runtime.run_pte

    def nan_delegate(*args, **kwargs):
        outs = real(*args, **kwargs)
        outs[0] = outs[0].clone()
        outs[0].view(-1)[0] = float("nan")
        return outs

    monkeypatch.setattr(runtime, "run_pte", nan_delegate)
    r = espnn("compile", "cli_models:mlp", "-o", tmp_path / "m.pte")
    assert r.code == 1, r
    assert "HOST VERIFICATION FAILED" in r.out and "NaN/inf element(s) not in the reference" in r.out
