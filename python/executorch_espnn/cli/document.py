"""The report document of ``compile`` and ``report``: one dict, written as
JSON (schema: docs/report-schema.json), printed as tables, rendered as HTML."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import __version__, _native, s3_placement
from ..partition.op_kinds import counts_text, quant_suffix
from ..targets import TARGETS, lookup, planned_memory_excess, planned_memory_over
from .files import write_file
from .modes import pte_mode

SCHEMA_VERSION = 6


def _tool() -> dict:

    return {"name": "espnn", "version": __version__, "kernel_source": _native.KERNEL_SOURCE}


def compile_document(*, model, target, strict, schedule="auto", arena_budget=None, mode=None, pte_path, pte_bytes, report, calibration, qat, verification,
                     accuracy, missing_kernels, warnings, seconds, int8_io=None) -> dict:
    methods = _methods(report, target)
    return {"schema_version": SCHEMA_VERSION, "tool": _tool(), "command": "compile", "model": model,
            "target": target, "strict": strict, "schedule": schedule, "arena_budget": arena_budget,
            "mode": mode or {"requested": None, "used": "delegate", "reason": None}, "int8_io": int8_io,
            "pte": {"path": str(pte_path), "bytes": pte_bytes}, "internal_ram": _internal_ram(target),
            "methods": methods, "s3_placement": s3_placement.section(methods, target),
            "calibration": calibration, "qat": qat,
            "verification": verification, "accuracy": accuracy, "host_missing_kernels": missing_kernels,
            "warnings": warnings, "seconds": round(seconds, 2)}


def report_target(report) -> str | None:
    """The target all ESP-NN payloads of a .pte record (None if none or mixed)."""
    targets = {p.payload.target for m in report.methods.values() for p in m.partitions if p.payload}
    return targets.pop() if len(targets) == 1 else None


def report_document(*, pte_path, pte_bytes, report, missing_kernels, warnings) -> dict:

    target = report_target(report)
    methods = _methods(report, target)
    return {"schema_version": SCHEMA_VERSION, "tool": _tool(), "command": "report", "model": None,
            "target": target, "strict": None, "schedule": None,
            "arena_budget": None, "mode": {"requested": None, "used": pte_mode(report), "reason": None},
            "int8_io": None, "pte": {"path": str(pte_path), "bytes": pte_bytes},
            "internal_ram": _internal_ram(target), "methods": methods,
            "s3_placement": s3_placement.section(methods, target), "calibration": None,
            "qat": None, "verification": None, "accuracy": None, "host_missing_kernels": missing_kernels,
            "warnings": warnings, "seconds": None}


def _internal_ram(target: str | None) -> dict | None:
    """The target's internal data RAM that planned memory is checked against (targets.py)."""
    t = TARGETS.get(target)
    return None if t is None else {"chip": t.chip, "bytes": t.internal_data_ram_bytes, "source": t.ram_source}


def _methods(report, target: str | None) -> dict:

    methods = report.to_dict()
    for m in methods.values():
        m["planned_memory_over_internal_ram"] = planned_memory_over(m["planned_memory_bytes"], target)
    return methods


def memory_warnings(report, target: str | None) -> list[str]:
    """One warning per method whose ExecuTorch planned memory is more than the
    target's internal data RAM (targets.py)."""

    return [f"method {name}: {text}" for name, m in report.methods.items()
            if (text := planned_memory_excess(m.planned_memory_bytes, target))]


def write_outputs(doc: dict, json_path: Path | None, html_path: Path | None) -> None:

    if json_path is not None:
        write_file(json_path, json.dumps(doc, indent=1) + "\n", "--json")
    if html_path is not None:
        # lazy: html imports this module (a cycle)
        from .html import render_html

        write_file(html_path, render_html(doc), "--html")


