"""One self-contained HTML page from a report document: inline CSS and
inline SVG only (no scripts, no external files), so it can be mailed or
attached to a CI run and opened anywhere."""

from __future__ import annotations

from html import escape

from .document import (counts_text, is_s3, kernel_lines, off_simd, ops_line, planned_memory_text, summary_lines,
                       verification_line)

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
.ok{color:#176f2c;font-weight:600}.bad{color:#b00020;font-weight:600}.muted{color:#666}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto}svg{display:block;margin:.4em 0 1em}
.chart text{font:11px system-ui,sans-serif;fill:#333}tr.off td{background:#fff1e6}
"""

_COLORS = ("#3b6fb6", "#e07b39", "#3a9a5b", "#b8433c", "#7d5bb0", "#8a6d3b")


def _fmt(n) -> str:
    return "-" if n is None else f"{n:,}"


def _table(header: list[str], rows: list[list], numeric: set[int] = frozenset(),
           marked: set[int] = frozenset()) -> str:
    """`marked`: indices of rows to highlight (class=off)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(("<tr class=off>" if k in marked else "<tr>") +
                   "".join(f"<td class=n>{escape(str(c))}</td>" if i in numeric else
                           f"<td>{escape(str(c))}</td>" for i, c in enumerate(r)) + "</tr>"
                   for k, r in enumerate(rows))
    return f"<table><tr>{head}</tr>{body}</table>"


def arena_chart(timeline: list[dict], arena_bytes: int, title: str, width: int = 640, height: int = 160) -> str:
    """Step chart of bytes live (filled) and bytes spanned by the stored plan
    (line) at each op, with the planned arena as a dashed line."""
    if not timeline:
        return ""
    left, bottom, top, right = 60, 28, 18, 10
    w, h = width - left - right, height - top - bottom
    peak = max([arena_bytes, *(s["plan_bytes"] for s in timeline), *(s["live_bytes"] for s in timeline), 1])
    n = len(timeline)

    def x(i):
        return left + w * i / n

    def y(v):
        return top + h * (1 - v / peak)

    def steps(key):
        pts = []
        for i, s in enumerate(timeline):
            pts += [(x(i), y(s[key])), (x(i + 1), y(s[key]))]
        return pts

    live = steps("live_bytes")
    area = " ".join(f"{a:.1f},{b:.1f}" for a, b in [(x(0), y(0)), *live, (x(n), y(0))])
    plan = " ".join(f"{a:.1f},{b:.1f}" for a, b in steps("plan_bytes"))
    hover = "".join(
        f'<rect x="{x(i):.1f}" y="{top}" width="{w / n:.1f}" height="{h}" fill="transparent">'
        f"<title>op {s['index']} {escape(s['op'])}: {s['live_bytes']:,} B live, {s['plan_bytes']:,} B spanned"
        "</title></rect>" for i, s in enumerate(timeline))
    return (f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img"><title>{escape(title)}</title>'
            f'<text x="{left}" y="12">{escape(title)}</text>'
            f'<polygon points="{area}" fill="#3b6fb6" fill-opacity="0.35" stroke="none"/>'
            f'<polyline points="{plan}" fill="none" stroke="#e07b39" stroke-width="1.5"/>'
            f'<line x1="{left}" x2="{left + w}" y1="{y(arena_bytes):.1f}" y2="{y(arena_bytes):.1f}" '
            'stroke="#b8433c" stroke-dasharray="4 3"/>'
            f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + h}" stroke="#999"/>'
            f'<line x1="{left}" x2="{left + w}" y1="{top + h}" y2="{top + h}" stroke="#999"/>'
            f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{peak:,}</text>'
            f'<text x="{left - 4}" y="{top + h}" text-anchor="end">0</text>'
            f'<text x="{left}" y="{height - 8}">op 0</text>'
            f'<text x="{left + w}" y="{height - 8}" text-anchor="end">op {n - 1} (execution order)</text>'
            f"{hover}</svg>")


def bar_chart(labels: list[str], series: list[tuple[str, list[int]]], width: int = 640) -> str:
    """Horizontal bars, one panel per series (each scaled to its own maximum)."""
    if not labels:
        return ""
    row, left, pad = 18, 90, 8
    panel_w = (width - left - pad * len(series)) // len(series)
    height = 22 + row * len(labels)
    out = [f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'role="img"><title>per-partition bars</title>']
    for i, lab in enumerate(labels):
        out.append(f'<text x="{left - 6}" y="{22 + row * i + 12}" text-anchor="end">{escape(lab)}</text>')
    for k, (name, values) in enumerate(series):
        x0 = left + k * (panel_w + pad)
        peak = max(values) or 1
        out.append(f'<text x="{x0}" y="12">{escape(name)}</text>')
        for i, v in enumerate(values):
            bw = max(1.0, (panel_w - 70) * v / peak) if v else 0
            yy = 22 + row * i
            out.append(f'<rect x="{x0}" y="{yy + 2}" width="{bw:.1f}" height="{row - 5}" '
                       f'fill="{_COLORS[k % len(_COLORS)]}"><title>{escape(labels[i])} {escape(name)}: '
                       f'{v:,}</title></rect><text x="{x0 + bw + 4:.1f}" y="{yy + 12}">{v:,}</text>')
    out.append("</svg>")
    return "".join(out)


def _method_html(name: str, m: dict, internal_ram: dict | None) -> str:
    parts = m["partitions"]
    over = " class=bad" if m.get("planned_memory_over_internal_ram") else ""
    out = [f"<h2>method {escape(name)}</h2>",
           f"<p>{len(parts)} partition(s), "
           f"{counts_text(m['num_delegated_ops'], m['num_delegated_quant_ops'], 'delegated op')}, "
           f"{counts_text(m['num_cpu_ops'], m['num_cpu_quant_ops'], 'CPU op')}; "
           f"<span{over}>{escape(planned_memory_text(m, internal_ram))}</span></p>"]
    rows = []
    for p in parts:
        s = p["payload"] or {}
        recompute = f"{s['recompute_percent']:.2f}%" if s else "-"
        rows.append([p["index"], p["backend"], f"{p['num_inputs']}/{p['num_outputs']}", p["num_delegated_ops"],
                     _fmt(p["payload_bytes"]), _fmt(s.get("arena_bytes")), _fmt(s.get("arena_lower_bound")),
                     _fmt(s.get("arena_layer_bound")), recompute, s.get("schedule", "-"),
                     _fmt(s.get("scratch_bytes")), _fmt(s.get("macs")),
                     _fmt(s.get("s3_simd_macs")) if s and is_s3(s) else "-", s.get("target") or "default"])
    if rows:
        out.append(_table(["partition", "backend", "in/out", "delegated ops", "payload B", "arena B",
                           "arena lower bound B", "layer-by-layer bound B", "recomputed MACs", "schedule",
                           "scratch B", "MACs", "S3 SIMD MACs", "target"], rows, {0, 3, 4, 5, 6, 7, 8, 10, 11, 12}))
        out.append("<h3>Delegated ops</h3>" + _table(["op", "count"], [[k, v] for k, v in m["delegated_ops"].items()],
                                                     {1}))
        if m["num_delegated_quant_ops"]:
            out.append(f"<p class=muted>{escape(ops_line(m))}</p>")
        out += [f"<p>{escape(line.strip())}</p>"
                for line in kernel_lines([p["payload"] for p in parts if p["payload"]])]
        labels = [f"partition {p['index']}" for p in parts]
        out.append("<h3>MACs and payload size per partition</h3>")
        out.append(bar_chart(labels, [("MACs", [(p["payload"] or {}).get("macs", 0) for p in parts]),
                                      ("payload bytes", [p["payload_bytes"] for p in parts])]))
        out.append("<h3>Arena occupancy over execution order</h3><p class=muted>filled: bytes live at each op; "
                   "orange: bytes the stored plan spans; dashed: the planned arena.</p>")
        for p in parts:
            s = p["payload"]
            if s:
                out.append(arena_chart(s["arena_timeline"], s["arena_bytes"],
                                       f"partition {p['index']}: arena {s['arena_bytes']:,} B, "
                                       f"lower bound {s['arena_lower_bound']:,} B, layer-by-layer bound "
                                       f"{s['arena_layer_bound']:,} B; {s['schedule']}"))
        s3_parts = [p for p in parts if p["payload"] and is_s3(p["payload"])]  # the S3's routines only
        if s3_parts:
            out.append("<h3>ESP-NN routine per op on the ESP32-S3</h3><p class=muted>which ESP-NN routine each "
                       "delegated op reaches on an optimized esp32s3 build, SIMD (the S3 vector unit) or not, and "
                       "the rule that decides it (ESP-NN 1.2.3's dispatch conditions and this runtime's routing; "
                       "docs/performance.md). Ops off the SIMD path are marked.</p>")
        for p in s3_parts:
            s = p["payload"]
            rows = [[o["index"], o["opcode"], _fmt(o["macs"]),
                     f"{100 * o['s3_simd_macs'] / o['macs']:.0f}%" if o["macs"] else "-",
                     o["kernel"], o["reason"]] for o in s["op_metrics"]]
            off = {i for i, o in enumerate(s["op_metrics"]) if off_simd(o)}
            out.append(f"<details{' open' if off else ''}><summary>partition {p['index']}: {len(rows)} op(s), "
                       f"{len(off)} off the SIMD path</summary>")
            out.append(_table(["op#", "op", "MACs", "SIMD share", "routine", "why"], rows, {0, 2, 3}, marked=off))
            out.append("</details>")
    groups = m["cpu_op_groups"]  # grouped: the JSON report lists every node
    out.append(f"<h3>Ops on the CPU ({escape(counts_text(m['num_cpu_ops'], m['num_cpu_quant_ops'], 'op'))}, "
               f"{len(groups)} group(s) by op and reason)</h3>")
    out.append(_table(["count", "op", "reason", "first node"],
                      [[g["count"], g["op"], g["reason"] or "-", g["first_node"]] for g in groups], {0})
               if groups else "<p>none</p>")
    return "".join(out)


def render_html(doc: dict) -> str:
    title = f"espnn {doc['command']}: {doc.get('model') or doc['pte']['path']}"
    v = doc.get("verification")
    verdict = "" if v is None else (f"<p class={'ok' if v['passed'] else 'bad'}>"
                                    f"{escape(verification_line(v))}</p>")
    body = [f"<h1>{escape(title)}</h1>", verdict,
            f"<p>program {escape(doc['pte']['path'])}: {doc['pte']['bytes']:,} bytes; target "
            f"{escape(str(doc.get('target') or 'default'))}; schedule {escape(str(doc.get('schedule') or '-'))}"
            + (f", arena budget {doc['arena_budget']:,} B" if doc.get("arena_budget") else "") + f"; espnn {escape(doc['tool']['version'])}, kernels: "
            f"{escape(doc['tool']['kernel_source'])}</p>"]
    body += [_method_html(name, m, doc.get("internal_ram")) for name, m in doc["methods"].items()]
    body.append("<h2>Summary</h2><pre>" + escape("\n".join(summary_lines(doc))) + "</pre>")
    if doc.get("warnings"):
        body.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{escape(w)}</li>" for w in doc["warnings"]) + "</ul>")
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
