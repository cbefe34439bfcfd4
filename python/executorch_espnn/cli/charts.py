"""Inline SVG charts of the HTML report (html.py).

Every chart is drawn in a fixed viewBox (VIEW_W units wide) and shown at
width 100 %, so it scales with the page while keeping its proportions. No
script runs in the page and SVG text does not wrap, so the layout is decided
here: text widths are estimated generously (`text_width`), long titles are
broken into lines, axis margins are sized to the labels they hold, and op
labels are rotated and thinned out when they would not fit side by side.
tests/cli/test_html_layout.py renders the result in Chromium and checks that
no text leaves its chart and that no two labels overlap.
"""

from __future__ import annotations

import math
from html import escape

VIEW_W = 900  # viewBox width: about the width the page shows a chart at, so 1 unit ~ 1 CSS px
FONT = 12  # font size of chart text, in viewBox units (.chart text in html.py's CSS)
LINE = 16  # line pitch of chart text
PAD = 8  # blank border inside the viewBox
_TITLE_FONT = 13  # chart titles are bold and a bit larger

COLORS = {"live": "#3b6fb6", "plan": "#e07b39", "arena": "#b8433c", "bound": "#176f2c", "axis": "#888",
          "grid": "#e4e4e4"}
BAR_COLORS = ("#3b6fb6", "#e07b39", "#3a9a5b", "#7d5bb0")


def text_width(s: str, size: float = FONT, bold: bool = False) -> float:
    """An upper estimate of the rendered width of `s` in a sans-serif face
    (per-character advances a little above DejaVu Sans, the widest common
    system face); overestimating only costs margin, underestimating clips."""
    w = 0.0
    for c in s:
        if c in " .,:;'|!il()[]":
            w += 0.36
        elif c.isdigit():
            w += 0.66
        elif c in "MWmw@%":
            w += 1.0
        elif c.isupper() or c in "_#&":
            w += 0.8
        else:
            w += 0.64
    return w * size * (1.08 if bold else 1.0)


def _wrap(text: str, width: float, size: float, bold: bool = False) -> list[str]:
    """Greedy word wrap by estimated width; a word longer than a line is cut."""
    lines, cur = [], ""
    for word in text.split():
        cand = f"{cur} {word}" if cur else word
        if text_width(cand, size, bold) <= width:
            cur = cand
            continue
        if cur:
            lines.append(cur)
        while text_width(word, size, bold) > width:  # a path or a region list with no spaces
            k = max(1, int(len(word) * width / text_width(word, size, bold)))
            lines.append(word[:k])
            word = word[k:]
        cur = word
    if cur:
        lines.append(cur)
    return lines or [""]


def _title_block(title: str, subtitle: str, y0: float) -> tuple[str, float]:
    """The chart title (bold) and subtitle as <text> elements with a <tspan>
    per wrapped line; returns the markup and the y below them."""
    out, y = [], y0
    for cls, text, size, bold in (("title", title, _TITLE_FONT, True), ("subtitle", subtitle, FONT, False)):
        if not text:
            continue
        lines = _wrap(text, VIEW_W - 2 * PAD, size, bold)
        spans = "".join(f'<tspan x="{PAD}" dy="{0 if i == 0 else LINE}">{escape(s)}</tspan>'
                        for i, s in enumerate(lines))
        out.append(f'<text class="{cls}" x="{PAD}" y="{y + size:.1f}">{spans}</text>')
        y += size + LINE * (len(lines) - 1) + 5
    return "".join(out), y + 2


def _nice_step(span: float, max_ticks: int) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k step that cuts `span` into at most `max_ticks` intervals."""
    raw = span / max(1, max_ticks)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return max(1, m * mag)
    return 10 * mag


def _ticks(peak: float, max_ticks: int) -> tuple[list[float], float]:
    """Tick values from 0 to the first tick at or above `peak`, and that top."""
    step = _nice_step(peak, max_ticks)
    top = step * math.ceil(peak / step) if peak > 0 else step
    n = round(top / step)
    return [step * i for i in range(n + 1)], top


def _short(v: float) -> str:
    """A compact tick label: 1,500 -> 1.5k, 2,000,000 -> 2M."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{round(v / div, 3):g}{suffix}"
    return f"{round(v, 3):g}"


