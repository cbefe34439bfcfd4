"""Writes checked-in seed corpora (for make_corpus.py and make_glue_corpus.py)."""

from __future__ import annotations

import shutil
from pathlib import Path


def replace_corpora(root: Path, corpora: dict[str, dict[str, bytes]]) -> None:
    """root/<target>/ holds exactly the given files afterwards (name -> bytes)."""
    for target, files in corpora.items():
        d = root / target
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for name, data in sorted(files.items()):
            (d / name).write_bytes(data)
        print(f"{d}: {len(files)} files, {sum(map(len, files.values()))} bytes")
