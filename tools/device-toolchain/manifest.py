#!/usr/bin/env python3
"""Writes PREFIX/manifest.json for tools/device-toolchain/build.sh: what was
built from what. Sources with their pins and the paths they were read from,
the patches applied (sha256), files the source repositories lacked, the
wall time of every stage, the versions the built tools report, and the
sha256 of every executable in the prefix. docs/device-evidence.json copies
this manifest, so a figure there names the exact tool chain it came from."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import time
from pathlib import Path


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def first_line(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (r.stdout or r.stderr).strip().splitlines()
    return out[0] if out else None


def executables(prefix: Path) -> dict[str, str]:
    """sha256 of every regular executable file under the tool directories."""
    out = {}
    for top in sorted(prefix.glob("xtensa-*-elf")) + [prefix / "qemu"]:
        for path in sorted(top.rglob("*")):
            if path.is_file() and not path.is_symlink() and os.access(path, os.X_OK) and path.suffix not in (".la",):
                out[str(path.relative_to(prefix))] = sha256(path)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--prefix", required=True, type=Path)
    p.add_argument("--sources-txt", required=True, type=Path)
    p.add_argument("--patches", required=True, type=Path)
    p.add_argument("--chips", required=True)
    p.add_argument("--source", action="append", default=[], help="NAME=PATH as build.sh read it")
    a = p.parse_args()
    prefix = a.prefix.resolve()
    paths = dict(s.split("=", 1) for s in a.source)
    sources = []
    for line in a.sources_txt.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, kind, pin, upstream = line.split(None, 3)
        sources.append({"name": name, "kind": kind, "pin": pin, "upstream": upstream, "read_from": paths.get(name)})
    missing = []
    mf = prefix / "missing-files.txt"
    if mf.is_file():
        for line in sorted(set(mf.read_text().splitlines())):
            name, path = line.split(" ", 1)
            missing.append({"source": name, "path": path})
    times = {}
    tf = prefix / ".stamps/times"
    if tf.is_file():
        for line in tf.read_text().splitlines():
            stage, seconds = line.split()
            times[stage] = int(seconds)
    tools = {}
    for chip in a.chips.split():
        gcc = prefix / f"xtensa-{chip}-elf/bin/xtensa-{chip}-elf-gcc"
        if gcc.exists():
            tools[f"xtensa-{chip}-elf-gcc"] = first_line([str(gcc), "--version"])
            tools[f"xtensa-{chip}-elf-as"] = first_line([str(prefix / f"xtensa-{chip}-elf/bin/xtensa-{chip}-elf-as"),
                                                         "--version"])
    qemu = prefix / "qemu/bin/qemu-system-xtensa"
    if qemu.exists():
        tools["qemu-system-xtensa"] = first_line([str(qemu), "--version"])
    constraints = sorted((prefix / "idf-tools").glob("espidf.constraints.*.txt"))
    manifest = {
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "built_on": {"machine": platform.machine(), "system": platform.platform(), "cpus": os.cpu_count()},
        "build_script_sha256": sha256(Path(__file__).resolve().parent / "build.sh"),
        "chips": a.chips.split(),
        "sources": sources,
        "patches": {f.name: sha256(f) for f in sorted(a.patches.glob("*.patch"))},
        "files_missing_from_sources": missing,
        "stage_seconds": times,
        "total_seconds": sum(times.values()),
        "tool_versions": tools,
        "idf_python_packages": constraints[0].read_text().split() if constraints else [],
        "executables_sha256": executables(prefix),
    }
    (prefix / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
