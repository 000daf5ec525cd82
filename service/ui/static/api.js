// The dashboard's only door to the service: same-origin fetch with the key from sessionStorage.
// The key is sent in the Authorization header only — never in a URL, a cookie or a log.

const KEY = "dpfit.apiKey";

export function storedKey() {
  return sessionStorage.getItem(KEY);
}

export function storeKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// GET a JSON document; throws ApiError with the problem+json body on a non-2xx answer.
export async function get(path, key = storedKey()) {
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${key}`, Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return { body, next: response.headers.get("X-Next-Cursor") };
}

// Every page of a list endpoint (follows X-Next-Cursor).
export async function getAll(path) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < 100; page += 1) {
    const sep = path.includes("?") ? "&" : "?";
    const url = cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path;
    const { body, next } = await get(url);
    items.push(...body);
    if (!next) break;
    cursor = next;
  }
  return items;
}

// POST without a body (revocations); throws ApiError on a non-2xx answer.
export async function post(path, key = storedKey()) {
  const response = await fetch(path, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
  });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

// Every page of an endpoint that pages one field of an object (the ledger's `charges`): the
// first page's body with that field holding the items of all pages.
export async function getAllOf(path, field) {
  let first = null;
  let cursor = null;
  for (let page = 0; page < 100; page += 1) {
    const sep = path.includes("?") ? "&" : "?";
    const url = cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path;
    const { body, next } = await get(url);
    if (first === null) first = body;
    else first[field].push(...body[field]);
    if (!next) break;
    cursor = next;
  }
  return first;
}
