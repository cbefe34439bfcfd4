"""One self-contained HTML page from a report document: inline CSS and
inline SVG only (no scripts, no external files), so it can be mailed or
attached to a CI run and opened anywhere."""

from __future__ import annotations

from html import escape

from .charts import arena_chart, bar_chart
from .document import (counts_text, is_s3, kernel_lines, off_simd, ops_line, planned_memory_text, summary_lines,
                       verification_line)

# The page is read on screens of any width and on paper, with no script to
# adapt it: text wraps, and a table wider than the page scrolls inside its own
# box (shaded at the edge that hides more), never the page. Long unbroken
# words (paths, node names) may break anywhere rather than widen their block.
# On paper nothing can scroll: tables get smaller type and may break inside
# words, charts shrink to the page, and closed <details> print open.
_CSS = """
*,*::before,*::after{box-sizing:border-box}
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;padding:1.5em 2em;color:#222;max-width:1100px;
 overflow-wrap:anywhere}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
.scroll{overflow-x:auto;max-width:100%;
 background:linear-gradient(to right,#fff 30%,#fff0) left/40px 100% no-repeat local,
  linear-gradient(to left,#fff 30%,#fff0) right/40px 100% no-repeat local,
  radial-gradient(farthest-side at 0 50%,#0003,#0000) left/14px 100% no-repeat scroll,
  radial-gradient(farthest-side at 100% 50%,#0003,#0000) right/14px 100% no-repeat scroll}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:2px 5px;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.off td{background:#fff1e6}
.ok{color:#176f2c;font-weight:600}.bad{color:#b00020;font-weight:600}.muted{color:#666}
pre{background:#f7f7f7;padding:.8em;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.figure{margin:.4em 0 1.2em}
svg.chart{display:block;width:100%;height:auto;min-width:560px}
.chart text{font:12px system-ui,sans-serif;fill:#333}.chart text.title{font-size:13px;font-weight:600}
.chart text.line-label{paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}
@media (max-width:1000px){body{padding:1em}table{font-size:12px}td,th{padding:1px 4px}}
@media print{
 *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 body{max-width:none;padding:0;font-size:11px}
 .scroll{overflow:visible;background:none}
 table{font-size:10px}th{font-size:9px}td,th{padding:1px 3px}td{overflow-wrap:anywhere}
 pre{font-size:9px}svg.chart{min-width:0}.figure,tr{break-inside:avoid}
 details::details-content{content-visibility:visible;display:block}}
"""


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
    # The box scrolls rather than the page when a table is wider than the page.
    return f"<div class=scroll><table><tr>{head}</tr>{body}</table></div>"


def _figure(svg: str) -> str:
    """A chart in a box that scrolls on a screen too narrow for its minimum
    width (below it the chart's text would shrink past reading)."""
    return f"<div class='figure scroll'>{svg}</div>" if svg else ""


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
        rows.append([p["index"], p["backend"], f"{p['num_inputs']}/{p['num_outputs']}", p["num_delegated_ops"],
                     _fmt(p["payload_bytes"]), _fmt(s.get("arena_bytes")), _fmt(s.get("arena_lower_bound")),
                     _fmt(s.get("arena_layer_bound")), s.get("schedule", "-"),
                     _fmt(s.get("scratch_bytes")), _fmt(s.get("macs")),
                     _fmt(s.get("s3_simd_macs")) if s and is_s3(s) else "-", s.get("target") or "default"])
    if rows:
        out.append(_table(["partition", "backend", "in/out", "delegated ops", "payload B", "arena B",
                           "arena lower bound B", "layer-by-layer bound B", "schedule",
                           "scratch B", "MACs", "S3 SIMD MACs", "target"], rows, {0, 3, 4, 5, 6, 7, 9, 10, 11}))
        out.append("<h3>Delegated ops</h3>" + _table(["op", "count"], [[k, v] for k, v in m["delegated_ops"].items()],
                                                     {1}))
        if m["num_delegated_quant_ops"]:
            out.append(f"<p class=muted>{escape(ops_line(m))}</p>")
        out += [f"<p>{escape(line.strip())}</p>"
                for line in kernel_lines([p["payload"] for p in parts if p["payload"]])]
        out.append("<h3>MACs and payload size per partition</h3>")
        if len(parts) > 1:
            labels = [f"partition {p['index']}" for p in parts]
            out.append(_figure(bar_chart(labels, [("MACs", [(p["payload"] or {}).get("macs", 0) for p in parts]),
                                                  ("payload bytes", [p["payload_bytes"] for p in parts])])))
        else:  # one bar per panel compares nothing
            s = parts[0]["payload"]
            macs = f"{s['macs']:,} MACs, " if s else ""
            out.append(f"<p>One partition: {macs}a {_fmt(parts[0]['payload_bytes'])}-byte payload (nothing to "
                       "compare across partitions).</p>")
        out.append("<h3>Arena occupancy over execution order</h3><p class=muted>per partition, at each op in "
                   "execution order: the bytes live (filled), the bytes the stored plan spans (orange line), the "
                   "planned arena (red dashed line) and the least arena any accepted plan could have, its lower "
                   "bound (green dotted line).</p>")
        for p in parts:
            s = p["payload"]
            if s:
                out.append(_figure(arena_chart(
                    s["arena_timeline"], s["arena_bytes"], s["arena_lower_bound"],
                    f"partition {p['index']}: arena {s['arena_bytes']:,} B, lower bound {s['arena_lower_bound']:,} B, "
                    f"layer-by-layer bound {s['arena_layer_bound']:,} B", f"schedule: {s['schedule']}")))
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
