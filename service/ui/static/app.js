// dpfit dashboard: sign in with an API key, then show what that key may see.
// Owners: their datasets with a budget burn-down, the ledger, the grants (revocable). Analysts: granted budgets, their
// jobs with live progress, a model's coefficients and privacy accounting. Everything comes from
// the public HTTP API of this origin; all text is inserted with textContent.

import { ApiError, forgetKey, get, getAll, getAllOf, post, storedKey, storeKey } from "./api.js";
import { burnDownChart, coefficientChart } from "./charts.js";

const $ = (id) => document.getElementById(id);
const ACTIVE = new Set(["queued", "running"]);
const POLL_ACTIVE_MS = 1500;
const POLL_IDLE_MS = 10000;

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
  return Number(x).toPrecision(digits);
}

function showError(where, error) {
  const target = $(where);
  target.textContent = error instanceof ApiError ? error.message : "The service did not answer.";
  target.hidden = false;
}

// ---- sign in / out ------------------------------------------------------------------------

async function signIn(event) {
  event.preventDefault();
  const key = $("api-key").value.trim();
  $("api-key").value = "";
  $("sign-in-error").hidden = true;
  try {
    await get("/v1/datasets?limit=1", key);
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
  for (const id of ["owned-datasets"]) $(id).replaceChildren();
  $("model-section").hidden = true;
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
    const [datasets, jobs] = await Promise.all([getAll("/v1/datasets"), getAll("/v1/jobs")]);
    const owned = datasets.filter((d) => d.fingerprint !== null && d.fingerprint !== undefined);
    const granted = datasets.filter((d) => !owned.includes(d));
    await renderOwned(owned);
    await renderGranted(granted);
    renderJobs(jobs);
    active = jobs.some((j) => ACTIVE.has(j.status));
    const empty = owned.length === 0 && granted.length === 0 && jobs.length === 0;
    $("empty-note").hidden = !empty;
    $("who").textContent = owned.length ? "owner view" : "analyst view";
    document.body.dataset.view = owned.length ? "owner" : "analyst";
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

async function renderOwned(datasets) {
  $("owned-section").hidden = datasets.length === 0;
  const cards = await Promise.all(datasets.map(ownedCard));
  $("owned-datasets").replaceChildren(...cards);
}

async function ownedCard(d) {
  const base = `/v1/datasets/${encodeURIComponent(d.id)}`;
  const [budget, history, ledgerAll, grants] = await Promise.all([
    get(`${base}/budget`), getAllOf(`${base}/budget/history`, "points"),
    getAllOf(`${base}/ledger?limit=1000`, "charges"), getAll(`${base}/grants`),
  ]);
  const ledger = { body: ledgerAll };
  const b = budget.body;
  const chart = node("div", { class: "chart", "data-dataset": d.id });
  chart.append(burnDownChart(history.points, history.epsilon, d.created_at));
  const facts = node("dl", { class: "facts" },
    node("dt", {}, "rows"), node("dd", {}, d.n_rows),
    node("dt", {}, "ε_B, δ_B"), node("dd", {}, `${num(b.epsilon)}, ${num(b.delta, 2)}`),
    node("dt", {}, "ε spent"), node("dd", { class: "eps-spent" }, num(b.epsilon_spent)),
    node("dt", {}, "ε remaining"), node("dd", {}, num(b.epsilon_remaining)),
    node("dt", {}, "jobs charged"), node("dd", {}, b.jobs_charged),
    node("dt", {}, "ledger consistent"), node("dd", {}, ledger.body.consistent ? "yes" : "NO"),
  );
  const rows = ledger.body.charges.map((c) => node("tr", {},
    node("td", { class: "mono" }, c.created_at.slice(0, 19).replace("T", " ")),
    node("td", {}, c.kind),
    node("td", { class: "mono" }, c.job_id),
    node("td", {}, c.principal),
    node("td", { class: "num" }, num(c.epsilon)),
    node("td", { class: "num" }, num(c.delta, 2)),
  ));
  const analysts = [...new Set(ledger.body.charges.map((c) => c.principal))];
  const table = node("table", { class: "grid ledger" },
    node("thead", {}, node("tr", {}, ...["time (UTC)", "kind", "job", "analyst", "ε", "δ"]
      .map((h) => node("th", {}, h)))),
    node("tbody", {}, ...rows));
  return node("article", { class: "dataset", "data-dataset": d.id },
    node("div", { class: "dataset-head" },
      node("h3", {}, d.name), node("span", { class: "mono hint" }, d.id)),
    node("div", { class: "dataset-body" }, chart, facts),
    node("h3", {}, "Grants"),
    grantsTable(d, grants),
    node("h3", {}, "Ledger"),
    rows.length ? table : node("p", { class: "hint" }, "No charges yet."),
    node("p", { class: "hint" }, analysts.length
      ? `Analysts who spent from this budget: ${analysts.join(", ")}`
      : "No analyst has spent from this budget yet."),
  );
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
      node("td", { class: "mono" }, g.created_at.slice(0, 19).replace("T", " ")),
      node("td", { class: "num" }, g.epsilon_cap === null ? "none" : num(g.epsilon_cap)),
      node("td", { class: "num" }, num(g.epsilon_spent)),
      node("td", {}, button),
    );
  });
  return node("table", { class: "grid grants" },
    node("thead", {}, node("tr", {}, ...["analyst", "granted (UTC)", "ε cap", "ε spent", ""]
      .map((h) => node("th", {}, h)))),
    node("tbody", {}, ...rows));
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
      node("td", {}, d.name, node("br"), node("span", { class: "mono hint" }, d.id)),
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

