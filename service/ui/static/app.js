// dpfit dashboard: sign in with an API key, then show what that key may see.
// Who: GET /v1/me (name and role: the view is labelled admin, owner or analyst by it).
// Owners (and admins, for every dataset): each dataset with its validation report, a budget
// burn-down by charge order, the ledger with each row's ε added at δ_B and the running total,
// and the grants (revocable). Everyone with jobs: the jobs with live progress, the dataset's
// name beside its id, a failed job's reason, and a model's coefficients and privacy accounting.
// Analysts: the granted budgets. Everything comes from the public HTTP API of this origin; all
// text is inserted with textContent.

import { ApiError, forgetKey, get, getAll, getAllOf, post, storedKey, storeKey } from "./api.js";
import { burnDownChart, coefficientChart } from "./charts.js";

const $ = (id) => document.getElementById(id);
const ACTIVE = new Set(["queued", "running"]);
const POLL_ACTIVE_MS = 1500;
const POLL_IDLE_MS = 10000;
const VIEW_LABELS = { admin: "admin view", owner: "owner view", analyst: "analyst view" };

let timer = null;
let shownModel = null;
let lastJobsSignature = "";

function node(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v;
    else if (k.startsWith("data-")) n.setAttribute(k, v);
    else n[k] = v;
  }
  for (const c of children) n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return n;
}

function num(x, digits = 3) {
  if (x === null || x === undefined) return "—";
  if (!Number.isFinite(x)) return "∞";
  if (x !== 0 && Math.abs(x) < 1e-3) return Number(x).toExponential(digits - 1);
  return Number(x).toPrecision(digits);
}

function signed(x) {
  if (!Number.isFinite(x)) return "—";
  const text = Math.abs(x) < 5e-4 ? "0.000" : Math.abs(x).toFixed(3);
  return x < 0 ? `−${text}` : `+${text}`;
}

function utc(iso) {
  return iso.slice(0, 19).replace("T", " ");
}

function showError(where, error) {
  const target = $(where);
  target.textContent = error instanceof ApiError ? error.message : "The service did not answer.";
  target.hidden = false;
}

// A name with its id in small type under it (ids are what the API and the CLI take).
function named(name, id) {
  return [node("span", { class: "name" }, name ?? id), node("br"),
    node("span", { class: "mono hint" }, id)];
}

// ---- sign in / out ------------------------------------------------------------------------

async function signIn(event) {
  event.preventDefault();
  const key = $("api-key").value.trim();
  $("api-key").value = "";
  $("sign-in-error").hidden = true;
  try {
    await get("/v1/me", key);
  } catch (error) {
    showError("sign-in-error", error);
    return;
  }
  storeKey(key);
  await enter();
}

function signOut() {
  forgetKey();
  if (timer) clearTimeout(timer);
  timer = null;
  shownModel = null;
  lastJobsSignature = "";
  $("dashboard").hidden = true;
  $("session").hidden = true;
  $("sign-in-view").hidden = false;
  $("owned-datasets").replaceChildren();
  $("model-section").hidden = true;
  delete document.body.dataset.view;
}

async function enter() {
  $("sign-in-view").hidden = true;
  $("dashboard").hidden = false;
  $("session").hidden = false;
  $("who").textContent = "signed in";
  await refresh();
}

// ---- data ---------------------------------------------------------------------------------

async function refresh() {
  if (timer) clearTimeout(timer);
  $("dashboard-error").hidden = true;
  let active = false;
  try {
    const [me, datasets, jobs] = await Promise.all([
      get("/v1/me"), getAll("/v1/datasets"), getAll("/v1/jobs"),
    ]);
    const { name, role } = me.body;
    const owned = datasets.filter((d) => role === "admin" || d.owner === name);
    const granted = datasets.filter((d) => !owned.includes(d));
    const names = new Map(datasets.map((d) => [d.id, d.name]));
    await renderOwned(owned, role);
    await renderGranted(granted);
    renderJobs(jobs, names);
    active = jobs.some((j) => ACTIVE.has(j.status));
    const empty = owned.length === 0 && granted.length === 0 && jobs.length === 0;
    $("empty-note").hidden = !empty;
    $("who").textContent = `${name} · ${VIEW_LABELS[role] ?? role}`;
    document.body.dataset.view = role;
    $("owned-title").textContent = role === "admin" ? "All datasets" : "Your datasets";
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut();
      showError("sign-in-error", error);
      return;
    }
    showError("dashboard-error", error);
  }
  document.body.dataset.ready = "true";
  timer = setTimeout(refresh, active ? POLL_ACTIVE_MS : POLL_IDLE_MS);
}

