"""The fast-path tests lower models with the AOT tests' harness (tests/aot)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "aot"))
