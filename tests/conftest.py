"""Shared pytest fixtures for the host tests (tests/graph_util.py has the graph helpers)."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def espnn_vectors_dir() -> Path:
    """The golden ESP-NN vectors: $ESPNN_VECTORS_DIR or ../shared/data/espnn-vectors."""
    env = os.environ.get("ESPNN_VECTORS_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data" / "espnn-vectors"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    d = espnn_vectors_dir()
    if not (d / "conv_s8.npz").exists():
        pytest.skip(f"ESP-NN golden vectors not found at {d} (set ESPNN_VECTORS_DIR)")
    return d