def _legend(items: list[tuple[str, str]], y0: float) -> tuple[str, float]:
    """A row (wrapped if needed) of swatch + label; items are (swatch markup
    drawn in a 22x10 box at 0,0, label). Returns markup and the y below."""
    out, x, y = [], PAD, y0
    for swatch, label in items:
        w = 28 + text_width(label) + 18
        if x + w > VIEW_W - PAD and x > PAD:
            x, y = PAD, y + LINE
        out.append(f'<g transform="translate({x:.1f},{y + 2:.1f})">{swatch}</g>'
                   f'<text class="legend" x="{x + 28:.1f}" y="{y + FONT - 1:.1f}">{escape(label)}</text>')
        x += w
    return "".join(out), y + LINE


def _hline(y: float, x1: float, x2: float, key: str, cls: str, dash: str, width: float = 1.5) -> str:
    return (f'<line class="{cls}" x1="{x1:.1f}" x2="{x2:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{COLORS[key]}" '
            f'stroke-width="{width}" stroke-dasharray="{dash}"/>')


_ARENA_DASH, _BOUND_DASH = "7 4", "2 3"
_MAX_OP_LABEL = 20  # op names are cut to this many characters on the axis (whole in the tooltip and the op table)


def _op_label(step: dict) -> str:
    op = step["op"] if len(step["op"]) <= _MAX_OP_LABEL else step["op"][:_MAX_OP_LABEL - 1] + "\u2026"
    return f"{step['index']} {op}"