def _bytes(n) -> str:
    return "-" if n is None else f"{n:,}"


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Columns whose cells are all figures are right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    numeric = [all(r[i][:1].isdigit() or r[i] in ("", "-") for r in rows[1:])
               and any(r[i][:1].isdigit() for r in rows[1:]) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.rjust(w) if num else c.ljust(w)
                               for c, w, num in zip(r, widths, numeric)).rstrip() for r in rows]


def ops_line(m: dict) -> str:
    """Delegated ops by count, quantize/dequantize summed at the end."""
    ops = ", ".join(f"{op} x{n}" for op, n in m["delegated_ops"].items()) or "none"
    return ops + quant_suffix(m["num_delegated_quant_ops"])


def planned_memory_text(m: dict, internal_ram: dict | None) -> str:
    text = f"ExecuTorch planned memory {_bytes(m['planned_memory_bytes'])} B"
    if m.get("planned_memory_over_internal_ram"):
        text += f" (MORE THAN the {internal_ram['chip']}'s {internal_ram['bytes']:,} B of internal data RAM)"
    return text


def is_s3(payload: dict) -> bool:
    """Whether ESP-NN's ESP32-S3 SIMD analysis applies to a payload's target."""
    t = lookup(payload["target"])
    return t is not None and t.s3_simd


def _simd_cell(s: dict) -> str:
    if not is_s3(s):
        return "-"
    return f"{100 * s['s3_simd_macs'] / s['macs']:.0f}%" if s["macs"] else "-"


CPU_GROUPS_LISTED = 20  # the text summary shows this many (op, reason) groups; the JSON lists every op


def method_lines(name: str, m: dict, internal_ram: dict | None = None, verbose: bool = False) -> list[str]:
    parts = m["partitions"]
    lines = [f"method {name}: {len(parts)} partition(s), "
             f"{counts_text(m['num_delegated_ops'], m['num_delegated_quant_ops'], 'delegated op')}, "
             f"{counts_text(m['num_cpu_ops'], m['num_cpu_quant_ops'], 'CPU op')}; "
             + planned_memory_text(m, internal_ram)]
    if parts:
        payloads = [p["payload"] for p in parts if p["payload"]]
        simd = any(is_s3(s) for s in payloads)  # the S3 SIMD column only where it applies
        rows = [["part", "backend", "in/out", "ops", "payload B", "arena B", "arena bound B", "layer bound B",
                 "scratch B", "MACs"] + (["S3 SIMD"] if simd else []) + ["target"]]
        for p in parts:
            s = p["payload"]
            ops = str(p["num_delegated_ops"])  # the headline's delegated ops, per partition
            if s is None:
                rows.append([str(p["index"]), p["backend"], f"{p['num_inputs']}/{p['num_outputs']}", ops,
                             _bytes(p["payload_bytes"])] + ["-"] * (len(rows[0]) - 5))
                continue
            rows.append([str(p["index"]), p["backend"], f"{p['num_inputs']}/{p['num_outputs']}", ops,
                         _bytes(p["payload_bytes"]), _bytes(s["arena_bytes"]), _bytes(s["arena_lower_bound"]),
                         _bytes(s["arena_layer_bound"]), _bytes(s["scratch_bytes"]), _bytes(s["macs"])]
                        + ([_simd_cell(s)] if simd else []) + [s["target"] or "default"])
        t = m["totals"]
        rows.append(["all", "", "", "", _bytes(t["payload_bytes"]), _bytes(t["arena_bytes"]), "", "",
                     _bytes(t["max_scratch_bytes"]), _bytes(t["macs"])] + [""] * (len(rows[0]) - 10))
        lines += _table(rows)
        lines += schedule_lines(parts)
        lines.append("  delegated ops: " + ops_line(m))
        lines += kernel_lines(payloads)
        lines += off_simd_lines(parts)
    lines += cpu_lines(m, verbose)
    return lines


