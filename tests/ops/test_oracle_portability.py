"""The kernel tests' PyTorch oracles give the same integers on every host CPU.

CI, developers and users run on x86-64 CPUs with or without AVX-512 (VNNI) and on
aarch64. PyTorch's default x86 quantized engine is exact only on some of them (its
AVX2 path saturates 16-bit pair sums), so every oracle pins the engine through the
`exact_quantized_engine` fixture (tests/conftest.py). These tests keep it that way:

* statically: no test sets the engine itself, and every test that calls PyTorch's
  quantized CPU ops takes the fixture;
* dynamically: the PyTorch-oracle tests are run again in a subprocess with the host's
  SIMD paths forced down (fbgemm's AVX2 code, ATen's scalar or AVX2 kernels) and must
  still pass; and the forced environment is shown to really break the unpinned oracle,
  so the check can fail.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

# Calls whose results depend on torch.backends.quantized.engine.
ENGINE_DEPENDENT = ("torch.ops.quantized.", "ao.nn.quantized", "qF.", "nnq.")
FIXTURE = "exact_quantized_engine"

# fbgemm reads FBGEMM_ENABLE_INSTRUCTIONS, ATen reads ATEN_CPU_CAPABILITY: together they make
# an AVX-512 host take the code paths of an AVX2-only one (and "default": ATen's scalar code).
AVX2_ONLY = {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
SCALAR_ATEN = {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "default"}


def _test_files():
    return sorted(p for p in TESTS.rglob("test_*.py"))


def _functions(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_test_sets_the_quantized_engine_itself():
    offenders = []
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if ast.unparse(t).endswith("backends.quantized.engine"):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, f"set the engine through the {FIXTURE} fixture instead: {offenders}"


def test_every_quantized_op_oracle_pins_the_engine():
    unpinned = []
    for path in _test_files():
        source = path.read_text()
        for fn in _functions(ast.parse(source, str(path))):
            if not fn.name.startswith("test_"):
                continue
            body = ast.get_source_segment(source, fn) or ""
            args = {a.arg for a in fn.args.args}
            if any(tok in body for tok in ENGINE_DEPENDENT) and FIXTURE not in args:
                unpinned.append(f"{path.relative_to(REPO)}::{fn.name}")
    assert not unpinned, f"these tests call PyTorch's quantized ops without the {FIXTURE} fixture: {unpinned}"


def _fbgemm_available():
    torch = pytest.importorskip("torch")
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        pytest.skip("no fbgemm engine in this torch build (not x86-64): nothing to force")


@pytest.mark.parametrize("env", [AVX2_ONLY, SCALAR_ATEN], ids=["avx2-only", "scalar-aten"])
def test_pytorch_oracle_tests_pass_with_lower_simd_paths(env):
    _fbgemm_available()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "pytorch",
         "--ignore", __file__, str(TESTS / "ops")],  # not this file: it would recurse
        cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    tail = "\n".join(result.stdout.splitlines()[-15:])
    assert result.returncode == 0, f"with {env}:\n{tail}\n{result.stderr[-2000:]}"
    assert " passed" in tail and "failed" not in tail, tail


_PROBE = """
import sys, numpy as np, torch
import torch.ao.nn.quantized.functional as qF
torch.backends.quantized.engine = sys.argv[1]
g = torch.Generator().manual_seed(1234)
x = torch.randn(1, 6, 9, 8, generator=g) * 1.5 + 0.3
w = torch.randn(8, 6, 3, 3, generator=g) * 0.2
s_in = float((x.max() - x.min()) / 255)
xq = torch.quantize_per_tensor(x, s_in, int(round(-x.min().item() / s_in)), torch.quint8)
wq = torch.quantize_per_channel(w, (w.abs().amax(dim=(1, 2, 3)) / 127).double(),
                                torch.zeros(8, dtype=torch.long), 0, torch.qint8)
y = qF.conv2d(xq, wq, None, stride=(2, 1), padding=(1, 1), scale=0.05, zero_point=128)
np.save(sys.argv[2], y.int_repr().numpy())
"""


def _probe(engine, env, out):
    subprocess.run([sys.executable, "-W", "ignore", "-c", _PROBE, engine, str(out)],
                   env={**os.environ, **env}, check=True, capture_output=True, timeout=300)
    return np.load(out).astype(np.int16)


def test_forced_avx2_paths_break_the_fbgemm_oracle_but_not_the_pinned_one(tmp_path, exact_quantized_engine):
    # Proves the check above can fail: in the AVX2-only environment fbgemm's conv is far off,
    # while the pinned engine gives the same integers as with the host's full ISA.
    _fbgemm_available()
    import torch

    pinned_native = _probe(exact_quantized_engine, {}, tmp_path / "a.npy")
    pinned_avx2 = _probe(exact_quantized_engine, AVX2_ONLY, tmp_path / "b.npy")
    pinned_scalar = _probe(exact_quantized_engine, SCALAR_ATEN, tmp_path / "c.npy")
    np.testing.assert_array_equal(pinned_avx2, pinned_native)
    np.testing.assert_array_equal(pinned_scalar, pinned_native)
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("host without AVX2: fbgemm's AVX2 path cannot be forced here")
    fbgemm_avx2 = _probe("fbgemm", AVX2_ONLY, tmp_path / "d.npy")
    assert np.abs(fbgemm_avx2 - pinned_native).max() > 1, "fbgemm's AVX2 path no longer saturates"
