"""Arena liveness of an XTS3 graph, defined exactly as the parser's arena-plan
check (components/espnn_runtime/src/parser.cpp, CheckArenaPlan) defines it:

* while op i runs, the tensors live are op i's arena inputs, op i's outputs,
  and every tensor live after op i: read by a later op, or a graph output
  (graph outputs are live to the end once written);
* before op 0 the graph inputs are live together.

Two live tensors may share bytes only where the parser allows an alias: a
RESHAPE output over its input (a view, opcode aliasing "VIEW"), and the
output of an op whose aliasing is "IN_PLACE" over an input of the same
byte size that dies at that op. The lower bound counts each such alias
class once, so it is the least arena any plan the parser accepts can have
for this execution order: max over steps of the sum of the 16-byte-aligned
sizes of the classes live at that step.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _native
from .summary import aligned, parse


@dataclass(frozen=True)
class ArenaStep:
    """One op step of the arena timeline."""

    index: int  # op index (execution order)
    op: str
    live_bytes: int  # aligned bytes of the alias classes live at this step
    plan_bytes: int  # highest arena byte the stored plan uses at this step
    live_tensors: tuple[int, ...]


def _aliasing(opname: str) -> str:
    """NONE, VIEW or IN_PLACE (xts3_format.h's ESPNN_XTS3_ALIASING)."""
    return _native.OPCODES[opname]["aliasing"]


class _Liveness:
    def __init__(self, summary: dict):
        self.s = summary
        self.tensors = summary["tensors"]
        self.ops = summary["ops"]
        self.arena = {t["index"] for t in self.tensors if t["memory"] == "ARENA"}
        # live_at[i]: tensors live while op i runs (parser's definition).
        live = set(summary["outputs"])
        self.live_at: list[set[int]] = [set()] * len(self.ops)
        self.live_after: list[set[int]] = [set()] * len(self.ops)
        for i in range(len(self.ops) - 1, -1, -1):
            op = self.ops[i]
            ins = {t for t in op["inputs"] if t is not None and t in self.arena}
            self.live_after[i] = set(live)
            self.live_at[i] = live | ins | set(op["outputs"])
            live = (live - set(op["outputs"])) | ins
        self._classes()

    def _classes(self) -> None:
        parent = {t: t for t in self.arena}

        def find(t: int) -> int:
            while parent[t] != t:
                parent[t] = parent[parent[t]]
                t = parent[t]
            return t

        for i, op in enumerate(self.ops):
            mode = _aliasing(op["op"])
            if mode == "NONE":
                continue
            out = op["outputs"][0]
            for t in op["inputs"]:
                if t is None or t not in self.arena:
                    continue
                if self.tensors[t]["nbytes"] != self.tensors[out]["nbytes"]:
                    continue
                if mode == "IN_PLACE" and t in self.live_after[i]:
                    continue
                parent[find(out)] = find(t)
                break
        self.root = {t: find(t) for t in self.arena}
        self.size: dict[int, int] = {}
        for t, r in self.root.items():
            self.size[r] = max(self.size.get(r, 0), aligned(self.tensors[t]["nbytes"]))

    def class_bytes(self, tensors) -> int:
        return sum(self.size[r] for r in {self.root[t] for t in tensors})

    def inputs_bytes(self) -> int:
        return self.class_bytes(self.s["inputs"])


def arena_lower_bound(blob_or_summary) -> int:
    """Least arena (bytes) any accepted plan can have for the blob's op order."""
    lv = _Liveness(parse(blob_or_summary))
    steps = [lv.class_bytes(live) for live in lv.live_at]
    return max([lv.inputs_bytes(), *steps])


def arena_timeline(blob_or_summary) -> list[ArenaStep]:
    """Bytes live at each op step (the lower bound's count) and the bytes the
    stored plan spans then (the end of the highest live tensor)."""
    s = parse(blob_or_summary)
    lv = _Liveness(s)
    out = []
    for i, live in enumerate(lv.live_at):
        plan = max((lv.tensors[t]["offset"] + aligned(lv.tensors[t]["nbytes"]) for t in live), default=0)
        out.append(ArenaStep(i, s["ops"][i]["op"], lv.class_bytes(live), plan, tuple(sorted(live))))
    return out