def kernel_lines(payloads: list[dict]) -> list[str]:
    """What ESP-NN runs on a target without the S3's SIMD paths (the SIMD
    column and the off-SIMD list are the S3's)."""

    chips = {lookup(s["target"]) for s in payloads} - {None}
    return [f"  on the {t.chip}: {t.kernels}" for t in sorted(chips, key=lambda t: t.name) if not t.s3_simd]


def cpu_lines(m: dict, verbose: bool) -> list[str]:
    """The CPU ops grouped by op and reason, with counts; every node only with
    `verbose` (the JSON report always lists them)."""
    groups = m["cpu_op_groups"]
    if not groups:
        return ["  ops on the CPU: none"]
    named = any("<node>" in (g["reason"] or "") for g in groups)
    lines = [f"  ops on the CPU: {counts_text(m['num_cpu_ops'], m['num_cpu_quant_ops'], 'op')} in "
             f"{len(groups)} group(s) by op and reason" + (" (<node>: a node name)" if named else "") + ":"]
    shown = groups if verbose else groups[:CPU_GROUPS_LISTED]
    lines += _table([["count", "op", "reason", "first node"]] +
                    [[str(g["count"]), g["op"], g["reason"] or "-", g["first_node"]] for g in shown], "    ")
    if len(groups) > len(shown):
        lines.append(f"    ... {len(groups) - len(shown)} more group(s) (--verbose or the JSON report lists them)")
    if verbose:
        lines.append("  every op on the CPU:")
        lines += _table([["node", "op", "reason"]] + [[c["node"], c["op"], c["reason"] or "-"] for c in m["cpu_ops"]],
                        "    ")
    elif len(m["cpu_ops"]) > len(shown):
        lines.append("    (--verbose lists every node; the JSON report has them all)")
    return lines


def schedule_lines(parts: list[dict]) -> list[str]:
    """One line per partition: layer by layer, or its fused regions (band
    execution; the arena column is then below the layer bound)."""
    payloads = [(p["index"], p["payload"]) for p in parts if p["payload"]]
    if all(not s["fused_regions"] for _, s in payloads):
        return ["  schedule: layer-by-layer" + (" (every partition)" if len(payloads) > 1 else "")]
    return [f"  schedule of partition {i}: {s['schedule']}; arena {s['arena_bytes']:,} B "
            f"(layer-by-layer bound {s['arena_layer_bound']:,} B)"
            for i, s in payloads]


OFF_SIMD_LISTED = 10  # the text summary names this many ops; the HTML and JSON list all


def off_simd(op: dict) -> bool:
    """An op_metrics entry whose MACs (all or some) miss ESP-NN's ESP32-S3
    SIMD routines (analysis.s3_dispatch)."""
    return bool(op["macs"]) and op["s3_simd_macs"] < op["macs"]


def off_simd_ops(parts: list[dict]) -> list[tuple[int, dict]]:
    """(partition, op) pairs off the SIMD path, largest loss first: the
    layers that make a model slow on the S3, with the routine they reach
    (ESP32-S3 partitions only)."""
    rows = [(p["index"], op) for p in parts if p["payload"] and is_s3(p["payload"])
            for op in p["payload"]["op_metrics"] if off_simd(op)]
    return sorted(rows, key=lambda r: r[1]["s3_simd_macs"] - r[1]["macs"])


def off_simd_lines(parts: list[dict]) -> list[str]:
    rows = off_simd_ops(parts)
    if not rows:
        return []
    total = sum(p["payload"]["macs"] for p in parts if p["payload"])
    lost = sum(op["macs"] - op["s3_simd_macs"] for _, op in rows)
    lines = [f"  off the ESP32-S3 SIMD path: {len(rows)} op(s), {100 * lost / total:.0f}% of MACs "
             f"(ESP-NN routine and the rule that picks it):"]
    table = [["part", "op#", "op", "MACs", "SIMD share", "routine", "why"]]
    table += [[str(part), str(op["index"]), op["opcode"], _bytes(op["macs"]),
               f"{100 * op['s3_simd_macs'] / op['macs']:.0f}%", op["kernel"], op["reason"]]
              for part, op in rows[:OFF_SIMD_LISTED]]
    lines += _table(table, "    ")
    if len(rows) > OFF_SIMD_LISTED:
        lines.append(f"    ... {len(rows) - OFF_SIMD_LISTED} more (the JSON and HTML reports list every op)")
    return lines


