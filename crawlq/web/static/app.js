// crawlq dashboard: plain JavaScript, no build step. Polls the JSON API every 2 s and
// redraws the current page; actions POST JSON with the token header.
"use strict";

const POLL_MS = 2000;
const main = document.getElementById("main");
const statusEl = document.getElementById("status");
const tokenEl = document.getElementById("token");
tokenEl.value = localStorage.getItem("crawlq-token") || "";
document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  localStorage.setItem("crawlq-token", tokenEl.value);
  refresh();
});
tokenEl.addEventListener("change", () => localStorage.setItem("crawlq-token", tokenEl.value));

function esc(v) {
  if (v === null || v === undefined || v === "") return "-";
  return String(v).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function age(s) {
  if (s === null || s === undefined) return "-";
  const a = Math.abs(s);
  if (a >= 86400) return (s / 86400).toFixed(1) + " d";
  if (a >= 3600) return (s / 3600).toFixed(1) + " h";
  if (a >= 60) return (s / 60).toFixed(1) + " min";
  return s.toFixed(1) + " s";
}
function when(iso) { return iso ? esc(new Date(iso).toLocaleString()) : "-"; }
function headers() {
  const h = {"Accept": "application/json"};
  if (tokenEl.value) h["X-Crawlq-Token"] = tokenEl.value;
  return h;
}
async function api(path) {
  const r = await fetch("api/" + path, {headers: headers()});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
async function act(path, body) {
  const h = headers();
  h["Content-Type"] = "application/json";
  const r = await fetch("api/actions/" + path, {method: "POST", headers: h, body: JSON.stringify(body || {})});
  const out = await r.json();
  if (!r.ok) { setStatus(out.error || r.statusText, true); throw new Error(out.error); }
  setStatus("done: " + path);
  await refresh();
  return out;
}
function setStatus(text, bad) {
  statusEl.textContent = text;
  statusEl.className = bad ? "error" : "";
}
function table(cols, rows) {
  const head = cols.map((c) => `<th class="${c.num ? "num" : ""}">${esc(c.t)}</th>`).join("");
  const body = rows.map((r) => "<tr>" + cols.map((c) => `<td class="${c.num ? "num" : c.cls || ""}">${c.f(r)}</td>`).join("") + "</tr>").join("");
  return `<div class="scroll"><table><thead><tr>${head}</tr></thead><tbody>${body ||
    `<tr><td colspan="${cols.length}" class="muted">none</td></tr>`}</tbody></table></div>`;
}
const n = (k, t) => ({t: t || k, num: true, f: (r) => esc(r[k] ?? 0)});
const s = (k, t) => ({t: t || k, f: (r) => `<span class="state-${esc(r[k])}">${esc(r[k])}</span>`});
function bar(done, total, big) {
  const pct = total ? Math.round((100 * done) / total) : 0;
  return `<div class="bar ${big ? "big" : ""}" title="${pct}%"><div style="width:${pct}%"></div></div>`;
}
function chart(points) {
  if (points.length < 2) return `<p class="muted">The throughput chart fills in while this page stays open (a sample every 10 s, up to an hour).</p>`;
  const w = 600, h = 120, max = Math.max(1, ...points.map((p) => p.per_minute));
  const bw = w / points.length;
  const bars = points.map((p, i) => {
    const bh = (p.per_minute / max) * (h - 14);
    return `<rect x="${i * bw}" y="${h - bh}" width="${Math.max(1, bw - 1)}" height="${bh}"><title>${p.per_minute}/min</title></rect>`;
  }).join("");
  return `<svg class="chart" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none">${bars}<text x="4" y="11">${max.toFixed(0)} jobs/min</text></svg>`;
}
const jobCols = [
  {t: "id", num: true, f: (j) => `<a href="#/jobs/${j.id}">${j.id}</a>`},
  {t: "queue", f: (j) => esc(j.queue)}, {t: "task", f: (j) => esc(j.task)}, s("state"),
  {t: "attempts", num: true, f: (j) => `${j.attempts}/${j.max_attempts}`},
  {t: "key", f: (j) => esc(j.key)}, {t: "run at", f: (j) => when(j.run_at)},
  {t: "last error", cls: "err", f: (j) => esc(lastLine(j.last_error))},
];
function lastLine(text) {
  if (!text) return null;
  const lines = text.trim().split("\n").map((l) => l.trim()).filter(Boolean);
  return lines[lines.length - 1];
}
function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== undefined && v !== null) p.set(k, v);
  return p.toString();
}
function route() {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  return {parts: path.split("/").filter(Boolean), params: Object.fromEntries(new URLSearchParams(query || ""))};
}

