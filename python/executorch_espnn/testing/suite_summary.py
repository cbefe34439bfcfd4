"""Summarize ``--espnn-suite-json`` records of one or more (partial) runs.

    python -m executorch_espnn.testing.suite_summary records*.jsonl

Records are de-duplicated by (test id, subtest), so runs that split the
suite's modules between processes, or overlap, can be merged. Prints the
pytest outcome per test case, the suite's result category per lowered model,
the ops left on the CPU in undelegated passes, and the most frequent errors.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter


def load(paths) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    seen[(r["test"], r["subtest"])] = r
    return list(seen.values())


def summarize(records: list[dict]) -> str:
    tests = {}
    for r in records:
        tests[r["test"]] = r["pytest"]
    lines = [f"{len(tests)} test cases: " + ", ".join(f"{n} {o}" for o, n in Counter(tests.values()).most_common())]
    lines.append(f"{len(records)} lowered models:")
    lines += [f"{n:6d}  {res}" for res, n in Counter(r["result"] for r in records).most_common()]
    cpu = Counter()
    for r in records:
        if r["result"] == "Success (Undelegated)":
            cpu.update(k for k in r["undelegated_ops"] if "quantize" not in k)
    if cpu:
        lines.append("ops on the CPU in undelegated passes (models containing each):")
        lines += [f"{n:6d}  {op}" for op, n in cpu.most_common(15)]
    errors = Counter()
    for r in records:
        if r["error"] and r["result"].startswith("Fail"):
            errors[f"{r['result']}: {re.sub(r'[0-9]+', 'N', r['error'])[:160]}"] += 1
    if errors:
        lines.append("most frequent failures (digits as N):")
        lines += [f"{n:6d}  {e}" for e, n in errors.most_common(12)]
    return "\n".join(lines)


def main(argv=None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print(summarize(load(paths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