async function renderOwned(datasets, role) {
  $("owned-section").hidden = datasets.length === 0;
  const cards = await Promise.all(datasets.map((d) => ownedCard(d, role)));
  $("owned-datasets").replaceChildren(...cards);
}

// The ledger's rows with the burn-down's figures: the history has one point per ledger row
// (oldest first, the dataset's ε spent at δ_B after it); a row's "ε added" is how much it moved
// that total, so the column sums to ε spent — unlike each job's requested ε, which composition
// does not simply add up.
function ledgerRows(charges, points) {
  const byRow = new Map(points.map((p, i) => [`${p.kind}:${p.job_id}`, i]));
  return charges.map((c, i) => {
    const at = byRow.get(`${c.kind}:${c.job_id}`) ?? i;
    const after = points[at]?.epsilon_spent ?? NaN;
    const before = at > 0 ? points[at - 1].epsilon_spent : 0;
    return { ...c, order: at + 1, spentAfter: after, added: after - before };
  });
}

async function ownedCard(d, role) {
  const base = `/v1/datasets/${encodeURIComponent(d.id)}`;
  const [budget, history, ledger, grants] = await Promise.all([
    get(`${base}/budget`), getAllOf(`${base}/budget/history`, "points"),
    getAllOf(`${base}/ledger?limit=1000`, "charges"), getAll(`${base}/grants`),
  ]);
  const b = budget.body;
  const rows = ledgerRows(ledger.charges, history.points);
  const chart = node("div", { class: "chart", "data-dataset": d.id });
  chart.append(burnDownChart(rows, history.epsilon));
  const facts = node("dl", { class: "facts" },
    node("dt", {}, "owner"), node("dd", {}, d.owner),
    node("dt", {}, "rows"), node("dd", {}, d.n_rows),
    node("dt", {}, "ε_B, δ_B"), node("dd", {}, `${num(b.epsilon)}, ${num(b.delta, 2)}`),
    node("dt", {}, "ε spent"), node("dd", { class: "eps-spent" }, num(b.epsilon_spent)),
    node("dt", {}, "ε remaining"), node("dd", {}, num(b.epsilon_remaining)),
    node("dt", {}, "jobs charged"), node("dd", {}, b.jobs_charged),
    node("dt", {}, "ledger consistent"), node("dd", {}, ledger.consistent ? "yes" : "NO"),
  );
  const analysts = [...new Set(ledger.charges.map((c) => c.principal))];
  return node("article", { class: "dataset", "data-dataset": d.id },
    node("div", { class: "dataset-head" },
      node("h3", {}, d.name), node("span", { class: "mono hint" }, d.id)),
    validationReport(d),
    node("div", { class: "dataset-body" }, chart, facts),
    node("h3", {}, "Grants"),
    grantsTable(d, grants),
    node("h3", {}, "Ledger"),
    rows.length ? ledgerTable(rows, b) : node("p", { class: "hint" }, "No charges yet."),
    node("p", { class: "hint" }, analysts.length
      ? `Analysts who spent from this budget: ${analysts.join(", ")}`
      : "No analyst has spent from this budget yet."),
  );
}

function ledgerTable(rows, b) {
  const body = rows.map((c) => node("tr", { "data-job": c.job_id, "data-kind": c.kind },
    node("td", { class: "num" }, c.order),
    node("td", { class: "mono" }, utc(c.created_at)),
    node("td", {}, c.kind),
    node("td", { class: "mono" }, c.job_id),
    node("td", {}, c.principal),
    node("td", { class: "num added" }, signed(c.added)),
    node("td", { class: "num running" }, num(c.spentAfter)),
    node("td", { class: "num requested" }, `${num(c.epsilon)}, ${num(c.delta, 2)}`),
  ));
  return node("div", { class: "scroll" },
    node("table", { class: "grid ledger" },
      node("thead", {}, node("tr", {}, ...["#", "time (UTC)", "kind", "job", "analyst",
        "ε added at δ_B", "ε spent (total)", "requested ε, δ"].map((h) => node("th", {}, h)))),
      node("tbody", {}, ...body),
      node("tfoot", {}, node("tr", {},
        node("td", { colSpan: 5 }, "ε spent at δ_B now"),
        node("td", { class: "num" }, ""),
        node("td", { class: "num" }, num(b.epsilon_spent)),
        node("td", { class: "hint" }, `of ε_B = ${num(b.epsilon)}`)))));
}