const pages = {
  async overview() {
    const o = await api("overview");
    const t = o.totals;
    const cards = [["due", t.due], ["scheduled", t.scheduled], ["waiting", t.waiting], ["running", t.running],
      ["done", t.done], ["dead", t.dead], ["done / min", t.done_last_minute], ["oldest due", age(o.oldest_due_age)],
      ["workers online", o.workers_alive], ["slots", o.workers_slots], ["crawls running", o.crawls_running],
      ["blocked keys", o.keys_blocked]];
    return `<h1>Overview</h1><div class="cards">${cards.map(([l, v]) =>
      `<div class="card"><div class="n" data-count="${esc(l)}">${esc(v)}</div><div class="l">${esc(l)}</div></div>`).join("")}</div>
      <h2>Throughput (jobs done per minute, last hour)</h2>${chart(o.throughput)}
      <h2>Queues</h2>${queueTable(o.queues)}`;
  },
  async queues() {
    const q = await api("queues");
    return `<h1>Queues</h1>${queueTable(q.queues)}`;
  },
  async jobs(params, id) {
    if (id) return jobDetail(id);
    const data = await api("jobs?" + qs(params));
    const f = (k, ph) => `<input name="${k}" placeholder="${ph || k}" value="${esc(params[k] || "").replace(/^-$/, "")}">`;
    const states = ["", "pending", "running", "done", "dead", "cancelled"].map((v) =>
      `<option value="${v}" ${params.state === v ? "selected" : ""}>${v || "any state"}</option>`).join("");
    const movable = !params.state || params.state === "pending";
    return `<h1>Jobs</h1><form class="filters" id="job-filters">${f("queue")}<select name="state">${states}</select>
      ${f("task")}${f("key")}${f("crawl")}${f("limit_key", "limit key")}<button class="primary">Filter</button></form>
      ${movable ? '<div class="actions"><button data-reschedule-all>Run matching pending jobs now</button></div>' : ""}
      ${table(jobCols, data.jobs)}${more(data.next_after_id, "jobs", params)}`;
  },
  async dead(params) {
    const data = await api("dead?" + qs(params));
    const cols = [...jobCols, {t: "", f: (j) => `<button data-requeue="${j.id}">Requeue</button>`}];
    return `<h1>Dead letters</h1><div class="actions"><button class="danger" data-requeue-all>Requeue all</button></div>
      ${table(cols, data.jobs)}${more(data.next_after_id, "dead", params)}`;
  },
  async failures() {
    const data = await api("failures");
    const groups = data.groups.map((g) => `<h2>${esc(g.exception)} <span class="muted">× ${g.count}</span></h2>` +
      table([{t: "job", num: true, f: (j) => `<a href="#/jobs/${j.id}">${j.id}</a>`}, {t: "task", f: (j) => esc(j.task)},
        {t: "queue", f: (j) => esc(j.queue)}, n("attempts"),
        {t: "traceback", cls: "err", f: (j) => `<details><summary>${esc(lastLine(j.traceback))}</summary><pre>${esc(j.traceback)}</pre></details>`}], g.jobs)).join("");
    return `<h1>Recent failures, by exception</h1>${groups || '<p class="muted">No dead jobs.</p>'}`;
  },
  async crawls(params, id) {
    if (id) return crawlDetail(id);
    const data = await api("crawls?" + qs(params));
    return `<h1>Crawls</h1>` + table([
      {t: "id", num: true, f: (c) => `<a href="#/crawls/${c.id}">${c.id}</a>`}, {t: "name", f: (c) => esc(c.name)}, s("state"),
      {t: "progress", f: (c) => bar(c.ended, c.total) + `<span class="muted">${esc(c.progress)}</span>`},
      n("pending"), n("running"), n("done"), n("dead"), n("seen"), {t: "finished", f: (c) => when(c.finished_at)},
    ], data.crawls) + more(data.next_after_id, "crawls", params);
  },
  async limits(params) {
    const data = await api("limits?" + qs(params));
    return `<h1>Limit keys</h1><p class="muted">Blocked keys first, then the busiest.</p>` + table([
      {t: "key", f: (k) => esc(k.key)}, {t: "blocked until", f: (k) => k.blocked ? `<span class="state-blocked">${when(k.blocked_until)}</span>` : "-"},
      n("running"), n("pending"), {t: "max running", num: true, f: (k) => esc(k.max_running ?? "no cap")},
      {t: "min interval", num: true, f: (k) => esc(k.min_interval) + " s"}, {t: "next start", f: (k) => when(k.next_start)},
    ], data.limits) + (data.next_after ? `<p><a href="#/limits?after=${encodeURIComponent(data.next_after)}">next page</a></p>` : "");
  },
  async workers() {
    const data = await api("workers");
    return `<h1>Workers</h1>` + table([
      {t: "id", f: (w) => esc(w.id)}, {t: "host", f: (w) => esc(w.host)}, s("state"), n("concurrency", "slots"), n("running"),
      n("done"), n("failed"), {t: "memory", num: true, f: (w) => w.rss_bytes ? (w.rss_bytes / 1048576).toFixed(1) + " MiB" : "-"},
      {t: "heartbeat", num: true, f: (w) => age(w.last_heartbeat_age) + " ago"},
    ], data.workers);
  },
};
pages[""] = pages.overview;

