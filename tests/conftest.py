"""Shared pytest fixtures for the host tests. Helpers: tests/support/ (the
tests' own) and tools/espnn_dev/ (shared with benchmarks, fuzz and tools, e.g.
graph_util.py's one-op graphs); pyproject puts both on the path."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def espnn_vectors_dir() -> Path:
    """The golden ESP-NN vectors: $ESPNN_VECTORS_DIR or tests/data/espnn-vectors."""
    env = os.environ.get("ESPNN_VECTORS_DIR")
    return Path(env) if env else REPO / "tests" / "data" / "espnn-vectors"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    d = espnn_vectors_dir()
    if not (d / "conv_s8.npz").exists():
        pytest.fail(f"ESP-NN golden vectors not found at {d} (they ship in tests/data/espnn-vectors; "
                    "check ESPNN_VECTORS_DIR)")
    return d


# The one PyTorch quantized engine the oracles use. PyTorch's x86 default (`x86`,
# which dispatches to fbgemm) is not exact on every CPU: its AVX2 path multiplies
# u8 x s8 pairs into saturating 16-bit sums (vpmaddubsw), so on a CPU without
# AVX-512 VNNI a conv or linear oracle is off by tens of LSB. QNNPACK subtracts the
# zero points, widens to 16 bits and sums pairs in 32 bits (SSE2 on x86-64, NEON on
# Arm; no run-time ISA dispatch), then requantizes with one IEEE float32 multiply
# and round-to-nearest-even: the same integers on every x86-64 and aarch64 host.
EXACT_QUANTIZED_ENGINE = "qnnpack"


@pytest.fixture
def exact_quantized_engine():
    """Pins PyTorch's quantized engine to one that is exact on every host, and
    restores the previous engine afterwards (engines are process-global and their
    prepacked weights are engine-specific, so a leak would change later tests).
    Every test whose expected values come from PyTorch's quantized CPU ops takes
    this fixture; none relies on the engine's default."""
    torch = pytest.importorskip("torch")
    engines = torch.backends.quantized.supported_engines
    if EXACT_QUANTIZED_ENGINE not in engines:
        pytest.fail(f"this torch build lacks the {EXACT_QUANTIZED_ENGINE} engine (has {engines}); "
                    "the quantized oracles need it")
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = EXACT_QUANTIZED_ENGINE
    try:
        yield EXACT_QUANTIZED_ENGINE
    finally:
        torch.backends.quantized.engine = previous
