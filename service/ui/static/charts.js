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

// A "nice" step (1, 2, 2.5 or 5 × 10^k) giving at most `maxTicks` intervals over [0, span].
export function niceStep(span, maxTicks) {
  if (!(span > 0)) return 1;
  const raw = span / maxTicks;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

// Tick values 0, step, 2·step, … up to the first one ≥ top.
export function ticks(top, maxTicks) {
  const step = niceStep(top, maxTicks);
  const count = Math.max(1, Math.ceil(top / step - 1e-9));
  return Array.from({ length: count + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

function tickLabel(v) {
  return Number(v.toPrecision(6)).toString();
}

// Budget burn-down by charge order: ε spent at δ_B (a step line) after every ledger row, the
// x axis counting rows (a burst of jobs in one second stays readable), against ε_B (dashed).
// rows: [{order, kind, job_id, principal, added, spentAfter, created_at}], oldest first. Each
// point carries a tooltip (an SVG <title>): the row, its job, analyst, ε added and the total.
export function burnDownChart(rows, epsilonBudget) {
  const W = 560, H = 256, L = 48, R = 18, T = 24, B = 40;
  const svg = el("svg", {
    viewBox: `0 0 ${W} ${H}`, role: "img", class: "burn-down",
    "aria-label": `ε spent after each charge against ε_B = ${fmt(epsilonBudget)}`,
  });
  const n = rows.length;
  const values = rows.map((r) => (Number.isFinite(r.spentAfter) ? r.spentAfter : epsilonBudget));
  const yTicks = ticks(Math.max(epsilonBudget, ...values, 1e-9), 5);
  const ymax = yTicks[yTicks.length - 1];
  const xStep = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000].find((s) => n / s <= 8) ?? Math.ceil(n / 8);
  const xTicks = Array.from({ length: Math.ceil(Math.max(n, 1) / xStep) + 1 }, (_, i) => i * xStep);
  const xmax = xTicks[xTicks.length - 1];
  const x = (i) => L + (i / xmax) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);

  for (const v of yTicks) {
    svg.append(el("line", { class: "gridline", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(el("text", { class: "label y-tick", x: L - 6, y: y(v) + 4, "text-anchor": "end" }, tickLabel(v)));
  }
  for (const i of xTicks) {
    svg.append(el("line", { class: "tick", x1: x(i), x2: x(i), y1: H - B, y2: H - B + 4 }));
    svg.append(el("text", { class: "label x-tick", x: x(i), y: H - B + 16, "text-anchor": "middle" }, String(i)));
  }
  svg.append(el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(el("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(el("text", { class: "label", x: 4, y: 11 }, "ε spent"));
  svg.append(el("text", { class: "label", x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" },
    "ledger rows (charges and refunds), in order"));

  svg.append(el("line", {
    class: "budget", x1: L, x2: W - R, y1: y(epsilonBudget), y2: y(epsilonBudget),
  }));
  svg.append(el("text", {
    class: "label", x: W - R - 4, y: y(epsilonBudget) - 6, "text-anchor": "end",
  }, `ε_B = ${fmt(epsilonBudget)}`));

  let path = `M ${x(0)} ${y(0)}`;
  values.forEach((v, i) => { path += ` H ${x(i + 1)} V ${y(v)}`; });
  const area = `${path} V ${y(0)} H ${x(0)} Z`;
  svg.append(el("path", { class: "spent-area", d: area }));
  svg.append(el("path", { class: "spent", d: path }));
  rows.forEach((r, i) => {
    const tip = `#${r.order} ${r.kind} · job ${r.job_id} · analyst ${r.principal} · `
      + `ε added ${fmt(r.added)} at δ_B · ε spent ${fmt(values[i])} · ${r.created_at.slice(0, 19).replace("T", " ")} UTC`;
    const group = el("g", { class: "mark", "data-job": r.job_id, "data-kind": r.kind });
    group.append(el("circle", { class: "hit", cx: x(i + 1), cy: y(values[i]), r: 9 }));
    group.append(el("circle", { class: r.kind === "refund" ? "point refund" : "point", cx: x(i + 1), cy: y(values[i]), r: 3.5 }));
    group.append(el("title", {}, tip));
    svg.append(group);
  });
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