function queueTable(queues) {
  return table([{t: "queue", f: (q) => `<a href="#/jobs?queue=${encodeURIComponent(q.queue)}">${esc(q.queue)}</a>`},
    n("due"), n("scheduled"), n("waiting"), n("held"), n("running"), n("done"), n("dead"), n("cancelled"),
    {t: "oldest due", num: true, f: (q) => age(q.oldest_due_age)}, n("done_last_minute", "done/min")], queues);
}
function more(next, page, params) {
  return next ? `<p><a href="#/${page}?${qs({...params, after_id: next})}">next page</a></p>` : "";
}
async function jobDetail(id) {
  const j = await api("jobs/" + encodeURIComponent(id));
  const fields = ["id", "queue", "task", "state", "attempts", "max_attempts", "priority", "key", "crawl_id", "limit_key",
    "run_at", "worker_id", "lease_expires_at", "dead_reason", "created_at", "started_at", "finished_at"];
  const buttons = (j.state === "dead" ? `<button data-requeue="${j.id}">Requeue</button>` : "") +
    (j.state === "pending" ? `<button data-reschedule="${j.id}">Run now</button><button data-reschedule-at="${j.id}">Reschedule…</button>` : "") +
    (j.state === "pending" || j.state === "running" ? `<button class="danger" data-cancel="${j.id}">Cancel</button>` : "") +
    (["done", "dead", "cancelled"].includes(j.state) ? `<button class="danger" data-delete="${j.id}">Delete</button>` : "");
  return `<h1>Job ${esc(j.id)}</h1><div class="actions">${buttons}</div><dl class="detail">${fields.map((f) =>
    `<dt>${f}</dt><dd>${esc(j[f])}</dd>`).join("")}</dl><h2>Arguments</h2><pre>${esc(JSON.stringify({args: j.args, kwargs: j.kwargs}, null, 2))}</pre>` +
    (j.result !== null ? `<h2>Result</h2><pre>${esc(JSON.stringify(j.result, null, 2))}</pre>` : "") +
    (j.last_error ? `<h2>Last error</h2><pre>${esc(j.last_error)}</pre>` : "");
}
async function crawlDetail(id) {
  const c = await api("crawls/" + encodeURIComponent(id));
  const open = c.state === "running" || c.state === "paused";
  const buttons = (c.state === "running" ? `<button data-crawl="pause">Pause</button>` : "") +
    (c.state === "paused" ? `<button class="primary" data-crawl="resume">Resume</button>` : "") +
    (open ? `<button class="danger" data-crawl="cancel">Cancel</button>` : "");
  const cards = [["state", c.state], ["pending", c.pending], ["running", c.running], ["done", c.done], ["dead", c.dead],
    ["cancelled", c.cancelled], ["seen", c.seen]];
  return `<h1>Crawl ${esc(c.id)}: ${esc(c.name)}</h1><div class="actions" data-crawl-id="${esc(c.id)}">${buttons}</div>
    ${bar(c.ended, c.total, true)}<p>${esc(c.progress)} ended</p>
    <div class="cards">${cards.map(([l, v]) => `<div class="card"><div class="n" id="crawl-${l}">${esc(v)}</div><div class="l">${l}</div></div>`).join("")}</div>
    <h2>Details</h2><dl class="detail"><dt>created</dt><dd>${when(c.created_at)}</dd><dt>finished</dt><dd>${when(c.finished_at)}</dd>
    <dt>meta</dt><dd>${esc(JSON.stringify(c.meta))}</dd></dl>
    <p><a href="#/jobs?crawl=${esc(c.id)}">its jobs</a> · <a href="#/dead?crawl=${esc(c.id)}">its dead jobs</a></p>`;
}

