// Layout sanity of an espnn HTML report, run in the page by
// test_html_layout.py; returns a JSON-able verdict. "problems" lists what a
// reader would see as broken: content wider than its box, SVG text outside
// its chart or on top of other text. The rest describes the charts so the
// test can check what they show.
(() => {
  const problems = [];
  const where = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.className && typeof el.className === "string") s += "." + el.className.trim().replace(/\s+/g, ".");
    const text = (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60);
    return `${s} "${text}"`;
  };

  const de = document.documentElement;
  if (de.scrollWidth > de.clientWidth + 1)
    problems.push(`the page is wider than the window: ${de.scrollWidth} > ${de.clientWidth} px`);

  // Every HTML box: its content fits unless it is a box meant to scroll
  // (overflow-x auto/scroll), which is reported apart.
  const scrolling = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (!(el instanceof HTMLElement)) continue;
    const cs = getComputedStyle(el);
    if (["none", "inline", "contents"].includes(cs.display)) continue;  // inline boxes have no scroll size
    const over = el.scrollWidth - el.clientWidth;
    if (["auto", "scroll"].includes(cs.overflowX)) {
      if (over > 1) scrolling.push(`${where(el)} scrolls: ${el.scrollWidth} > ${el.clientWidth} px`);
      continue;
    }
    if (over > 1) problems.push(`${where(el)}: content ${el.scrollWidth} px wider than its box ${el.clientWidth} px`);
    if (el.scrollHeight - el.clientHeight > 1)
      problems.push(`${where(el)}: content ${el.scrollHeight} px taller than its box ${el.clientHeight} px`);
  }

  // Two texts overlap when their boxes, each turned as the text is drawn
  // (rotated op labels included), intersect: the separating-axis test on
  // the boxes' corners in the chart's coordinates, with 0.5 unit of slack.
  const corners = (t) => {
    const b = t.getBBox(), m = t.getCTM(), svg = t.ownerSVGElement;
    const toSvg = svg.getCTM().inverse().multiply(m);
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]].map(([x, y]) => {
      const p = new DOMPoint(x, y).matrixTransform(toSvg);
      return [p.x, p.y];
    });
  };
  const overlap = (a, b) => {
    const pa = corners(a), pb = corners(b);
    for (const poly of [pa, pb])
      for (let i = 0; i < 2; i++) {
        const [x0, y0] = poly[i], [x1, y1] = poly[i + 1];
        const len = Math.hypot(x1 - x0, y1 - y0) || 1;
        const ax = -(y1 - y0) / len, ay = (x1 - x0) / len;
        const proj = (q) => q.map(([x, y]) => x * ax + y * ay);
        const ra = proj(pa), rb = proj(pb);
        if (Math.max(...ra) <= Math.min(...rb) + 0.5 || Math.max(...rb) <= Math.min(...ra) + 0.5) return false;
      }
    return true;
  };

  const charts = [];
  for (const svg of document.querySelectorAll("svg")) {
    const box = svg.getBoundingClientRect();
    const vb = svg.viewBox && svg.viewBox.baseVal;
    const texts = [...svg.querySelectorAll("text")];
    for (const t of texts) {
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
        problems.push(`chart text "${t.textContent}" leaves its chart: text ${r.left.toFixed(1)}..${r.right.toFixed(1)} x ` +
                      `${r.top.toFixed(1)}..${r.bottom.toFixed(1)}, chart ${box.left.toFixed(1)}..${box.right.toFixed(1)} x ` +
                      `${box.top.toFixed(1)}..${box.bottom.toFixed(1)}`);
    }
    for (let i = 0; i < texts.length; i++)
      for (let j = i + 1; j < texts.length; j++)
        if (overlap(texts[i], texts[j]))
          problems.push(`chart texts overlap: "${texts[i].textContent}" and "${texts[j].textContent}"`);
    const all = (sel) => [...svg.querySelectorAll(sel)].map((t) => t.textContent);
    charts.push({
      classes: svg.getAttribute("class") || "",
      width_attr: svg.getAttribute("width"),
      viewbox: vb && vb.width > 0 ? [vb.x, vb.y, vb.width, vb.height] : null,
      rendered_width: box.width,
      container_width: svg.parentElement.clientWidth,
      titles: all("text.title"),
      axis_titles: all("text.axis-title"),
      yticks: all("text.ytick"),
      xticks: all("text.xtick"),
      line_labels: all("text.line-label"),
      bound_lines: svg.querySelectorAll("line.bound").length,
      arena_lines: svg.querySelectorAll("line.arena").length,
    });
  }
  return {problems, scrolling, charts, text: document.body.innerText};
})()
