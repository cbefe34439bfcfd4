"""What the reports and ``--strict`` count as an op: one definition for
``espnn compile`` (the lowered Edge program), ``espnn report`` (a serialized
``.pte``), the partitioner's strict refusal and the JSON report.

* **Delegated ops** are the op records the ESP-NN delegates run: the XTS3 ops
  of each payload, which both the Edge program and the ``.pte`` hold. A fused
  region's BAND_LOOP record is a header, not an op (the ops it runs are
  counted).
* **CPU ops** are the kernel calls ExecuTorch makes outside the delegates.
  In an Edge program that is every call_function node outside them except
  ``operator.getitem`` (it picks one output of a multi-output op) and a
  ``view_copy`` that ExecuTorch turns into a view of the same memory
  (``ReplaceViewCopyWithViewPass``: every one not feeding the graph output),
  so both programs give the same count.
* On both sides quantize, dequantize and requantize are counted apart
  (``QUANTIZE``): they convert between int8 and float (or rescale int8) at
  the boundaries and are not the model's computation.
"""

from __future__ import annotations

from ..lowering.graph import op_name

COMPUTE = "compute"
QUANTIZE = "quantize"

# XTS3 records that convert or rescale at a boundary, and the region header.
_XTS3_QUANTIZE = frozenset({"QUANTIZE", "DEQUANTIZE", "REQUANTIZE"})
_XTS3_NOT_AN_OP = frozenset({"BAND_LOOP"})
_GETITEM = "operator.getitem"
_VIEW_COPY = ("aten.view_copy.default",)


def _is_quantize(name: str) -> bool:
    return name.startswith("quantized_decomposed.")


def xts3_kind(opcode: str) -> str | None:
    """COMPUTE or QUANTIZE for an XTS3 op record; None for a region header."""
    if opcode in _XTS3_NOT_AN_OP:
        return None
    return QUANTIZE if opcode in _XTS3_QUANTIZE else COMPUTE


def quant_suffix(quant: int) -> str:
    return f" (+{quant} quantize/dequantize)" if quant else ""


def counts_text(n: int, quant: int, what: str) -> str:
    """"9 delegated op(s) (+2 quantize/dequantize)": how every report and
    --strict says a count."""
    return f"{n} {what}(s)" + quant_suffix(quant)


def kernel_kind(name: str) -> str:
    """The kind of a .pte KernelCall (``aten.add.out``, ``quantized_decomposed.quantize_per_tensor.out``)."""
    return QUANTIZE if _is_quantize(name) else COMPUTE


def edge_name_kind(name: str) -> str | None:
    """The kind of an Edge op known only by name (a partition's op counts):
    getitem is no op; views are counted (nothing tells whether they alias)."""
    if name == _GETITEM:
        return None
    return QUANTIZE if _is_quantize(name) else COMPUTE


def edge_kind(node) -> str | None:
    """The kind of an Edge call_function node left on the CPU: None when
    ExecuTorch makes no kernel call for it (getitem, a view_copy it turns
    into a view)."""

    name = op_name(node)
    if name in _VIEW_COPY and all(u.op != "output" for u in node.users):
        return None
    return edge_name_kind(name)