def arena_chart(timeline: list[dict], arena_bytes: int, lower_bound: int, title: str,
                subtitle: str = "") -> str:
    """Step chart of the bytes live (filled) and the bytes the stored plan
    spans (line) at each op in execution order, with the planned arena and
    its lower bound as labelled horizontal lines, a byte axis with ticks and
    each op's index and opcode on the other axis (every k-th when too many)."""
    if not timeline:
        return ""
    n = len(timeline)
    out = []
    title_svg, y = _title_block(title, subtitle, PAD)
    out.append(title_svg)
    legend_svg, y = _legend([
        (f'<rect width="22" height="10" fill="{COLORS["live"]}" fill-opacity="0.35"/>', "bytes live"),
        (f'<line x2="22" y1="5" y2="5" stroke="{COLORS["plan"]}" stroke-width="1.5"/>', "bytes the stored plan spans"),
        (f'<line x2="22" y1="5" y2="5" stroke="{COLORS["arena"]}" stroke-width="1.5" '
         f'stroke-dasharray="{_ARENA_DASH}"/>', "planned arena"),
        (f'<line x2="22" y1="5" y2="5" stroke="{COLORS["bound"]}" stroke-width="2" '
         f'stroke-dasharray="{_BOUND_DASH}"/>', "lower bound"),
    ], y)
    out.append(legend_svg)
    top = y + LINE + 2  # room for a line label above a line at the top of the scale
    plot_h = 200

    peak = max([arena_bytes, lower_bound, *(s["plan_bytes"] for s in timeline),
                *(s["live_bytes"] for s in timeline), 1])
    yticks, ymax = _ticks(peak, 5)
    ylabel_w = max(text_width(f"{v:,.0f}") for v in yticks)

    labels = [_op_label(s) for s in timeline]
    label_w = [text_width(s) for s in labels]
    # Op labels side by side when each fits its step; else turned 45 degrees,
    # one op in `every` so neighbours' baselines (col * every * sin 45 apart)
    # clear a line of text, with the left margin widened until every label
    # starts inside the viewBox: a turned label reaches about (width + font)
    # * cos 45 left of its op, and op i sits at left + f * (span - left),
    # f = (i + 0.5) / n; solved for left. A wider margin narrows the steps,
    # which may thin the labels further: repeat until both settle.
    cos45 = math.cos(math.pi / 4)
    span = VIEW_W - PAD - 4  # the plot's right end
    left0 = PAD + LINE + 6 + ylabel_w + 8  # room for the axis title and the tick labels
    left, every = left0, 0
    horizontal = max(label_w) + 10 <= (span - left0) / n
    for _ in range(8):  # settles in two or three rounds; the cap only guards the loop
        need = 1 if horizontal else max(1, math.ceil(1.35 * FONT / ((span - left) / n * cos45)))
        if need == every:
            break
        every = need
        shown = [i for i in range(n) if i % every == 0]
        if not horizontal:
            left = max([left0] + [(PAD + (label_w[i] + FONT) * cos45 - (i + 0.5) / n * span) / (1 - (i + 0.5) / n)
                                  for i in shown])
    plot_w = span - left
    col = plot_w / n
    bottom = top + plot_h
    label_top = 12  # below the axis: where the op labels hang from
    label_depth = FONT + 4 if horizontal else max((label_w[i] + FONT) * cos45 for i in shown) + 4
    height = bottom + label_top + label_depth + LINE + PAD

    def x(i: float) -> float:
        return left + col * i

    def yv(v: float) -> float:
        return bottom - plot_h * v / ymax

    # Grid and y axis.
    for v in yticks:
        yy = yv(v)
        out.append(f'<line x1="{left:.1f}" x2="{left + plot_w:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   f'stroke="{COLORS["grid"]}"/>')
        out.append(f'<line x1="{left - 4:.1f}" x2="{left:.1f}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{COLORS["axis"]}"/>')
        # Centred on its tick, except 0, set just above the axis: a rotated
        # first op label passes below it.
        base = yy - 2 if v == 0 else yy + FONT / 3
        out.append(f'<text class="ytick" x="{left - 7:.1f}" y="{base:.1f}" text-anchor="end">{v:,.0f}</text>')
    ymid = top + plot_h / 2
    out.append(f'<text class="axis-title" x="{PAD + FONT:.1f}" y="{ymid:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 {PAD + FONT:.1f} {ymid:.1f})">bytes</text>')

    # Data: live bytes filled, plan span as a line, one step per op.
    def steps(key):
        pts = []
        for i, s in enumerate(timeline):
            pts += [(x(i), yv(s[key])), (x(i + 1), yv(s[key]))]
        return pts

    area = " ".join(f"{a:.1f},{b:.1f}" for a, b in [(x(0), yv(0)), *steps("live_bytes"), (x(n), yv(0))])
    plan = " ".join(f"{a:.1f},{b:.1f}" for a, b in steps("plan_bytes"))
    out.append(f'<polygon points="{area}" fill="{COLORS["live"]}" fill-opacity="0.35" stroke="none"/>')
    out.append(f'<polyline points="{plan}" fill="none" stroke="{COLORS["plan"]}" stroke-width="1.5"/>')

    # The planned arena and its lower bound, each labelled at the right end:
    # the arena above its line, the bound below its own (it is never above
    # the arena), so the two labels stay apart however close the lines are.
    ya, yb = yv(arena_bytes), yv(lower_bound)
    right = left + plot_w - 4
    out.append(_hline(ya, left, left + plot_w, "arena", "arena", _ARENA_DASH))
    out.append(_hline(yb, left, left + plot_w, "bound", "bound", _BOUND_DASH, 2))
    if arena_bytes == lower_bound:
        out.append(f'<text class="line-label bound-label" x="{right:.1f}" y="{ya - 5:.1f}" text-anchor="end">'
                   f"planned arena = lower bound = {arena_bytes:,} B</text>")
    else:
        out.append(f'<text class="line-label" x="{right:.1f}" y="{ya - 5:.1f}" text-anchor="end">'
                   f"planned arena {arena_bytes:,} B</text>")
        below = yb + FONT + 3
        yl = below if below <= bottom - 2 else yb - 5
        if yl < ya + LINE and yl != below:  # both near the floor of the scale: put the bound label left
            out.append(f'<text class="line-label bound-label" x="{left + 4:.1f}" y="{yl:.1f}">'
                       f"lower bound {lower_bound:,} B</text>")
        else:
            out.append(f'<text class="line-label bound-label" x="{right:.1f}" y="{yl:.1f}" text-anchor="end">'
                       f"lower bound {lower_bound:,} B</text>")

    # Axes and the op labels.
    out.append(f'<line x1="{left:.1f}" x2="{left:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" stroke="{COLORS["axis"]}"/>')
    out.append(f'<line x1="{left:.1f}" x2="{left + plot_w:.1f}" y1="{bottom:.1f}" y2="{bottom:.1f}" '
               f'stroke="{COLORS["axis"]}"/>')
    for i in range(n):
        if i % every and col < 3:
            continue
        xc = x(i + 0.5)
        tick = 5 if i % every == 0 else 2
        out.append(f'<line x1="{xc:.1f}" x2="{xc:.1f}" y1="{bottom:.1f}" y2="{bottom + tick:.1f}" '
                   f'stroke="{COLORS["axis"]}"/>')
    for i in shown:
        xc = x(i + 0.5)
        if horizontal:
            out.append(f'<text class="xtick" x="{xc:.1f}" y="{bottom + 6 + FONT:.1f}" text-anchor="middle">'
                       f"{escape(labels[i])}</text>")
        else:
            ty = bottom + label_top
            out.append(f'<text class="xtick" x="{xc:.1f}" y="{ty:.1f}" text-anchor="end" '
                       f'transform="rotate(-45 {xc:.1f} {ty:.1f})">{escape(labels[i])}</text>')
    axis = "op index and opcode, in execution order" + (f" (one op in {every} labelled)" if every > 1 else "")
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - PAD - 4:.1f}" '
               f'text-anchor="middle">{escape(axis)}</text>')

    # Hover detail per op (the figures above stay readable without it).
    out += [f'<rect x="{x(i):.1f}" y="{top:.1f}" width="{col:.2f}" height="{plot_h}" fill="transparent">'
            f"<title>op {s['index']} {escape(s['op'])}: {s['live_bytes']:,} B live, {s['plan_bytes']:,} B spanned"
            "</title></rect>" for i, s in enumerate(timeline)]
    return (f'<svg class="chart arena-chart" viewBox="0 0 {VIEW_W} {height:.0f}" width="100%" '
            f'preserveAspectRatio="xMinYMin meet" role="img"><title>{escape("; ".join(t for t in (title, subtitle) if t))}'
            f'</title>{"".join(out)}</svg>')


