// Hand-drawn SVG charts (no chart library, no inline styles: classes from app.css only).
// Text is set with textContent, never parsed as markup.

const SVG = "http://www.w3.org/2000/svg";

function el(name, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

function fmt(x) {
  if (!Number.isFinite(x)) return "∞";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 100) return x.toFixed(0);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

function shortTime(date) {
  return date.toISOString().slice(11, 19);
}

// Budget burn-down: ε spent (step line) over time against the dataset's ε_B (dashed line).
// points: [{at: ISO string, epsilon_spent: number}], oldest first.
export function burnDownChart(points, epsilonBudget, created) {
  const W = 560, H = 240, L = 52, R = 16, T = 14, B = 34;
  const svg = el("svg", {
    viewBox: `0 0 ${W} ${H}`, role: "img", class: "burn-down",
    "aria-label": `ε spent over time against ε_B = ${fmt(epsilonBudget)}`,
  });
  const start = { t: new Date(created).getTime(), y: 0 };
  const series = [start, ...points.map((p) => ({
    t: new Date(p.at).getTime(),
    y: Number.isFinite(p.epsilon_spent) ? p.epsilon_spent : epsilonBudget,
  }))];
  const now = Math.max(Date.now(), series[series.length - 1].t);
  series.push({ t: now, y: series[series.length - 1].y });
  const t0 = series[0].t, t1 = Math.max(now, t0 + 1000);
  const ymax = Math.max(epsilonBudget, ...series.map((p) => p.y)) * 1.08 || 1;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);

  for (let i = 0; i <= 4; i += 1) {
    const v = (ymax * i) / 4;
    svg.append(el("line", { class: "gridline", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(el("text", { class: "label", x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v)));
  }
  svg.append(el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  for (const [t, anchor] of [[t0, "start"], [(t0 + t1) / 2, "middle"], [t1, "end"]]) {
    svg.append(el("text", { class: "label", x: x(t), y: H - B + 16, "text-anchor": anchor },
      shortTime(new Date(t))));
  }
  svg.append(el("text", { class: "label", x: 12, y: T + 8 }, "ε"));
  svg.append(el("text", { class: "label", x: W - R, y: H - 4, "text-anchor": "end" }, "time (UTC)"));

  svg.append(el("line", {
    class: "budget", x1: L, x2: W - R, y1: y(epsilonBudget), y2: y(epsilonBudget),
  }));
  svg.append(el("text", {
    class: "label", x: W - R - 4, y: y(epsilonBudget) - 6, "text-anchor": "end",
  }, `ε_B = ${fmt(epsilonBudget)}`));

  let path = `M ${x(series[0].t)} ${y(series[0].y)}`;
  for (let i = 1; i < series.length; i += 1) {
    path += ` H ${x(series[i].t)} V ${y(series[i].y)}`;
  }
  const area = `${path} V ${y(0)} H ${x(series[0].t)} Z`;
  svg.append(el("path", { class: "spent-area", d: area }));
  svg.append(el("path", { class: "spent", d: path }));
  for (const p of series.slice(1, -1)) {
    svg.append(el("circle", { class: "point", cx: x(p.t), cy: y(p.y), r: 3.5 }));
  }
  return svg;
}

// Horizontal bars of released coefficients. rows: [{label, value}].
export function coefficientChart(rows) {
  const W = 560, row = 22, L = 190, R = 64, T = 10;
  const H = T * 2 + row * rows.length + 20;
  const svg = el("svg", {
    viewBox: `0 0 ${W} ${H}`, role: "img", class: "coefficients",
    "aria-label": "released coefficients",
  });
  const m = Math.max(1e-12, ...rows.map((r) => Math.abs(r.value)));
  const mid = L + (W - L - R) / 2;
  const scale = (W - L - R) / 2 / m;
  rows.forEach((r, i) => {
    const yTop = T + i * row;
    const w = Math.abs(r.value) * scale;
    const xStart = r.value >= 0 ? mid : mid - w;
    svg.append(el("text", {
      class: "label", x: L - 8, y: yTop + row * 0.68, "text-anchor": "end",
    }, r.label));
    svg.append(el("rect", {
      class: r.value >= 0 ? "bar-pos" : "bar-neg", x: xStart, y: yTop + 3, width: Math.max(w, 0.5),
      height: row - 6,
    }));
    svg.append(el("text", {
      class: "label value", x: W - 4, y: yTop + row * 0.68, "text-anchor": "end",
    }, fmt(r.value)));
  });
  svg.append(el("line", { class: "zero", x1: mid, x2: mid, y1: T, y2: T + row * rows.length }));
  return svg;
}