main.addEventListener("click", async (e) => {
  const b = e.target.closest("button");
  if (!b) return;
  if (b.dataset.requeue) await act("jobs/requeue", {ids: [Number(b.dataset.requeue)]});
  else if (b.dataset.cancel) await act("jobs/cancel", {ids: [Number(b.dataset.cancel)]});
  else if (b.dataset.delete) {
    if (confirm(`Delete job ${b.dataset.delete} for good?`)) await act("jobs/delete", {ids: [Number(b.dataset.delete)]});
  } else if (b.dataset.reschedule) await act("jobs/reschedule", {ids: [Number(b.dataset.reschedule)]});
  else if (b.dataset.rescheduleAt) {
    const when = prompt("Run in how many seconds, or at what time (ISO 8601, UTC: 2030-01-31T09:30:00Z)?", "3600");
    if (when === null || when.trim() === "") return;
    const body = /^\d+(\.\d+)?$/.test(when.trim()) ? {delay: Number(when)} : {at: when.trim()};
    await act("jobs/reschedule", {ids: [Number(b.dataset.rescheduleAt)], ...body});
  } else if ("rescheduleAll" in b.dataset) {
    const {params} = route();
    const filter = {};
    for (const k of ["queue", "task", "key", "crawl", "limit_key"]) if (params[k]) filter[k] = params[k];
    if (confirm("Make every matching pending job due now (up to 10,000 at a time)?")) await act("jobs/reschedule", {filter});
  } else if ("requeueAll" in b.dataset) {
    if (confirm("Requeue every dead job (up to 10,000 at a time)?")) await act("jobs/requeue", {filter: {state: "dead"}});
  }
  else if (b.dataset.crawl === "cancel" && !confirm("Cancel this crawl? Its pending jobs are cancelled.")) return;
  else if (b.dataset.crawl) await act(`crawls/${b.closest("[data-crawl-id]").dataset.crawlId}/${b.dataset.crawl}`);
});
main.addEventListener("submit", (e) => {
  if (e.target.id !== "job-filters") return;
  e.preventDefault();
  const params = Object.fromEntries(new FormData(e.target));
  location.hash = "#/jobs?" + qs(params);
});

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  const {parts, params} = route();
  const page = pages[parts[0] || ""] || pages.overview;
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.getAttribute("href") === "#/" + (parts[0] || ""));
  }
  try {
    const html = await page(params, parts[1]);
    const focused = document.activeElement && main.contains(document.activeElement) && document.activeElement.tagName === "INPUT";
    if (!focused) main.innerHTML = html;
    setStatus("updated " + new Date().toLocaleTimeString());
  } catch (err) {
    setStatus(err.message, true);
  } finally {
    busy = false;
  }
}
window.addEventListener("hashchange", refresh);
refresh();
setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
