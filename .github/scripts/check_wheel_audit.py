#!/usr/bin/env python3
"""Checks `auditwheel show --json` of a repaired Linux wheel (run by
scripts/wheel-check.sh, which .ci/run runs; tests/test_packaging.py tests it):

- the only external shared library is libexecutorch.so, and auditwheel
  resolved it inside the executorch wheel (<executorch>/lib/), the library
  the delegate loads at run time through its RUNPATH
  $ORIGIN/../executorch/lib; it is deliberately not grafted into our wheel
  (`auditwheel repair --exclude libexecutorch.so`, see pyproject.toml);
- nothing else stands between the wheel and its manylinux tag: the
  versioned symbols allow the wheel's platform tag (sym_tag), and for no
  policy does auditwheel ask to eliminate any library but libexecutorch.so.

Standard library only. Exit status 0 when it holds, 1 with one line per
problem otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ALLOWED = "libexecutorch.so"


def problems(report: dict, executorch_dir: Path | None) -> list[str]:
    found = []
    wheel = report.get("wheel", "")
    platform_tag = wheel.removesuffix(".whl").split("-")[-1] if wheel else ""
    external = report.get("external_libs", {})
    others = sorted(set(external) - {ALLOWED})
    if others:
        found.append(f"external libraries besides {ALLOWED}: {', '.join(others)}")
    if ALLOWED not in external:
        found.append(f"{ALLOWED} is not an external library of {wheel} (bundled, or the delegate is missing)")
    else:
        path = external[ALLOWED]
        if path is None:
            found.append(f"auditwheel did not find {ALLOWED}; point LD_LIBRARY_PATH at <executorch>/lib")
        else:
            parent = Path(path).resolve().parent
            want = executorch_dir.resolve() / "lib" if executorch_dir else None
            if (want is not None and parent != want) or (want is None and parent.parts[-2:] != ("executorch", "lib")):
                found.append(f"{ALLOWED} resolved to {path}, not to the executorch wheel's lib/ "
                             f"({want or '.../executorch/lib'})")
    if report.get("sym_tag") != platform_tag:
        found.append(f"versioned symbols allow {report.get('sym_tag')!r}, not the wheel's tag {platform_tag!r}")
    for policy, upgrade in sorted(report.get("policy_upgrades", {}).items()):
        extra = sorted(set(upgrade.get("libs_to_eliminate", [])) - {ALLOWED})
        if extra:
            found.append(f"{policy}: auditwheel would need to bundle {', '.join(extra)}")
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="output of `auditwheel show --json WHEEL`")
    ap.add_argument("--executorch", type=Path, help="package directory of the executorch wheel")
    args = ap.parse_args(argv)
    report = json.loads(args.report.read_text())
    found = problems(report, args.executorch)
    for p in found:
        print(f"wheel audit: {p}", file=sys.stderr)
    if not found:
        print(f"wheel audit: {report['wheel']}: {report['sym_tag']}; external: "
              f"{ALLOWED} from {report['external_libs'][ALLOWED]} (the executorch wheel; not bundled)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