def bar_chart(labels: list[str], series: list[tuple[str, list[int]]]) -> str:
    """Horizontal bars, one panel per series side by side, each scaled to its
    own maximum with a tick axis along its foot and the value at each bar."""
    if not labels:
        return ""
    row = 24
    left = PAD + max(text_width(s) for s in labels) + 10
    gap = 36
    panel_w = (VIEW_W - left - PAD - gap * (len(series) - 1)) / len(series)
    top = PAD + _TITLE_FONT + 10
    bottom = top + row * len(labels)
    height = bottom + 8 + FONT + PAD + 4
    out = []
    for i, lab in enumerate(labels):
        out.append(f'<text class="ylabel" x="{left - 8:.1f}" y="{top + row * i + row / 2 + FONT / 3:.1f}" '
                   f'text-anchor="end">{escape(lab)}</text>')
    for k, (name, values) in enumerate(series):
        x0 = left + k * (panel_w + gap)
        value_w = max(text_width(f"{v:,}") for v in values) + 8
        bar_max = panel_w - value_w
        peak = max(values) or 1
        tick_w = text_width(_short(peak)) + 14
        ticks, top_v = _ticks(peak, max(1, int(bar_max // tick_w)))
        color = BAR_COLORS[k % len(BAR_COLORS)]
        out.append(f'<text class="title" x="{x0:.1f}" y="{PAD + _TITLE_FONT:.1f}">{escape(name)}</text>')
        for v in ticks:
            xx = x0 + bar_max * v / top_v
            out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" stroke="{COLORS["grid"]}"/>'
                       f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{bottom:.1f}" y2="{bottom + 4:.1f}" '
                       f'stroke="{COLORS["axis"]}"/>')
            anchor = "start" if v == 0 else "middle"
            out.append(f'<text class="xtick" x="{xx:.1f}" y="{bottom + 6 + FONT:.1f}" text-anchor="{anchor}">'
                       f"{_short(v)}</text>")
        for i, v in enumerate(values):
            bw = bar_max * v / top_v
            yy = top + row * i
            out.append(f'<rect x="{x0:.1f}" y="{yy + 4:.1f}" width="{bw:.1f}" height="{row - 8}" fill="{color}">'
                       f"<title>{escape(labels[i])} {escape(name)}: {v:,}</title></rect>"
                       f'<text class="value" x="{x0 + bw + 4:.1f}" y="{yy + row / 2 + FONT / 3:.1f}">{v:,}</text>')
        out.append(f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{top:.1f}" y2="{bottom:.1f}" stroke="{COLORS["axis"]}"/>'
                   f'<line x1="{x0:.1f}" x2="{x0 + bar_max:.1f}" y1="{bottom:.1f}" y2="{bottom:.1f}" '
                   f'stroke="{COLORS["axis"]}"/>')
    names = " and ".join(name for name, _ in series)
    return (f'<svg class="chart bar-chart" viewBox="0 0 {VIEW_W} {height:.0f}" width="100%" '
            f'preserveAspectRatio="xMinYMin meet" role="img"><title>{escape(names)} per partition</title>'
            f'{"".join(out)}</svg>')