// The registration's validation report (owners and admins only): how the service's reader saw
// every cell. Labels outside the declared values are the slip that costs a budget for a useless
// model (every such row is encoded as negative / no class), so they are said first and loudly.
function validationReport(d) {
  const v = d.validation;
  const box = node("section", { class: "validation" });
  if (!v) {
    box.append(node("p", { class: "hint" }, "No validation report (registered before reports existed)."));
    return box;
  }
  const lbl = v.label;
  const warnings = [];
  if (lbl.outside_declared > 0) {
    warnings.push(`${lbl.outside_declared} of ${v.rows} labels in “${lbl.column}” are outside the `
      + "declared values: they are encoded as negative / no class. Check the declared label values.");
  }
  if (lbl.missing > 0) warnings.push(`${lbl.missing} of ${v.rows} labels are missing.`);
  if (lbl.unparseable > 0) warnings.push(`${lbl.unparseable} of ${v.rows} numeric labels are not numbers.`);
  const featureRows = v.features.filter((f) =>
    f.missing || f.unparseable || f.out_of_bounds || f.unknown_category);
  box.classList.add(warnings.length ? "bad" : featureRows.length ? "note" : "ok");
  box.append(node("h4", {}, "Validation report"),
    node("p", { class: "summary" }, warnings.length
      ? `⚠ ${warnings[0]}`
      : featureRows.length
        ? `${v.rows} rows; labels as declared; some feature cells are encoded as missing, clipped or unknown (below).`
        : `${v.rows} rows; every label and feature cell as declared.`));
  for (const w of warnings.slice(1)) box.append(node("p", { class: "summary" }, `⚠ ${w}`));
  if (featureRows.length) {
    box.append(node("div", { class: "scroll" }, node("table", { class: "grid validation-table" },
      node("thead", {}, node("tr", {}, ...["column", "missing", "unparseable", "out of bounds (clipped)",
        "unknown category"].map((h) => node("th", {}, h)))),
      node("tbody", {}, ...featureRows.map((f) => node("tr", { "data-column": f.name },
        node("td", {}, f.name),
        node("td", { class: "num" }, f.missing),
        node("td", { class: "num" }, f.unparseable),
        node("td", { class: "num" }, f.out_of_bounds),
        node("td", { class: "num" }, f.unknown_category)))))));
  }
  return box;
}

// Who may submit jobs on the dataset. Revoking takes two clicks (the first asks to confirm);
// it stops the analyst's new jobs, while the ledger and jobs already admitted are unchanged.
function grantsTable(d, grants) {
  if (grants.length === 0) return node("p", { class: "hint grants-empty" }, "No grants.");
  const rows = grants.map((g) => {
    const button = node("button", { class: "revoke", type: "button" }, "Revoke");
    button.addEventListener("click", () => revokeGrant(d, g.principal, button));
    return node("tr", { "data-principal": g.principal },
      node("td", {}, g.principal),
      node("td", { class: "mono" }, utc(g.created_at)),
      node("td", { class: "num" }, g.epsilon_cap === null ? "none" : num(g.epsilon_cap)),
      node("td", { class: "num" }, num(g.epsilon_spent)),
      node("td", {}, button),
    );
  });
  return node("div", { class: "scroll" }, node("table", { class: "grid grants" },
    node("thead", {}, node("tr", {}, ...["analyst", "granted (UTC)", "ε cap", "ε spent", ""]
      .map((h) => node("th", {}, h)))),
    node("tbody", {}, ...rows)));
}

async function revokeGrant(d, principal, button) {
  if (button.dataset.confirm !== "true") {
    button.dataset.confirm = "true";
    button.textContent = `Confirm: revoke ${principal}`;
    return;
  }
  button.disabled = true;
  try {
    await post(`/v1/datasets/${encodeURIComponent(d.id)}/grants/${encodeURIComponent(principal)}/revoke`);
  } catch (error) {
    showError("dashboard-error", error);
  }
  await refresh();
}

