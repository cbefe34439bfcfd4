"""The op registry: the single source of truth for what ESP-NN takes.

Each op family module in ``lowering/ops/`` registers, per ATen op name:

* ``analyze(node, cc)`` - raises ``Unsupported(reason)`` unless the node, with
  its real constants and shapes, can be lowered; the partitioner calls it
  through ``OpLowering.check`` (reason or None);
* ``lower(node, ctx)`` - writes the node's XTS3 ops; it calls ``analyze``
  again first, so it lowers exactly what the check accepted.

Flags: ``compute`` (real work: a partition without a compute op is not worth
delegating), ``fuses_activation`` (the op's XTS3 form has act_min/act_max, so
relu/relu6/hardtanh/clamp after it are absorbed), ``preserve`` (ATen ops the
partitioner keeps from decomposition, e.g. aten.linear).

Several modules may register the same ATen op if all but one give a ``when``
predicate (e.g. a transposed-convolution module registers
aten.convolution.default with ``when=lambda n: n.args[6]``): entries with a
predicate that accepts the node are preferred, in registration order, then
the entry without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch.fx import Node

from .graph import Unsupported, op_name


@dataclass(frozen=True)
class OpLowering:
    ops: tuple[str, ...]
    analyze: Callable
    lower: Callable
    compute: bool = True
    fuses_activation: bool = False
    when: Callable | None = None

    def check(self, node: Node, cc) -> str | None:
        """None if ESP-NN takes `node`, else the reason it does not."""
        try:
            self.analyze(node, cc)
        except Unsupported as e:
            return str(e)
        return None


_REGISTRY: dict[str, list[OpLowering]] = {}
_PRESERVE: list[str] = []


def register(*ops: str, analyze: Callable, lower: Callable, compute: bool = True,
             fuses_activation: bool = False, preserve: bool = False,
             when: Callable[[Node], bool] | None = None) -> OpLowering:
    entry = OpLowering(tuple(ops), analyze, lower, compute, fuses_activation, when)
    for op in ops:
        entries = _REGISTRY.setdefault(op, [])
        if when is None and any(e.when is None for e in entries):
            raise ValueError(f"{op} has two lowerings without a `when` predicate")
        entries.append(entry)
        if preserve and op not in _PRESERVE:
            _PRESERVE.append(op)
    return entry


def _ensure_loaded() -> None:
    # lazy: the op modules import this one to register themselves (a cycle)
    from . import ops  # noqa: F401  (registers every op family)


def lookup(node: Node) -> OpLowering | None:
    _ensure_loaded()
    if node.op != "call_function":
        return None
    entries = _REGISTRY.get(op_name(node), ())
    for e in entries:
        if e.when is not None and e.when(node):
            return e
    return next((e for e in entries if e.when is None), None)


def preserved_ops() -> list[str]:
    """ATen op names to keep from decomposition (ops_to_not_decompose)."""
    _ensure_loaded()
    return list(_PRESERVE)


def check_node(node: Node, cc) -> str | None:
    """Reason ESP-NN does not take `node` (None = it does)."""
    entry = lookup(node)
    if entry is None:
        return f"no ESP-NN lowering for {op_name(node)}"
    return entry.check(node, cc)
