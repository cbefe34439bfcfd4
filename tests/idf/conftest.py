"""Real ESP-IDF builds of the runner app (tools/espnn_dev/idf_project.py). Skipped
with the reason where ESP-IDF is not set up; never part of what CI can
provide (CI has no ESP-IDF)."""

from __future__ import annotations

import sys
from pathlib import Path

# op_corpus / xts3_mutations live in tests/ (as for tests/firmware).
TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