async function renderGranted(datasets) {
  $("granted-section").hidden = datasets.length === 0;
  const budgets = await Promise.all(datasets.map(
    (d) => get(`/v1/datasets/${encodeURIComponent(d.id)}/budget`)));
  const rows = datasets.map((d, i) => {
    const b = budgets[i].body;
    return node("tr", { "data-dataset": d.id },
      node("td", {}, ...named(d.name, d.id)),
      node("td", { class: "num" }, d.n_rows),
      node("td", { class: "num" }, num(b.epsilon)),
      node("td", { class: "num" }, num(b.delta, 2)),
      node("td", { class: "num" }, num(b.epsilon_spent)),
      node("td", { class: "num remaining" }, num(b.epsilon_remaining)),
      node("td", { class: "num" }, num(b.your_epsilon_spent)),
      node("td", { class: "num" }, b.your_epsilon_cap === null ? "none" : num(b.your_epsilon_cap)),
    );
  });
  $("granted-table").tBodies[0].replaceChildren(...rows);
}

function statusCell(j) {
  const cell = node("td", { class: `status status-${j.status}` },
    j.refunded ? `${j.status} (refunded)` : j.status);
  if (j.error && (j.status === "failed" || j.status === "cancelled")) {
    cell.append(node("div", { class: "reason" }, j.error));
  }
  return cell;
}

function renderJobs(jobs, names) {
  $("jobs-section").hidden = jobs.length === 0;
  const signature = JSON.stringify(jobs.map((j) => [j.id, j.status, j.progress.step, names.get(j.dataset_id)]));
  if (signature === lastJobsSignature) return;
  lastJobsSignature = signature;
  const rows = [...jobs].reverse().map((j) => {
    const bar = node("progress", { max: j.progress.total || 1, value: j.progress.step });
    const modelCell = node("td", { class: "model-id" });
    if (j.model_id) {
      const button = node("button", { class: "link mono", type: "button" }, j.model_id);
      button.addEventListener("click", () => showModel(j.model_id, names.get(j.dataset_id)));
      modelCell.append(button);
    }
    return node("tr", { "data-job": j.id, "data-status": j.status },
      node("td", { class: "mono" }, j.id),
      node("td", { class: "dataset-name" }, ...named(names.get(j.dataset_id), j.dataset_id)),
      node("td", {}, j.model.type || "", node("br"), node("span", { class: "hint" }, j.optimizer.name)),
      node("td", { class: "num" }, `${num(j.privacy.epsilon)}, ${num(j.privacy.delta, 2)}`),
      statusCell(j),
      node("td", { class: "progress" }, bar, node("span", { class: "hint" }, ` ${j.progress.step}/${j.progress.total}`)),
      modelCell,
    );
  });
  $("jobs-table").tBodies[0].replaceChildren(...rows);
  const newest = jobs.filter((j) => j.model_id).pop();
  if (newest && shownModel === null) showModel(newest.model_id, names.get(newest.dataset_id));
}

function coefficientRows(m) {
  const rows = [];
  const names = m.feature_names;
  if (Array.isArray(m.coefficients[0])) {
    m.coefficients.forEach((vector, k) => {
      const cls = m.classes ? String(m.classes[k]) : String(k);
      vector.forEach((v, i) => rows.push({ label: `${cls} · ${names[i] ?? i}`, value: v }));
    });
  } else {
    m.coefficients.forEach((v, i) => rows.push({ label: names[i] ?? String(i), value: v }));
    if (typeof m.intercept === "number") rows.push({ label: "(intercept)", value: m.intercept });
  }
  return rows;
}

async function showModel(modelId, datasetName) {
  try {
    const { body: m } = await get(`/v1/models/${encodeURIComponent(modelId)}`);
    shownModel = modelId;
    $("model-title").textContent = m.id;
    $("model-chart").replaceChildren(coefficientChart(coefficientRows(m)));
    $("model-chart").dataset.model = m.id;
    const p = m.privacy;
    $("model-privacy").replaceChildren(
      node("dt", {}, "model"), node("dd", {}, m.model.type || ""),
      node("dt", {}, "dataset"), node("dd", {}, ...named(datasetName, m.dataset_id)),
      node("dt", {}, "job"), node("dd", { class: "mono" }, m.job_id),
      node("dt", {}, "ε"), node("dd", {}, num(p.epsilon)),
      node("dt", {}, "δ"), node("dd", {}, num(p.delta, 2)),
      node("dt", {}, "mechanism"), node("dd", {}, p.mechanism),
      node("dt", {}, "noise scale"), node("dd", {}, num(p.noise_scale, 4)),
      node("dt", {}, "sensitivity"), node("dd", {}, num(p.sensitivity, 4)),
      node("dt", {}, "released"), node("dd", {}, utc(m.created_at)),
    );
    $("model-section").hidden = false;
  } catch (error) {
    showError("dashboard-error", error);
  }
}

// ---- start --------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  if (storedKey()) enter();
});