def _deviation(outputs: list[dict]) -> str:
    def one(o: dict) -> str:
        text = (f"output {o['index']}: max {o['max_lsb']:.2f} LSB, {100 * o['differing_fraction']:.1f}% of elements "
                f"differ" if o["lsb"] else f"output {o['index']}: max abs diff {o['max_abs_diff']:.3g}")
        if o.get("nonfinite_mismatches"):
            text += (f", {o['nonfinite_mismatches']} NaN/inf element(s) not in the reference (first at "
                     f"{o['first_nonfinite_mismatch']})")
        return text

    return "; ".join(one(o) for o in outputs)


def verification_line(v: dict) -> str:
    dev, model = v["device_runtime"], v["quantized_model"]
    if dev is not None:
        head = (f"{'host-verified' if v['passed'] else 'HOST VERIFICATION FAILED'}: {v['ran']} on {v['samples']} "
                f"input(s) vs {dev['reference']}: {_deviation(dev['outputs'])} (tolerance "
                f"{dev['tolerance_lsb']:g} LSB)")
    else:
        head = (f"{'host-run' if v['passed'] else 'HOST VERIFICATION FAILED'} (the .pte could not run on this "
                f"host's ExecuTorch runtime): {v['ran']} on {v['samples']} input(s)")
    gate = (f", tolerance {model['tolerance_lsb']:g} LSB" if model["tolerance_lsb"] is not None else "")
    # top-1 only where the output is a classifier's logits (cli/compile_steps.py: classifier_shaped).
    top1 = (f", top-1 agrees {100 * model['top1_agreement']:.0f}%" if model["top1_agreement"] is not None else "")
    return f"{head}; vs the {model['reference']}: {_deviation(model['outputs'])}{top1}{gate}"


def summary_lines(doc: dict, verbose: bool = False) -> list[str]:
    mode = doc["mode"]
    # auto's reason is a sentence: the JSON report has it, the summary says where it came from
    lines = [f"mode: {mode['used']}" + (f" (--mode {mode['requested']})" if mode["requested"] == "auto" else "")]
    for name, m in doc["methods"].items():
        lines += method_lines(name, m, doc.get("internal_ram"), verbose)
    lines += s3_placement.lines(doc.get("s3_placement"))
    lines.append(f"program: {doc['pte']['path']} ({doc['pte']['bytes']:,} bytes)")
    if doc["host_missing_kernels"]:
        lines.append("host runtime lacks CPU kernel(s): " + ", ".join(doc["host_missing_kernels"]))
    v = doc["verification"]
    if v is not None:
        lines.append(verification_line(v))
    a = doc["accuracy"]
    if a is not None:
        lsb = f"{a['max_lsb_error']:.2f} LSB" if a["max_lsb_error"] is not None else f"{a['max_abs_error']:.3g}"
        lines.append(f"accuracy on {a['samples']} labelled samples ({a['data']}): top-1 float "
                     f"{100 * a['float_top1']:.1f}% | quantized PyTorch {100 * a['quantized_top1']:.1f}% | "
                     f"delegate on host {100 * a['delegate_top1']:.1f}% "
                     f"({a['delegate_vs_quantized_pp']:+.1f} pp); max error vs quantized {lsb}")
    return lines


def print_summary(doc: dict, *, json_path=None, html_path=None, stream=None, verbose: bool = False) -> None:
    stream = stream or sys.stdout
    for line in summary_lines(doc, verbose):
        print(line, file=stream)
    written = [str(p) for p in (json_path, html_path) if p is not None]
    if written:
        print("report: " + ", ".join(written), file=stream)