function renderJobs(jobs) {
  $("jobs-section").hidden = jobs.length === 0;
  const signature = JSON.stringify(jobs.map((j) => [j.id, j.status, j.progress.step]));
  if (signature === lastJobsSignature) return;
  lastJobsSignature = signature;
  const rows = [...jobs].reverse().map((j) => {
    const bar = node("progress", { max: j.progress.total || 1, value: j.progress.step });
    const modelCell = node("td", {});
    if (j.model_id) {
      const button = node("button", { class: "link mono", type: "button" }, j.model_id);
      button.addEventListener("click", () => showModel(j.model_id));
      modelCell.append(button);
    }
    return node("tr", { "data-job": j.id, "data-status": j.status },
      node("td", { class: "mono" }, j.id),
      node("td", { class: "mono" }, j.dataset_id),
      node("td", {}, j.model.type || ""),
      node("td", {}, j.optimizer.name),
      node("td", { class: "num" }, num(j.privacy.epsilon)),
      node("td", { class: "num" }, num(j.privacy.delta, 2)),
      node("td", { class: `status-${j.status}` }, j.refunded ? `${j.status} (refunded)` : j.status),
      node("td", {}, bar, ` ${j.progress.step}/${j.progress.total}`),
      modelCell,
    );
  });
  $("jobs-table").tBodies[0].replaceChildren(...rows);
  const newest = jobs.filter((j) => j.model_id).pop();
  if (newest && shownModel === null) showModel(newest.model_id);
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

async function showModel(modelId) {
  try {
    const { body: m } = await get(`/v1/models/${encodeURIComponent(modelId)}`);
    shownModel = modelId;
    $("model-title").textContent = m.id;
    $("model-chart").replaceChildren(coefficientChart(coefficientRows(m)));
    $("model-chart").dataset.model = m.id;
    const p = m.privacy;
    $("model-privacy").replaceChildren(
      node("dt", {}, "model"), node("dd", {}, m.model.type || ""),
      node("dt", {}, "job"), node("dd", { class: "mono" }, m.job_id),
      node("dt", {}, "ε"), node("dd", {}, num(p.epsilon)),
      node("dt", {}, "δ"), node("dd", {}, num(p.delta, 2)),
      node("dt", {}, "mechanism"), node("dd", {}, p.mechanism),
      node("dt", {}, "noise scale"), node("dd", {}, num(p.noise_scale, 4)),
      node("dt", {}, "sensitivity"), node("dd", {}, num(p.sensitivity, 4)),
      node("dt", {}, "released"), node("dd", {}, m.created_at.slice(0, 19).replace("T", " ")),
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
