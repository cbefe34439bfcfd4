"""Loads a repository script (scripts/*.py) as a module, so a test can call
its functions; the script's directory goes on sys.path first, as when it is
run, for the helper modules it imports from beside it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def load_script(path: Path):
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
