// ATSProxy web view: the traffic list, its filters, the detail pane and the per-host summary, over the JSON API
// (docs/web.md). Plain JavaScript, no framework, no build step.
//
// The list is a window onto the capture, never the whole session: at most WINDOW rows are held (in `rows`, oldest
// first, and in the table). Scrolling to the top loads the page before the oldest row; scrolling down, when the
// window is not at the newest end, loads the page after the newest. New exchanges arrive on a Server-Sent Events
// stream and are appended while the window is at the newest end; the view follows them while the list is
// scrolled to the bottom and stops following as soon as the user scrolls up. A `resync` event (the page fell
// behind) reloads the newest page.
"use strict";

const WINDOW = 600;
const PAGE = 200;
const state = {
  info: null,
  rows: [],            // row objects, oldest first
  atNewest: true,      // the window reaches the newest matching exchange
  hasOlder: false,     // more matching exchanges before the oldest row
  follow: true,        // keep the newest row in view
  loading: false,
  selectedId: null,
  stream: null,
  filterKey: "",
  generation: 0,       // bumped on every filter change, so late answers for old filters are dropped
  count: 0,            // matching exchanges, as last counted plus those streamed since
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/// A change (the rules API): JSON in and out; the server takes only same-origin JSON POSTs.
async function apiPost(path, body) {
  const response = await fetch(path, {
    method: "POST", cache: "no-store", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  let answer = null;
  try { answer = await response.json(); } catch (_) { answer = null; }
  if (!response.ok) throw new Error(`${response.status}: ${(answer && answer.error) || response.statusText}`);
  return answer;
}

async function api(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) {
    let message = response.statusText;
    try { message = (await response.json()).error || message; } catch (_) { /* not JSON */ }
    throw new Error(`${response.status}: ${message}`);
  }
  return response.json();
}

// ---------------------------------------------------------------- formatting

const VERDICT_TEXT = {
  ok: "ok", blocked: "BLOCKED", violation: "VIOLATION", notJudged: "not judged", failed: "FAILED",
};

function verdictBadge(verdict) {
  return el("span", { class: `verdict v-${verdict}`, text: VERDICT_TEXT[verdict] || verdict });
}

/// The proxy's own set-up site (action `proxySite`): its pages, not the app's traffic.
function ownBadge() {
  return el("span", { class: "verdict v-own", text: "proxy's own", title: "answered by the proxy's set-up site" });
}

/// A rule that acted on the exchange: its id, the action and note in the tooltip.
function ruleBadge(rule) {
  return el("span", {
    class: "rule-badge", "data-rule": rule.id, text: rule.id,
    title: `rule [${rule.id}] ${rule.action}${rule.note ? ": " + rule.note : ""} (at the ${rule.point} point)`,
  });
}

/// A replay's row: which captured exchange it sent again.
function replayBadge(original, short = false) {
  return el("span", { class: "replay-badge", text: short ? `↻ #${original}` : `replay of #${original}`,
    title: `replay of #${original}: sent again through the proxy` });
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function formatDuration(ms) {
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 10000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

function formatTime(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function isProblem(row) {
  return row.verdict === "blocked" || row.verdict === "violation" || row.verdict === "failed" ||
    (row.status || 0) >= 400 || !!row.interruption;
}

function protocolLabel(row) {
  if (row.kind === "tunnel") return "tunnel";
  if (row.kind === "refusedHandshake") return "TLS (refused)";
  const p = row.protocol;
  if (p === "HTTP/2.0") return "HTTP/2";
  if (p === "UPGRADED") return "upgraded";
  return p;
}

// ---------------------------------------------------------------- filters

function filterParams() {
  const params = new URLSearchParams();
  const text = $("filter-text").value.trim();
  const host = $("filter-host").value.trim();
  if (text) params.set("text", text);
  if (host) params.set("host", host);
  if ($("filter-verdict").value) params.set("verdict", $("filter-verdict").value);
  if ($("filter-status").value) params.set("status", $("filter-status").value);
  if ($("filter-method").value) params.set("method", $("filter-method").value);
  if ($("filter-problems").getAttribute("aria-pressed") === "true") params.set("problems", "1");
  return params;
}

let filterTimer = null;
function filtersChanged() {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(() => {
    const key = filterParams().toString();
    if (key === state.filterKey) return;
    reload();
  }, 200);
}

// ---------------------------------------------------------------- the list

function rowElement(row) {
  const problem = isProblem(row);
  const tr = el("tr", {
    class: `row${problem ? " problem" : ""}${row.id === state.selectedId ? " selected" : ""}`,
    "data-id": row.id, "data-verdict": row.verdict,
    "aria-selected": row.id === state.selectedId ? "true" : "false",
  });
  const title = `${row.method} ${row.url}` + (row.note ? `\n${row.note}` : "") +
    (row.interruption ? `\nINCOMPLETE: ${row.interruption}` : "");
  tr.append(
    el("td", { class: "c-time mono", text: formatTime(row.time) }),
    el("td", { class: "c-method", text: row.method }),
    el("td", { class: "c-host", text: row.host, title: row.host }),
    el("td", { class: "c-path", title }, row.replayOf ? replayBadge(row.replayOf, true) : null, row.path || ""),
    el("td", { class: "c-status", text: row.status ?? "—" }),
    el("td", { class: "c-proto", text: protocolLabel(row) }),
    el("td", { class: "c-verdict" }, row.action === "proxySite" ? ownBadge() : verdictBadge(row.verdict),
      ...(row.rules || []).map(ruleBadge)),
    el("td", { class: "c-errors mono", text: row.errors.join(" "), title: row.errors.join(" ") }),
    el("td", { class: "c-size", text: formatBytes(row.responseBytes) }),
    el("td", { class: "c-dur", text: formatDuration(row.durationMs) }),
  );
  tr.addEventListener("click", () => { select(row.id); showDetail(row.id); });
  return tr;
}

function render() {
  const body = $("rows");
  body.replaceChildren(...state.rows.map(rowElement));
  $("list-empty").hidden = state.rows.length > 0 || held.list.length > 0;
}

function scrollToNewest() {
  const list = $("list");
  list.scrollTop = list.scrollHeight;
}

async function reload() {
  const generation = ++state.generation;
  const params = filterParams();
  state.filterKey = params.toString();
  closeStream();
  state.loading = true;
  try {
    const info = await api("/api/info");
    params.set("limit", PAGE);
    const page = await api(`/api/exchanges?${params}`);
    if (generation !== state.generation) return;
    state.rows = page.exchanges.slice().reverse();
    state.hasOlder = page.more;
    state.atNewest = true;
    state.follow = true;
    render();
    scrollToNewest();
    const newest = state.rows.length ? state.rows[state.rows.length - 1].id : 0;
    openStream(Math.max(newest, info.exchanges));
    updateCount();
    updateHarLink();
  } catch (error) {
    showListError(error);
  } finally {
    if (generation === state.generation) state.loading = false;
  }
}

function showListError(error) {
  $("list-empty").hidden = false;
  $("list-empty").textContent = `Cannot load the list: ${error.message}`;
}

function showCount() {
  const count = state.count;
  $("count").textContent = `${count.toLocaleString()} exchange${count === 1 ? "" : "s"}` +
    (filterParams().toString() ? (count === 1 ? " matches" : " match") : "");
}

/// The count of matching exchanges, asked for when the filter changes (at once) or the stream skipped rows (at most
/// every two seconds: a filtered count reads the whole capture); streamed rows add to it as they come.
let countTimer = null;
let lastCount = 0;
function updateCount(skipped = false) {
  if (skipped && countTimer !== null) return;
  clearTimeout(countTimer);
  countTimer = setTimeout(async () => {
    countTimer = null;
    lastCount = Date.now();
    const params = filterParams();
    try {
      const { count } = await api(`/api/exchanges/count?${params}`);
      if (params.toString() !== filterParams().toString()) return;
      state.count = count;
      showCount();
    } catch (error) {
      $("count").textContent = "";
    }
  }, skipped ? Math.max(50, 2000 - (Date.now() - lastCount)) : 50);
}

function updateHarLink() {
  const link = $("har-link");
  link.hidden = !(state.info && state.info.features && state.info.features.har);
  link.href = `/api/har?${filterParams()}`;
}

async function loadOlder() {
  if (state.loading || !state.hasOlder || !state.rows.length) return;
  const generation = state.generation;
  state.loading = true;
  try {
    const params = filterParams();
    params.set("before", state.rows[0].id);
    params.set("limit", PAGE);
    const page = await api(`/api/exchanges?${params}`);
    if (generation !== state.generation) return;
    const list = $("list");
    const before = list.scrollHeight;
    const older = page.exchanges.slice().reverse();
    state.rows = older.concat(state.rows);
    state.hasOlder = page.more;
    if (state.rows.length > WINDOW) {
      state.rows = state.rows.slice(0, WINDOW);
      state.atNewest = false;
      state.follow = false;
    }
    render();
    list.scrollTop += list.scrollHeight - before;
  } catch (error) {
    showListError(error);
  } finally {
    if (generation === state.generation) state.loading = false;
  }
}

async function loadNewer() {
  if (state.loading || state.atNewest || !state.rows.length) return;
  const generation = state.generation;
  state.loading = true;
  try {
    const params = filterParams();
    params.set("after", state.rows[state.rows.length - 1].id);
    params.set("limit", PAGE);
    const page = await api(`/api/exchanges?${params}`);
    if (generation !== state.generation) return;
    appendRows(page.exchanges);
    if (!page.more) state.atNewest = true;
  } catch (error) {
    showListError(error);
  } finally {
    if (generation === state.generation) state.loading = false;
  }
}

/// Adds rows newer than the window's newest (oldest first), dropping the oldest beyond the window.
function appendRows(rows) {
  const newest = state.rows.length ? state.rows[state.rows.length - 1].id : 0;
  const fresh = rows.filter((row) => row.id > newest);
  if (!fresh.length) return;
  const list = $("list");
  const body = $("rows");
  for (const row of fresh) body.append(rowElement(row));
  state.rows = state.rows.concat(fresh);
  const excess = state.rows.length - WINDOW;
  if (excess > 0) {
    const heightBefore = list.scrollHeight;
    state.rows = state.rows.slice(excess);
    for (let i = 0; i < excess; i++) body.firstElementChild.remove();
    state.hasOlder = true;
    if (!state.follow) list.scrollTop -= heightBefore - list.scrollHeight;
  }
  $("list-empty").hidden = true;
  if (state.follow) scrollToNewest();
}

function onScroll() {
  const list = $("list");
  const fromBottom = list.scrollHeight - list.scrollTop - list.clientHeight;
  state.follow = state.atNewest && fromBottom < 24;
  if (list.scrollTop < 150) loadOlder();
  if (fromBottom < 150) loadNewer();
}

// ---------------------------------------------------------------- live stream

function openStream(after) {
  const params = filterParams();
  params.set("after", after);
  const source = new EventSource(`/api/stream?${params}`);
  state.stream = source;
  const generation = state.generation;
  source.addEventListener("exchanges", (event) => {
    if (generation !== state.generation) return;
    const { exchanges } = JSON.parse(event.data);
    if (state.atNewest) appendRows(exchanges);
    // The rows are exactly the new matches: the count goes up by them, without asking the server to count again
    // (a filtered count reads the whole capture: most of a second for a million exchanges).
    state.count += exchanges.length;
    showCount();
    setLive(true);
  });
  source.addEventListener("resync", () => {
    if (generation !== state.generation) return;
    updateCount(true);
    if (state.follow) refreshNewest();
    else state.atNewest = false;
  });
  source.addEventListener("held", () => refreshHeld());
  source.addEventListener("hello", () => { setLive(true); refreshHeld(); });
  source.addEventListener("error", () => setLive(false));
}

/// After a `resync` (more arrived than the stream sends at once): the newest page replaces the window, at most
/// twice a second however often the stream asks; the stream itself goes on.
let refreshPending = false;
let lastRefresh = 0;
function refreshNewest() {
  if (refreshPending) return;
  refreshPending = true;
  const generation = state.generation;
  setTimeout(async () => {
    lastRefresh = Date.now();
    try {
      const params = filterParams();
      params.set("limit", PAGE);
      const page = await api(`/api/exchanges?${params}`);
      if (generation !== state.generation || !state.follow) return;
      const rows = page.exchanges.slice().reverse();
      const newest = rows.length ? rows[rows.length - 1].id : 0;
      // Rows the stream delivered while this page was on its way are newer than the page: keep them, or they
      // would be lost (the stream has moved past them).
      const streamed = state.rows.filter((row) => row.id > newest);
      const all = rows.concat(streamed);
      state.rows = all.slice(-WINDOW);
      state.hasOlder = page.more || all.length > WINDOW;
      state.atNewest = true;
      render();
      scrollToNewest();
    } catch (error) {
      showListError(error);
    } finally {
      refreshPending = false;
    }
  }, Math.max(0, 500 - (Date.now() - lastRefresh)));
}

function closeStream() {
  if (state.stream) state.stream.close();
  state.stream = null;
}

function setLive(on) {
  const live = $("live");
  const following = state.info && state.info.live;
  live.className = on ? "live-on" : "live-off";
  live.textContent = on ? (following ? "● live" : "● watching file") : "○ disconnected";
}

// ---------------------------------------------------------------- selection and keyboard

function select(id) {
  state.selectedId = id;
  for (const tr of $("rows").querySelectorAll("tr.row.selected")) {
    tr.classList.remove("selected");
    tr.setAttribute("aria-selected", "false");
  }
  const tr = $("rows").querySelector(`tr[data-id="${id}"]`);
  if (tr) {
    tr.classList.add("selected");
    tr.setAttribute("aria-selected", "true");
    tr.scrollIntoView({ block: "nearest" });
  }
}

function moveSelection(step) {
  if (!state.rows.length) return;
  let index = state.rows.findIndex((row) => row.id === state.selectedId);
  if (index < 0) index = step > 0 ? -1 : state.rows.length;
  index = Math.max(0, Math.min(state.rows.length - 1, index + step));
  select(state.rows[index].id);
  if (index === state.rows.length - 1) state.follow = state.atNewest;
  else state.follow = false;
}

function onKey(event) {
  const typing = event.target.matches("input, select, textarea");
  if (event.key === "/" && !typing) {
    event.preventDefault();
    showTab("traffic");
    $("filter-text").focus();
    $("filter-text").select();
    return;
  }
  if (event.key === "Escape") {
    if (typing) event.target.blur();
    else closeDetail();
    $("list").focus();
    return;
  }
  if (typing || $("traffic").hidden) return;
  if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    event.preventDefault();
    moveSelection(event.key === "ArrowDown" ? 1 : -1);
  } else if (event.key === "End") {
    // Back to the newest row, following again.
    event.preventDefault();
    if (state.atNewest) {
      state.follow = true;
      scrollToNewest();
    } else {
      reload();
    }
  } else if (event.key === "Enter" && state.selectedId !== null && !event.target.matches("button, a, summary")) {
    event.preventDefault();
    showDetail(state.selectedId);
  }
}

// ---------------------------------------------------------------- detail pane

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch (_) {
    const area = el("textarea", {}, text);
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  const label = button.textContent;
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = label; }, 1200);
}

function copyButton(text, label = "Copy") {
  const button = el("button", { class: "copy", type: "button", text: label });
  button.addEventListener("click", () => copyText(text, button));
  return button;
}

function section(title, open, ...content) {
  return el("details", { open: open || undefined }, el("summary", {}, el("h3", { text: title })), ...content);
}

/// Values that are sentences, not codes: shown in the text font.
const PROSE = new Set(["Why", "Decided by", "Trust", "Failure"]);

function kvTable(pairs) {
  return el("table", { class: "kv" }, el("tbody", {},
    ...pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
      .map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { class: PROSE.has(k) ? "prose" : "mono" }, v)))));
}

function headBlock(label, head) {
  if (!head) return null;
  const text = [head.line, ...head.headers.map(([name, value]) => `${name}: ${value}`)].join("\n");
  return el("div", {}, el("div", { class: "leg", text: label }), el("pre", { class: "head" }, text));
}

function tlsBlock(label, leg) {
  if (!leg) return null;
  return el("div", {}, el("div", { class: "leg", text: label }), kvTable([
    ["Version", leg.version], ["Cipher suite", leg.cipherSuite], ["ALPN", leg.alpn], ["SNI", leg.serverName],
    ["Resumed", leg.resumed ? "yes" : "no"],
  ]));
}

function chainBlock(handshake) {
  if (!handshake) return null;
  const parts = [];
  const trust = handshake.trust ? (handshake.trust.kind === "untrusted"
    ? `untrusted: ${JSON.stringify(handshake.trust.failure)}` : handshake.trust.kind) : undefined;
  parts.push(kvTable([
    ["Negotiated", [handshake.versionName, handshake.cipherSuiteName].filter(Boolean).join(", ")],
    ["Key exchange", handshake.keyExchangeGroup], ["Trust", trust],
    ["Failure", handshake.failure ? JSON.stringify(handshake.failure) : undefined],
  ]));
  (handshake.chain || []).forEach((cert, index) => {
    const validity = cert.notBefore !== undefined
      ? `${new Date(dateSeconds(cert.notBefore) * 1000).toISOString().slice(0, 10)} → ` +
        `${new Date(dateSeconds(cert.notAfter) * 1000).toISOString().slice(0, 10)}` : undefined;
    parts.push(el("div", { class: "leg", text: `Certificate ${index}${index === 0 ? " (leaf)" : ""}` }), kvTable([
      ["Subject", cert.subject], ["Issuer", cert.issuer],
      ["Key", `${cert.keyType} ${cert.keyBits} bits${cert.curve ? " " + cert.curve : ""}`],
      ["Signature hash", cert.signatureHash], ["Validity", validity],
      ["SANs", [...(cert.dnsNames || []), ...(cert.ipAddresses || [])].join(", ")],
      ["Self-signed / CA", `${cert.isSelfSigned ? "self-signed" : "issued"}, ${cert.isCA ? "CA" : "not a CA"}`],
      ["SHA-256", cert.sha256Fingerprint],
    ]));
  });
  return el("div", {}, ...parts);
}

/// Dates come as JSONEncoder's default: seconds since 2001-01-01.
function dateSeconds(value) {
  return typeof value === "number" ? value + 978307200 : Date.parse(value) / 1000;
}

function hexDump(bytes, limit = 4096) {
  const lines = [];
  const n = Math.min(bytes.length, limit);
  for (let offset = 0; offset < n; offset += 16) {
    const chunk = bytes.slice(offset, Math.min(offset + 16, n));
    const hex = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${offset.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > limit) lines.push(`… ${bytes.length - limit} more bytes`);
  return lines.join("\n");
}

async function decoded(bytes, encoding, truncated) {
  const kind = (encoding || "").toLowerCase();
  if (!kind || kind === "identity") return { bytes, note: "" };
  if (truncated || !("DecompressionStream" in window) || !["gzip", "deflate"].includes(kind)) {
    return { bytes, note: `encoded (${encoding}): shown as captured` };
  }
  try {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream(kind));
    return { bytes: new Uint8Array(await new Response(stream).arrayBuffer()), note: `decoded from ${encoding}` };
  } catch (_) {
    return { bytes, note: `encoded (${encoding}), could not be decoded: shown as captured` };
  }
}

function bodyBlock(id, direction, info) {
  if (!info) return null;
  const holder = el("div", {});
  const facts = `${formatBytes(info.size)}${info.truncated ? `, cut: ${formatBytes(info.kept)} kept` : ""}` +
    `${info.contentType ? ` · ${info.contentType}` : ""}`;
  const label = direction === "request" ? "Request" : "Response";
  holder.append(el("div", { class: "leg", text: `${label} body: ${facts}` }));
  if (info.kept === 0) {
    holder.append(el("div", { class: "sub", text: info.size ? "not kept (--capture-bodies 0)" : "empty" }));
    return holder;
  }
  const url = `/api/exchanges/${id}/body/${direction}`;
  const type = (info.contentType || "").split(";")[0].trim().toLowerCase();
  const download = el("a", { href: url, download: `exchange-${id}-${direction}.bin`, text: "Download" });
  const tools = el("div", { class: "body-tools" }, download);
  const view = el("div", {});
  holder.append(tools, view);
  if (type.startsWith("image/") && type !== "image/svg+xml" && !info.contentEncoding) {
    view.append(el("img", { class: "preview", src: url, alt: `${direction} body image` }));
    return holder;
  }
  fetch(url, { cache: "no-store" }).then((r) => r.arrayBuffer()).then(async (buffer) => {
    const raw = new Uint8Array(buffer);
    const { bytes, note } = await decoded(raw, info.contentEncoding, info.truncated);
    if (note) tools.append(el("span", { class: "sub", text: note }));
    let text = null;
    try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch (_) { text = null; }
    const showHex = () => view.replaceChildren(el("pre", {}, hexDump(bytes)));
    if (text === null || /[\u0000-\u0008\u000e-\u001f]/.test(text.slice(0, 2048))) {
      showHex();
      return;
    }
    let shown = text;
    if (type.includes("json") || /^\s*[{[]/.test(text)) {
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { shown = text; }
    }
    const limit = 200000;
    view.replaceChildren(el("pre", {}, shown.length > limit ? shown.slice(0, limit) + "\n… (cut here)" : shown));
    const hex = el("button", { class: "copy", type: "button", text: "Hex" });
    hex.addEventListener("click", showHex);
    tools.append(hex);
  }).catch((error) => {
    view.replaceChildren(el("div", { class: "sub", text: `Cannot load the body: ${error.message}` }));
  });
  return holder;
}

function violationBlock(v) {
  const block = el("div", { class: `violation${v.kind === "unreachable" ? "" : ""}` },
    el("div", {}, el("strong", { text: `${v.urlError} ${v.urlErrorName}` }),
      v.sslError !== undefined ? ` / ${v.sslError} ${v.sslErrorName}` : ""),
    el("div", { text: v.explanation }),
    el("div", { class: "leg", text: "The app's error" }),
    el("pre", { class: "app-error" }, v.appError),
    el("div", { class: "leg", text: "Fix" }),
    el("div", { class: "fix-summary", text: v.fix }));
  if (v.fixPlist) {
    block.append(
      el("div", { class: "body-tools" }, el("span", { class: "sub", text: "Paste inside NSAppTransportSecurity:" }),
        copyButton(v.fixPlist, "Copy plist")),
      el("pre", { class: "fix-plist" }, v.fixPlist));
  }
  for (const note of v.notes || []) block.append(el("div", { class: "sub", text: note }));
  return block;
}

function traceBlock(records, truncated) {
  if (!records.length) return el("div", { class: "sub", text: "No trace records for this connection." });
  const text = records.map((r) => {
    const fields = r.fields.map(([k, v]) => `    ${k}: ${String(v).replace(/\n/g, "\n        ")}`).join("\n");
    return `${formatTime(r.time)} ${r.title}: ${r.subject}${fields ? "\n" + fields : ""}`;
  }).join("\n");
  return el("div", {}, el("pre", { class: "trace" }, text),
    truncated ? el("div", { class: "sub", text: "More records than shown." }) : null);
}

let detailGeneration = 0;
async function showDetail(id) {
  const generation = ++detailGeneration;
  held.editing = null;
  const pane = $("detail");
  let d;
  try {
    d = await api(`/api/exchanges/${id}`);
  } catch (error) {
    pane.replaceChildren(el("p", { class: "placeholder", text: `Cannot load exchange ${id}: ${error.message}` }));
    openDetail();
    return;
  }
  if (generation !== detailGeneration) return;
  const x = d.exchange;
  const parts = [];
  const close = el("button", { class: "copy close", type: "button", text: "Close (Esc)" });
  close.addEventListener("click", () => { closeDetail(); $("list").focus(); });
  parts.push(close, el("h2", {}, `${x.method} ${x.url}`));
  parts.push(el("div", {}, verdictBadge(x.verdict), " ",
    `${x.status ?? "no response"} · ${protocolLabel(x)} · ${formatBytes(x.responseBytes)} · ` +
    `${formatDuration(x.durationMs)}${x.action ? ` · ${x.action}` : ""}`,
    x.errors.length ? el("span", { class: "mono", text: `  ${x.errors.join(" ")}` }) : null));
  if (x.interruption) parts.push(el("div", { class: "sub", text: `INCOMPLETE: ${x.interruption}` }));
  if (x.note) parts.push(el("div", { class: "sub", text: x.note }));
  if (x.replayOf) {
    parts.push(el("div", { class: "replay-of" }, replayBadge(x.replayOf), " ",
      el("button", { id: "show-original", type: "button", text: `Show #${x.replayOf}`,
        onclick: () => { select(x.replayOf); showDetail(x.replayOf); } }), " ",
      el("button", { id: "compare-original", type: "button", text: "Compare with original",
        onclick: () => showCompare(x.replayOf, x.id) })));
  }
  parts.push(compareTools(x));
  if (replayEnabled() && d.request) parts.push(section("Replay", true, replayTools(x, d)));
  if (x.rules && x.rules.length) {
    parts.push(section("Rules that acted", true, el("ul", { class: "applied-rules" }, ...x.rules.map((r) =>
      el("li", {}, ruleBadge(r), ` ${r.action}${r.note ? ": " + r.note : ""} `,
        el("span", { class: "sub", text: `(at the ${r.point} point)` })))),
      el("div", { class: "sub", text: "The heads below show the exchange before and after the rules changed it." })));
  }

  const decision = [];
  if (d.decision) {
    decision.push(kvTable([["Decided by", d.decision.decidedBy || "ATS defaults (no entry applies)"],
      ["Why", d.decision.reason]]));
    for (const note of d.decision.notes) decision.push(el("div", { class: "sub", text: note }));
  } else {
    decision.push(el("div", { class: "sub", text: "Not judged (ATS off, or a tunnel the proxy did not intercept)." }));
  }
  for (const v of d.violations) decision.push(violationBlock(v));
  const count = d.violations.length;
  const violations = count ? ` · ${count} violation${count > 1 ? "s" : ""}` : "";
  parts.push(section(`ATS decision${violations}`, true, ...decision));

  parts.push(section("Headers", true,
    headBlock(d.forwardedRequest ? "Request (original, from the client)" : "Request (from the client)", d.request),
    headBlock("Request (changed, as sent upstream)", d.forwardedRequest),
    headBlock(d.clientResponse ? "Response (original, from the upstream)" : "Response (from the upstream)", d.response),
    headBlock(d.response ? "Response (changed, as the client got it)" : "Response (answered by the proxy)",
      d.clientResponse),
    !d.request && !d.response && !d.clientResponse
      ? el("div", { class: "sub", text: "No HTTP heads: a handshake or a tunnel." }) : null));

  parts.push(section("Bodies", true,
    bodyBlock(x.id, "request", d.requestBody), bodyBlock(x.id, "response", d.responseBody),
    !d.requestBody && !d.responseBody ? el("div", { class: "sub", text: "No bodies captured." }) : null));

  const c = d.connection;
  parts.push(section("TLS", false,
    c ? kvTable([["Connection", `#${c.id}`], ["Client", c.clientAddress]]) : null,
    tlsBlock("Client ↔ proxy", c && c.clientTLS),
    tlsBlock("Proxy ↔ upstream", c && c.upstreamTLS),
    chainBlock(c && c.upstreamHandshake),
    !c || (!c.clientTLS && !c.upstreamTLS)
      ? el("div", { class: "sub", text: "No TLS on this exchange's legs." }) : null));

  if (rulesEnabled()) parts.push(section("Make a rule from this exchange", false, ruleMaker(x)));
  if (breakpointsEnabled() && rulesEnabled()) parts.push(breakMaker(x));
  parts.push(section("Trace (CFNetwork diagnostics)", true, traceBlock(d.trace, d.traceTruncated)));
  parts.push(section("Copy as curl", true,
    el("div", { class: "body-tools" }, copyButton(d.curl, "Copy curl")), el("pre", { class: "curl" }, d.curl)));
  if (d.timings) {
    const t = d.timings;
    const ms = (a) => (a === undefined || a === null ? undefined : `${((a - t.started) * 1000).toFixed(1)} ms`);
    parts.push(section("Timings", false, kvTable([["Started", formatTime(t.started)],
      ["Request sent", ms(t.requestSent)], ["First response byte", ms(t.firstResponseByte)], ["Ended", ms(t.ended)]])));
  }
  pane.replaceChildren(...parts);
  pane.scrollTop = 0;
  openDetail();
}

// ---------------------------------------------------------------- held exchanges (breakpoints)
//
// The exchanges breakpoints hold are listed above the traffic rows, marked HELD; the oldest opens in the editor
// (the detail pane) unless one is open already. The stream's `held` event (every hold, release, removal) reloads
// the list; the editor is drawn once per exchange, so an edit in progress survives the reloads. A countdown shows
// when the proxy lets the exchange go on unchanged (its deadline, on the proxy's clock).

const held = { list: [], editing: null, seen: new Set(), clockSkew: 0, timer: null, asked: 0 };

function breakpointsEnabled() {
  return !!(state.info && state.info.features && state.info.features.breakpoints);
}

/// Reads the held list again; opens the editor on an exchange held since the last look (or, with `openNext`, on
/// the oldest) unless one is being edited.
async function refreshHeld(openNext = false) {
  if (!breakpointsEnabled()) return;
  const mine = ++held.asked;
  let answer;
  try { answer = await api("/api/held"); } catch (_) { return; }
  if (mine !== held.asked) return;
  held.list = answer.held;
  held.clockSkew = answer.now - Date.now() / 1000;
  renderHeld();
  const editing = held.editing;
  if (editing !== null && !held.list.some((h) => h.id === editing)) {
    const note = $("held-message");
    if (note && !note.dataset.final) note.textContent = "No longer held: released, timed out, or its client went.";
    for (const b of document.querySelectorAll("#held-editor button.held-action")) b.disabled = true;
    held.editing = null;
  }
  const fresh = held.list.filter((h) => !held.seen.has(h.id));
  for (const h of fresh) held.seen.add(h.id);
  if (held.editing === null && held.list.length && (fresh.length || openNext)) {
    showHeld((fresh[0] || held.list[0]).id);
  }
  if (held.list.length && !held.timer) held.timer = setInterval(tickHeld, 500);
  if (!held.list.length && held.timer) { clearInterval(held.timer); held.timer = null; }
}

function secondsLeft(h) {
  return Math.max(0, Math.ceil(h.deadline - (Date.now() / 1000 + held.clockSkew)));
}

function tickHeld() {
  for (const node of document.querySelectorAll("[data-held-deadline]")) {
    const left = secondsLeft({ deadline: Number(node.dataset.heldDeadline) });
    node.textContent = `${left} s`;
    node.classList.toggle("soon", left <= 10);
  }
}

function countdown(h) {
  return el("span", { class: "held-countdown mono", "data-held-deadline": h.deadline, text: `${secondsLeft(h)} s`,
    title: "then it goes on unchanged (--breakpoint-timeout)" });
}

function renderHeld() {
  $("held-rows").replaceChildren(...held.list.map((h) => {
    let host = h.url, path = "";
    try { const u = new URL(h.url); host = u.host; path = u.pathname + u.search; } catch (_) { /* not a URL */ }
    const tr = el("tr", { class: `row held-row${h.id === held.editing ? " selected" : ""}`, "data-held": h.id },
      el("td", { class: "c-time mono", text: formatTime(h.heldAt) }),
      el("td", { class: "c-method", text: h.method }),
      el("td", { class: "c-host", text: host, title: host }),
      el("td", { class: "c-path", text: path, title: `${h.method} ${h.url}` }),
      el("td", { class: "c-status", text: h.response ? h.response.status : "—" }),
      el("td", { class: "c-proto", text: h.phase }),
      el("td", { class: "c-verdict", title: `held at its ${h.phase}` }, el("span", { class: "held-badge", text: "HELD" })),
      el("td", { class: "c-errors", text: h.breakpoint, title: `breakpoint ${h.breakpoint}` }),
      el("td", { class: "c-size" }, countdown(h)),
      el("td", { class: "c-dur" }));
    tr.addEventListener("click", () => showHeld(h.id));
    return tr;
  }));
  $("list-empty").hidden = state.rows.length > 0 || held.list.length > 0;
  const tab = $("tab-traffic");
  tab.textContent = held.list.length ? `Traffic (${held.list.length} held)` : "Traffic";
  tab.classList.toggle("has-held", held.list.length > 0);
}

function headerRows(headers) {
  const body = el("tbody");
  const add = (name, value) => {
    const remove = el("button", { type: "button", class: "copy held-remove", text: "✕", "aria-label": `remove ${name}` });
    const tr = el("tr", { class: "held-header" },
      el("td", {}, el("input", { class: "held-name mono", value: name, "aria-label": "header name", spellcheck: "false" })),
      el("td", {}, el("input", { class: "held-value mono", value, "aria-label": "header value", spellcheck: "false" })),
      el("td", {}, remove));
    remove.addEventListener("click", () => { tr.remove(); body.closest("form").classList.add("held-dirty"); });
    body.append(tr);
    return tr;
  };
  for (const [name, value] of headers) add(name, value);
  const addButton = el("button", { type: "button", class: "copy held-add", text: "Add header",
    onclick: () => { add("", "").querySelector("input").focus(); } });
  return [el("table", { class: "held-headers" }, body), addButton];
}

function readHeaders(form) {
  return [...form.querySelectorAll("tr.held-header")].map((tr) =>
    [tr.querySelector(".held-name").value, tr.querySelector(".held-value").value])
    .filter(([n, v]) => n.trim() !== "" || v.trim() !== "");
}

function bodyEditor(body, cls) {
  if (body && body.base64 !== undefined && body.base64 !== null) {
    return el("div", { class: "sub", text: `A binary body of ${formatBytes(body.size)}: it goes on unchanged.` });
  }
  return el("textarea", { class: `held-body mono ${cls}`, rows: "8", spellcheck: "false", "aria-label": "body" },
    body && body.text ? body.text : "");
}

function responseFields(response, body, prefix) {
  const status = el("input", { class: `held-status mono`, id: `${prefix}-status`, type: "number", min: "200",
    max: "599", value: response ? response.status : 200, "aria-label": "status" });
  return el("div", { class: "held-part" },
    el("label", { class: "held-line" }, "Status ", status),
    el("div", { class: "leg", text: "Headers" }), ...headerRows(response ? response.headers : [["Content-Type", "text/plain"]]),
    el("div", { class: "leg", text: "Body" }), bodyEditor(body, `${prefix}-body`));
}

function readResponse(part) {
  const out = { status: Number(part.querySelector(".held-status").value), headers: readHeaders(part) };
  const body = part.querySelector("textarea.held-body");
  if (body) out.body = body.value;
  return out;
}

function showHeld(id) {
  const h = held.list.find((x) => x.id === id);
  if (!h) return;
  held.editing = id;
  detailGeneration++;
  renderHeld();
  const pane = $("detail");
  const message = el("p", { id: "held-message", role: "status", "aria-live": "polite" });
  const form = el("form", { id: "held-form", autocomplete: "off" });
  form.addEventListener("input", () => form.classList.add("held-dirty"));
  form.addEventListener("submit", (e) => e.preventDefault());
  let editPart;
  if (h.phase === "request") {
    const method = el("input", { id: "held-method", class: "mono", value: h.request.method, "aria-label": "method",
      spellcheck: "false" });
    const url = el("input", { id: "held-url", class: "mono", value: h.url, "aria-label": "URL", spellcheck: "false" });
    editPart = el("div", { class: "held-part" },
      el("div", { class: "held-line" }, method, url),
      el("div", { class: "leg", text: "Headers" }), ...headerRows(h.request.headers),
      el("div", { class: "leg", text: "Body" }),
      el("div", { class: "sub", text: "The request's body goes on as the client sends it: this build edits a held "
        + "request's method, URL and headers." }));
  } else {
    editPart = el("div", {},
      el("div", { class: "sub mono", text: `${h.request.method} ${h.url}` }),
      responseFields(h.response, h.responseBody, "held-response"));
  }
  form.append(editPart);

  const release = async (body, button) => {
    for (const b of document.querySelectorAll("#held-editor button.held-action")) b.disabled = true;
    message.textContent = "…";
    try {
      await apiPost(`/api/held/${h.id}`, body);
      message.dataset.final = "1";
      message.textContent = { execute: "Sent as edited.", abort: "Aborted: the client's connection was reset.",
        answer: "Answered locally." }[body.action];
      held.editing = null;
      refreshHeld(true);
    } catch (error) {
      message.textContent = `Not released: ${error.message}`;
      if (!error.message.startsWith("409")) {
        for (const b of document.querySelectorAll("#held-editor button.held-action")) b.disabled = false;
      }
    }
    button.blur();
  };
  const execute = el("button", { id: "held-execute", type: "button", class: "held-action primary", text: "Execute" });
  execute.addEventListener("click", () => {
    const edit = {};
    if (h.phase === "request") {
      edit.request = { method: $("held-method").value.trim(), url: $("held-url").value.trim(),
        headers: readHeaders(editPart) };
      const body = editPart.querySelector("textarea.held-body");
      if (body && body.value !== ((h.requestBody && h.requestBody.text) || "")) edit.request.body = body.value;
    } else {
      edit.response = readResponse(editPart);
      const body = editPart.querySelector("textarea.held-body");
      if (body && body.value === ((h.responseBody && h.responseBody.text) || "")) delete edit.response.body;
    }
    release(Object.assign({ action: "execute" }, form.classList.contains("held-dirty") ? edit : {}), execute);
  });
  const abort = el("button", { id: "held-abort", type: "button", class: "held-action danger", text: "Abort",
    title: "the client sees its connection fail" });
  abort.addEventListener("click", () => release({ action: "abort" }, abort));
  const buttons = el("div", { class: "held-buttons" }, execute, abort);
  let answerPart = null;
  if (h.phase === "request") {
    answerPart = el("details", { id: "held-answer" }, el("summary", {}, el("h3", {}, "Answer locally")),
      el("div", { class: "sub", text: "The client gets this response; the request never goes upstream." }));
    const fields = responseFields(null, null, "held-answer");
    const send = el("button", { id: "held-answer-send", type: "button", class: "held-action", text: "Send this answer" });
    send.addEventListener("click", () => release({ action: "answer", response: readResponse(fields) }, send));
    answerPart.append(fields, send);
    const answerButton = el("button", { id: "held-answer-open", type: "button", class: "held-action",
      text: "Answer locally…", onclick: () => { answerPart.open = true; answerPart.scrollIntoView({ block: "nearest" }); } });
    buttons.append(answerButton);
  }
  buttons.append(el("span", { class: "sub" }, "goes on unchanged in ", countdown(h)));

  const close = el("button", { class: "copy close", type: "button", text: "Close (Esc)" });
  close.addEventListener("click", () => { closeDetail(); $("list").focus(); });
  const editor = el("div", { id: "held-editor", "data-held": h.id },
    close,
    el("h2", {}, el("span", { class: "held-badge", text: "HELD" }), ` ${h.phase} · ${h.method} ${h.url}`),
    el("div", { class: "sub", text: `Breakpoint ${h.breakpoint} · connection #${h.connection} · held at ` +
      `${formatTime(h.heldAt)}` }),
    buttons, message, form, answerPart);
  pane.replaceChildren(editor);
  pane.scrollTop = 0;
  openDetail();
}

/// "Break on the next request to this URL": a runtime breakpoint rule for the exchange's URL.
function breakMaker(x) {
  const message = el("span", { class: "sub", role: "status" });
  const button = el("button", { id: "make-breakpoint", type: "button", class: "copy",
    text: "Break on the next request to this URL" });
  button.addEventListener("click", async () => {
    message.textContent = " …";
    try {
      const rule = await apiPost("/api/rules", { exchange: x.id, kind: "breakpoint" });
      message.textContent = ` In force: ${rule.text}`;
      refreshRules();
    } catch (error) {
      message.textContent = ` Not made: ${error.message}`;
    }
  });
  return el("div", { class: "break-maker" }, button, message);
}

// ---------------------------------------------------------------- replay and compose (issue 34)

function replayEnabled() {
  return !!(state.info && state.info.features && state.info.features.replay);
}

/// Sends a request through the proxy (`POST /api/replay`) and says what came back; selects the new row once the
/// capture has it.
async function sendThroughProxy(body, message) {
  message.textContent = "Sending through the proxy…";
  try {
    const answer = await apiPost("/api/replay", body);
    const made = answer.exchange ? ` · new exchange #${answer.exchange}` : " · the new row is not in the capture yet";
    message.textContent = `${answer.status} ${answer.reason} (${formatBytes(answer.bodySize)})${made}`;
    if (answer.exchange) {
      message.dataset.exchange = answer.exchange;
      // The stream brings the row; the detail shows it at once.
      select(answer.exchange);
      showDetail(answer.exchange);
    }
  } catch (error) {
    message.textContent = `Not sent: ${error.message}`;
  }
}

/// "Name: value" lines to [name, value] pairs (blank lines skipped).
function parseHeaderLines(text) {
  return text.split("\n").map((l) => l.replace(/\r$/, "")).filter((l) => l.trim()).map((l) => {
    const colon = l.indexOf(":");
    return colon < 0 ? [l.trim(), ""] : [l.slice(0, colon).trim(), l.slice(colon + 1).trim()];
  });
}

/// A request form: method, URL, headers (one per line) and body, with ids prefixed by `prefix`.
function requestForm(prefix, method, url, headers, body, sendLabel, onSend) {
  const m = el("input", { id: `${prefix}-method`, value: method, size: 8, "aria-label": "method" });
  const u = el("input", { id: `${prefix}-url`, value: url, class: "wide", "aria-label": "URL" });
  const h = el("textarea", { id: `${prefix}-headers`, rows: 6, class: "wide mono", "aria-label": "headers" });
  h.value = headers.map(([n, v]) => `${n}: ${v}`).join("\n");
  const b = el("textarea", { id: `${prefix}-body`, rows: 4, class: "wide mono", "aria-label": "body" });
  b.value = body;
  const send = el("button", { id: `${prefix}-send`, type: "button", text: sendLabel,
    onclick: () => onSend({ method: m.value.trim(), url: u.value.trim(), headers: parseHeaderLines(h.value),
      body: b.value }) });
  return el("div", { class: "request-form" },
    el("div", {}, m, " ", u), el("label", { class: "sub", text: "Headers (Name: value, one per line)" }), h,
    el("label", { class: "sub", text: "Body" }), b, el("div", {}, send));
}

/// "Replay" (as captured) and "Edit and replay" (method, URL, headers, body) on an exchange's detail.
function replayTools(x, d) {
  const message = el("div", { class: "sub replay-result", role: "status" });
  const editor = el("div", { class: "replay-editor", hidden: true });
  const replay = el("button", { id: "replay-send", type: "button", text: "Replay",
    onclick: () => sendThroughProxy({ exchange: x.id }, message) });
  const edit = el("button", { id: "replay-edit", type: "button", text: "Edit and replay",
    onclick: async () => {
      if (!editor.hidden) { editor.hidden = true; return; }
      let body = "";
      if (d.requestBody && d.requestBody.kept) {
        try {
          const r = await fetch(`/api/exchanges/${x.id}/body/request`, { cache: "no-store" });
          body = await r.text();
        } catch (_) { body = ""; }
      }
      editor.replaceChildren(requestForm("replay-edit", x.method, x.url, d.request.headers, body, "Send edited",
        (fields) => sendThroughProxy(Object.assign({ exchange: x.id }, fields), message)));
      editor.hidden = false;
    } });
  return el("div", {}, el("div", {}, replay, " ", edit,
    el("span", { class: "sub", text: " sends it again through the proxy: rules, ATS verdict and capture as for the app" })),
    editor, message);
}

/// Compose: a request written from scratch, or from a pasted curl command line.
function showCompose() {
  const message = el("div", { class: "sub replay-result", role: "status" });
  const holder = el("div", {});
  const fill = (req) => holder.replaceChildren(requestForm("compose", req.method, req.url, req.headers, req.body,
    "Send through the proxy", (fields) => sendThroughProxy(fields, message)));
  const pasted = el("textarea", { id: "compose-curl", rows: 3, class: "wide mono",
    placeholder: "curl -X POST -H 'Content-Type: application/json' -d '{\"a\":1}' https://api.example.com/x",
    "aria-label": "curl command" });
  const use = el("button", { id: "compose-from-curl", type: "button", text: "Fill from curl", onclick: () => {
    try { fill(parseCurl(pasted.value)); message.textContent = ""; } catch (error) {
      message.textContent = `Cannot read that command: ${error.message}`;
    }
  } });
  fill({ method: "GET", url: "https://", headers: [], body: "" });
  const close = el("button", { class: "copy close", type: "button", text: "Close (Esc)",
    onclick: () => { closeDetail(); $("list").focus(); } });
  $("detail").replaceChildren(close, el("h2", { text: "Compose a request" }),
    el("div", { class: "sub", text: "Sent through the proxy as the app's request would be: the rules, the ATS " +
      "verdict the app's policy gives, the capture." }),
    section("From a curl command", true, pasted, el("div", {}, use)), section("Request", true, holder), message);
  openDetail();
}

/// Splits a shell command line as sh would for the common cases: quotes, backslashes, line continuations.
function shellWords(text) {
  const words = [];
  let word = null;
  let i = 0;
  const push = () => { if (word !== null) words.push(word); word = null; };
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && text[i + 1] === "\n") { i += 2; continue; }
    if (/\s/.test(c)) { push(); i++; continue; }
    word = word ?? "";
    if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new Error("an unclosed ' quote");
      word += text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === "\\" && i + 1 < text.length && '"\\$`'.includes(text[i + 1])) i++;
        word += text[i++];
      }
      if (i >= text.length) throw new Error('an unclosed " quote');
      i++;
    } else if (c === "$" && text[i + 1] === "'") {
      // $'…' (bash): the common escapes.
      i += 2;
      while (i < text.length && text[i] !== "'") {
        if (text[i] === "\\" && i + 1 < text.length) {
          const e = text[i + 1];
          word += { n: "\n", r: "\r", t: "\t" }[e] ?? e;
          i += 2;
        } else word += text[i++];
      }
      i++;
    } else if (c === "\\" && i + 1 < text.length) {
      word += text[i + 1];
      i += 2;
    } else {
      word += c;
      i++;
    }
  }
  push();
  return words;
}

/// The request a curl command line makes, for its common options: -X/--request, -H/--header, -d/--data,
/// --data-raw, --data-binary, --data-ascii, --url, -A, -e, -b, -I; options that do not change the request (the
/// proxy, the CA, output and timing) are skipped with their arguments.
function parseCurl(text) {
  const words = shellWords(text.trim());
  if (!words.length || words[0] !== "curl") throw new Error("it does not start with curl");
  let method = null;
  let url = null;
  const headers = [];
  const data = [];
  let head = false;
  const skipWithArgument = new Set(["-x", "--proxy", "--cacert", "-o", "--output", "-m", "--max-time", "-w",
    "--write-out", "--connect-timeout", "-u", "--user", "-U", "--proxy-user", "--resolve", "--connect-to",
    "--capath", "--cert", "--key", "--retry", "-r", "--range", "--limit-rate", "-c", "--cookie-jar"]);
  for (let i = 1; i < words.length; i++) {
    const w = words[i];
    const next = () => {
      if (i + 1 >= words.length) throw new Error(`${w} needs a value`);
      return words[++i];
    };
    if (w === "-X" || w === "--request") method = next();
    else if (w.startsWith("-X") && w.length > 2) method = w.slice(2);
    else if (w === "-H" || w === "--header") {
      const line = next();
      const colon = line.indexOf(":");
      if (colon > 0) headers.push([line.slice(0, colon).trim(), line.slice(colon + 1).trim()]);
    } else if (["-d", "--data", "--data-raw", "--data-binary", "--data-ascii"].includes(w)) data.push(next());
    else if (w === "--url") url = next();
    else if (w === "-A" || w === "--user-agent") headers.push(["User-Agent", next()]);
    else if (w === "-e" || w === "--referer") headers.push(["Referer", next()]);
    else if (w === "-b" || w === "--cookie") headers.push(["Cookie", next()]);
    else if (w === "-I" || w === "--head") head = true;
    else if (skipWithArgument.has(w)) next();
    else if (w.startsWith("-")) continue;
    else url = url ?? w;
  }
  if (!url) throw new Error("no URL");
  if (!/^https?:\/\//i.test(url)) url = "http://" + url;
  const body = data.join("&");
  if (data.length && !headers.some(([n]) => n.toLowerCase() === "content-type")) {
    headers.push(["Content-Type", "application/x-www-form-urlencoded"]);
  }
  return { method: method || (head ? "HEAD" : data.length ? "POST" : "GET"), url, headers, body };
}

// ---------------------------------------------------------------- compare (issue 34)

/// The exchange picked as the first of a comparison ("Compare…" on another then shows the two).
let comparePick = null;

function compareTools(x) {
  const pick = el("button", { id: "compare-pick", type: "button",
    text: comparePick === x.id ? "Picked for comparing" : "Pick for comparing",
    onclick: () => { comparePick = x.id; pick.textContent = "Picked for comparing"; } });
  const against = comparePick && comparePick !== x.id
    ? el("button", { id: "compare-with", type: "button", text: `Compare with #${comparePick}`,
      onclick: () => showCompare(comparePick, x.id) })
    : null;
  return el("div", { class: "compare-tools" }, pick, " ", against);
}

/// The longest common subsequence of two line lists, as rows [kind, left, right]: `same`, `del` (left only), `add`
/// (right only), and `change` (a removed line beside the added one that took its place). Bounded: past 3,000 lines a
/// side, the rest is compared as one block.
function diffLines(a, b) {
  const limit = 3000;
  const left = a.slice(0, limit);
  const right = b.slice(0, limit);
  if (a.length > limit) left.push(`… ${a.length - limit} more lines`);
  if (b.length > limit) right.push(`… ${b.length - limit} more lines`);
  const n = left.length;
  const m = right.length;
  const table = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i][j] = left[i] === right[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
    }
  }
  const rows = [];
  let i = 0;
  let j = 0;
  let dels = [];
  let adds = [];
  const flush = () => {
    const k = Math.max(dels.length, adds.length);
    for (let t = 0; t < k; t++) {
      if (t < dels.length && t < adds.length) rows.push(["change", dels[t], adds[t]]);
      else if (t < dels.length) rows.push(["del", dels[t], null]);
      else rows.push(["add", null, adds[t]]);
    }
    dels = [];
    adds = [];
  };
  while (i < n || j < m) {
    if (i < n && j < m && left[i] === right[j]) {
      flush();
      rows.push(["same", left[i], right[j]]);
      i++;
      j++;
    } else if (j < m && (i === n || table[i][j + 1] >= table[i + 1][j])) {
      adds.push(right[j++]);
    } else {
      dels.push(left[i++]);
    }
  }
  flush();
  return rows;
}

function diffTable(title, a, b) {
  const rows = diffLines(a, b);
  const changed = rows.filter((r) => r[0] !== "same").length;
  return section(`${title}${changed ? ` · ${changed} line${changed > 1 ? "s" : ""} differ` : " · the same"}`, true,
    el("table", { class: "diff mono" }, el("tbody", {}, ...rows.map(([kind, l, r]) =>
      el("tr", { class: `diff-${kind}` }, el("td", { text: l ?? "" }), el("td", { text: r ?? "" }))))));
}

function headLines(head) {
  return head ? [head.line, ...head.headers.map(([n, v]) => `${n}: ${v}`)] : ["(none)"];
}

async function bodyLines(id, direction, info) {
  if (!info || !info.kept) return ["(no body)"];
  try {
    const r = await fetch(`/api/exchanges/${id}/body/${direction}`, { cache: "no-store" });
    let text = await r.text();
    try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* not JSON: as it is */ }
    return text.split("\n");
  } catch (error) {
    return [`(cannot read: ${error.message})`];
  }
}

/// Two exchanges side by side: request and response heads, and bodies, diffed line by line.
async function showCompare(leftId, rightId) {
  const generation = ++detailGeneration;
  let a;
  let b;
  try {
    [a, b] = await Promise.all([api(`/api/exchanges/${leftId}`), api(`/api/exchanges/${rightId}`)]);
  } catch (error) {
    $("detail").replaceChildren(el("p", { class: "placeholder", text: `Cannot compare: ${error.message}` }));
    openDetail();
    return;
  }
  const [aReq, bReq, aRes, bRes] = await Promise.all([
    bodyLines(leftId, "request", a.requestBody), bodyLines(rightId, "request", b.requestBody),
    bodyLines(leftId, "response", a.responseBody), bodyLines(rightId, "response", b.responseBody)]);
  if (generation !== detailGeneration) return;
  const summary = (d) => `#${d.exchange.id} ${d.exchange.method} ${d.exchange.url} → ${d.exchange.status ?? "no response"}` +
    ` (${VERDICT_TEXT[d.exchange.verdict] || d.exchange.verdict})`;
  const close = el("button", { class: "copy close", type: "button", text: "Close (Esc)",
    onclick: () => { closeDetail(); $("list").focus(); } });
  $("detail").replaceChildren(close, el("h2", { id: "compare-title", text: `Compare #${leftId} with #${rightId}` }),
    el("table", { class: "diff-legend" }, el("tbody", {}, el("tr", {},
      el("td", { text: summary(a) }), el("td", { text: summary(b) })))),
    diffTable("Request head", headLines(a.forwardedRequest || a.request), headLines(b.forwardedRequest || b.request)),
    diffTable("Request body", aReq, bReq),
    diffTable("Response head", headLines(a.clientResponse || a.response), headLines(b.clientResponse || b.response)),
    diffTable("Response body", aRes, bRes));
  $("detail").scrollTop = 0;
  openDetail();
}

// ---------------------------------------------------------------- rules

const rules = { list: [], faultKinds: [], throttleProfiles: [] };

function rulesEnabled() {
  return !!(state.info && state.info.features && state.info.features.rules);
}

/// "Fail this host like…", "Throttle this host", "Map local from this response": each makes a runtime rule.
function ruleMaker(x) {
  const message = el("div", { class: "sub rule-made", role: "status" });
  const make = async (body) => {
    message.textContent = "…";
    try {
      const rule = await apiPost("/api/rules", Object.assign({ exchange: x.id }, body));
      message.textContent = `In force: ${rule.text}`;
      refreshRules();
    } catch (error) {
      message.textContent = `Not made: ${error.message}`;
    }
  };
  const faultPick = el("select", { id: "make-fault-kind", "aria-label": "fault kind" },
    ...rules.faultKinds.map((k) => el("option", { value: k, text: k })));
  const throttlePick = el("select", { id: "make-throttle-profile", "aria-label": "throttle profile" },
    ...rules.throttleProfiles.map((p) => el("option", { value: p, text: p })));
  const host = x.host.replace(/:\d+$/, "");
  return el("div", { class: "rule-maker" },
    el("div", {}, el("button", { id: "make-fault", type: "button", text: `Fail ${host} like…`,
      onclick: () => make({ kind: "fault", fault: faultPick.value }) }), " ", faultPick),
    el("div", {}, el("button", { id: "make-throttle", type: "button", text: `Throttle ${host}`,
      onclick: () => make({ kind: "throttle", profile: throttlePick.value }) }), " ", throttlePick),
    el("div", {}, el("button", { id: "make-map-local", type: "button", text: "Map local from this response",
      onclick: () => make({ kind: "map-local" }) }),
      el("span", { class: "sub", text: " serves the captured body for this URL from now on" })),
    message);
}

/// Every answer of the rules API is the whole list; the panel draws only the answer to the latest request, so a
/// listing asked for before a switch never draws the rule back as it was.
let rulesAsked = 0;
async function rulesCall(request) {
  const mine = ++rulesAsked;
  const answer = await request;
  if (mine === rulesAsked) renderRules(answer);
  return answer;
}

function renderRules(answer) {
  rules.list = answer.rules;
  rules.faultKinds = answer.faultKinds;
  rules.throttleProfiles = answer.throttleProfiles;
  $("tab-rules").textContent = `Rules (${answer.rules.filter((r) => r.enabled).length})`;
  $("rules-rows").replaceChildren(...answer.rules.map((r) => {
    const box = el("input", {
      type: "checkbox", class: "rule-switch", "data-rule": r.id, checked: r.enabled,
      "aria-label": `rule ${r.id} in force`,
    });
    box.addEventListener("change", async () => {
      box.disabled = true;
      try {
        await rulesCall(apiPost("/api/rules/enabled", { id: r.id, enabled: box.checked }));
        $("rules-message").textContent = `${r.id} switched ${box.checked ? "on" : "off"}.`;
      } catch (error) {
        box.checked = !box.checked;
        $("rules-message").textContent = `Cannot switch ${r.id}: ${error.message}`;
      } finally {
        box.disabled = false;
      }
    });
    const remove = r.origin === "runtime" ? el("button", { type: "button", class: "copy", text: "Remove",
      onclick: async () => {
        try { await rulesCall(apiPost("/api/rules/remove", { id: r.id })); } catch (error) {
          $("rules-message").textContent = `Cannot remove ${r.id}: ${error.message}`;
        }
      } }) : null;
    return el("tr", { class: `rule-row${r.enabled ? "" : " off"}`, "data-rule": r.id },
      el("td", {}, box), el("td", { class: "mono", text: r.id }), el("td", { text: r.points.join(", ") }),
      el("td", { text: r.origin === "runtime" ? "made here" : r.origin }),
      el("td", { class: "mono", text: r.text }), el("td", {}, remove));
  }));
  if (!answer.rules.length) {
    $("rules-rows").replaceChildren(el("tr", {}, el("td", { colspan: "6", class: "sub",
      text: "No rules. Make one from an exchange's detail pane, or start the proxy with --rules FILE." })));
  }
}

async function refreshRules() {
  if (!rulesEnabled()) return;
  try { await rulesCall(api("/api/rules")); } catch (error) {
    $("rules-message").textContent = `Cannot list the rules: ${error.message}`;
  }
}

function openDetail() {
  const split = $("split");
  if (split.classList.contains("with-detail")) return;
  const list = $("list");
  const fromBottom = list.scrollHeight - list.scrollTop - list.clientHeight;
  split.classList.add("with-detail");
  if (fromBottom < 24 && state.follow) scrollToNewest();
  const selected = $("rows").querySelector("tr.selected");
  if (selected) selected.scrollIntoView({ block: "nearest" });
}

function closeDetail() {
  detailGeneration++;
  held.editing = null;
  $("split").classList.remove("with-detail");
}

// ---------------------------------------------------------------- hosts summary

let hostsTimer = null;
async function refreshHosts() {
  clearTimeout(hostsTimer);
  if ($("hosts").hidden) return;
  try {
    const summary = await api("/api/hosts");
    $("hosts-total").textContent =
      `${summary.hosts.length} host${summary.hosts.length === 1 ? "" : "s"}, ` +
      `${summary.exchanges.toLocaleString()} exchanges. ` +
      "Click a host to list its exchanges.";
    const hostRow = (h) => {
      const counts = Object.entries(h.verdicts).map(([v, n]) => `${VERDICT_TEXT[v] || v} ${n}`).join(", ");
      const verdict = h.proxySite ? ownBadge() : verdictBadge(h.verdict);
      const tr = el("tr", { class: h.proxySite ? "host-row own" : "host-row", tabindex: "0" },
        el("td", { class: "mono", text: h.host || "(none)" }), el("td", {}, verdict),
        el("td", { text: h.exchanges }), el("td", { text: counts }),
        el("td", { class: "mono", text: h.errors.join(" ") }),
        el("td", { text: h.decidedBy === undefined ? "—" : (h.decidedBy || "ATS defaults") }));
      const open = () => { $("filter-host").value = h.host; showTab("traffic"); reload(); };
      tr.addEventListener("click", open);
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
      return tr;
    };
    // The proxy's own set-up site is listed apart, below: its pages are not the app's traffic.
    const own = (summary.proxySite || []).length === 0 ? [] : [
      el("tr", { class: "own-heading" },
        el("th", { colspan: "6",
          text: "The proxy's own set-up site (not the app's traffic; left out of the report)" })),
      ...summary.proxySite.map(hostRow)];
    $("hosts-rows").replaceChildren(...summary.hosts.map(hostRow), ...own);
  } catch (error) {
    $("hosts-total").textContent = `Cannot load the summary: ${error.message}`;
  }
  hostsTimer = setTimeout(refreshHosts, 2000);
}

/// The session report (`atsproxy report` over the capture): read when the tab opens and on Refresh, since it
/// reads every observed origin of the capture. Drawn from its JSON as tables, verdicts in words and colour (the
/// Markdown's emoji need an emoji font the machine may not have).
async function refreshReport() {
  if (!(state.info && state.info.features && state.info.features.report)) return;
  $("report").hidden = false;
  $("report-body").replaceChildren(el("p", { class: "sub", text: "Reading the capture…" }));
  try {
    const report = await api("/api/report");
    $("report-body").replaceChildren(...renderReport(report));
    $("report-time").textContent = `as of ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    $("report-body").replaceChildren(el("p", { text: `Cannot make the report: ${error.message}` }));
  }
}

const LOAD_VERDICT = {
  allowed: ["ok", "v-ok"], fails: ["FAILS", "v-blocked"], notChecked: ["not checked", "v-notJudged"],
};

const FINDING_TITLE = {
  unusedEntry: "Unused entry",
  subdomainsOnlyApex: "NSIncludesSubdomains matched only the apex",
  subdomainsOfPublicSuffix: "NSIncludesSubdomains on a public suffix",
  arbitraryLoadsTooBroad: "NSAllowsArbitraryLoads broader than needed",
  minimumTLSTooLow: "Minimum TLS version lower than needed",
  insecureHTTPOnlyHTTPS: "Insecure HTTP allowed but only HTTPS seen",
};

/// The codes a violation gives the app: `-1200/-9836`.
function violationCodes(v) {
  return [v.urlError && v.urlError.code, v.sslError && v.sslError.code].filter((c) => c !== undefined).join("/");
}

function reportTable(headings, rows) {
  return el("div", { class: "table-scroll" }, el("table", { class: "report-table" },
    el("thead", {}, el("tr", {}, ...headings.map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows)));
}

/// The report's parts as elements: verdict, hosts, missing exceptions with their fixes, findings, the suggestion.
function renderReport(r) {
  const parts = [];
  parts.push(el("p", { class: `report-verdict ${r.fits ? "fits" : "fails"}` },
    el("span", { class: `verdict ${r.fits ? "v-ok" : "v-blocked"}`, text: r.fits ? "FITS" : "FAILS" }), " ",
    r.verdict));
  parts.push(el("p", { class: "sub", text: `${r.policySource}, judged on iOS ${r.profile}; ` +
    `${r.exchangeCount.toLocaleString()} exchange${r.exchangeCount === 1 ? "" : "s"} observed.` }));
  for (const note of r.notes) parts.push(el("p", { class: "sub", text: note }));
  for (const d of r.policyDiagnostics) {
    parts.push(el("p", { class: "sub", text: `${d.severity}: ${d.keyPath.join(" › ")}: ${d.problem}` }));
  }

  parts.push(el("h3", { text: `Hosts (${r.hosts.length})` }));
  parts.push(reportTable(["Host", "Verdict", "Decided by", "TLS", "Exchanges"], r.hosts.map((h) => {
    const [word, cls] = LOAD_VERDICT[h.verdict] || [h.verdict, "v-notJudged"];
    const codes = [...new Set(h.loads.flatMap((l) => l.violations.map(violationCodes)))].filter(Boolean);
    const tls = h.loads.map((l) => l.tls).find(Boolean);
    const tlsText = tls ? [tls.version, tls.cipherSuite, tls.keyExchange].filter(Boolean).join(" ")
      : h.loads.every((l) => l.url.startsWith("http://") || l.url.startsWith("ws://")) ? "cleartext" : "–";
    return el("tr", {},
      el("td", { class: "mono", text: h.host }),
      el("td", {}, el("span", { class: `verdict ${cls}`, text: word }), codes.length ? ` ${codes.join(" ")}` : ""),
      el("td", { text: h.decidedBy, title: h.reason || "" }),
      el("td", { class: "mono", text: tlsText }),
      el("td", { class: "num", text: h.exchanges.toLocaleString() }));
  })));

  parts.push(el("h3", { text: `Missing exceptions (${r.missingExceptions.length})` }));
  if (r.missingExceptions.length === 0) parts.push(el("p", { text: "None: every judged load passes." }));
  for (const m of r.missingExceptions) {
    const box = el("div", { class: `missing ${m.fix ? "fixable" : "unfixable"}` },
      el("p", {}, el("b", { class: "mono", text: m.host }),
        ` (${m.exchanges} exchange${m.exchanges === 1 ? "" : "s"}): `,
        el("span", { class: `verdict ${m.fix ? "v-violation" : "v-blocked"}`,
          text: m.fix ? "fixable with an exception" : "no exception can help: fix the server" })),
      el("ul", {}, ...m.violations.map((v) =>
        el("li", {}, el("span", { class: "mono", text: violationCodes(v) }), ` ${v.explanation}`))));
    if (m.fixPlist) {
      box.append(el("p", { class: "sub", text: `Add inside ${m.fixPasteInside || "NSAppTransportSecurity"}:` }),
        el("pre", { text: m.fixPlist }));
    }
    for (const why of m.unfixable) box.append(el("p", { class: "sub", text: why }));
    parts.push(box);
  }

  parts.push(el("h3", { text: `Unused and over-broad exceptions (${r.findings.length})` }));
  if (r.findings.length === 0) {
    parts.push(el("p", { text: "None." }));
  } else {
    parts.push(reportTable(["Finding", "Key", "Problem", "Advice"], r.findings.map((f) => el("tr", {},
      el("td", {}, el("span", { class: "verdict v-violation", text: FINDING_TITLE[f.kind] || f.kind })),
      el("td", { class: "mono", text: f.keyPath.join(" › ") }),
      el("td", { text: f.problem }), el("td", { text: f.advice })))));
  }

  if (r.mirror) {
    parts.push(el("h3", { text: "Device verdicts (--ats mirror)" }));
    for (const d of r.mirror.disagreements || []) {
      parts.push(el("p", {}, el("span", { class: "verdict v-violation", text: "disagreement" }), " ",
        el("span", { class: "mono", text: d.url }), `: ${d.text}`));
    }
  }

  const s = r.suggestion;
  parts.push(el("h3", { text: "Suggested NSAppTransportSecurity" }));
  const failing = s.checks.filter((c) => c.verdict !== "allowed");
  parts.push(el("p", {}, el("span", { class: `verdict ${s.verified ? "v-ok" : "v-blocked"}`,
    text: s.verified ? "checked" : "not verified" }), " ", s.checks.length === 0
    ? "Nothing to check: no observed load is one an exception can let through."
    : s.verified ? `The ${s.checks.length} load${s.checks.length === 1 ? "" : "s"} an exception can let through ` +
      "all pass with it, and explain refuses none."
      : `Still failing with it: ${failing.map((c) => c.url).join(", ")}`));
  for (const u of s.unfixable) {
    parts.push(el("p", { class: "sub", text: `Left out (no exception can help): ${u.host}: ${u.reasons.join("; ")}` }));
  }
  parts.push(el("pre", { class: "report-plist", text: s.plist }));
  return parts;
}

function showTab(name) {
  for (const tab of ["traffic", "hosts", "rules"]) {
    $(tab).hidden = tab !== name;
    $(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
  }
  if (name === "hosts") {
    refreshHosts();
    refreshReport();
  }
  if (name === "rules") refreshRules();
}

// ---------------------------------------------------------------- QUIC refusals

// Transparent and WireGuard modes refuse QUIC so that apps fall back to TCP, where the proxy sees them: the header
// says how many attempts were refused, polled from /api/info (a refusal makes no exchange, so the live feed says
// nothing of it).
function showQUIC(count) {
  $("fact-quic-row").hidden = false;
  $("fact-quic").textContent = count === 0
    ? "none refused yet"
    : `${count} ${count === 1 ? "attempt" : "attempts"} refused; apps fall back to TCP`;
  if (!state.quicTimer) {
    state.quicTimer = setInterval(async () => {
      try {
        const info = await api("/api/info");
        if (info.quicAttemptsRefused !== undefined) showQUIC(info.quicAttemptsRefused);
      } catch (error) {
        // The proxy stopped: the last count stays.
      }
    }, 2000);
  }
}

// ---------------------------------------------------------------- start

async function start() {
  try {
    const info = await api("/api/info");
    state.info = info;
    $("fact-proxy").textContent = info.proxyAddress ? info.proxyAddress : "not running (a saved capture)";
    $("fact-policy").textContent = info.policy;
    $("fact-policy").title = info.policy;
    $("fact-ios").textContent = info.iosProfile;
    $("fact-ats").textContent = info.atsMode + (info.blockStyle ? ` (block ${info.blockStyle})` : "");
    $("fact-capture").textContent = info.captureIsTemporary ? "temporary (deleted at exit)" : info.capturePath;
    $("fact-capture").title = info.capturePath;
    if (info.onboardingURL) {
      $("onboarding").hidden = false;
      $("onboarding").href = info.onboardingURL;
    }
    document.title = `ATSProxy${info.proxyAddress ? " · " + info.proxyAddress : ""}`;
    if (info.quicAttemptsRefused !== undefined) showQUIC(info.quicAttemptsRefused);
  } catch (error) {
    $("fact-proxy").textContent = `cannot reach the API: ${error.message}`;
  }
  for (const id of ["filter-text", "filter-host"]) $(id).addEventListener("input", filtersChanged);
  for (const id of ["filter-verdict", "filter-status", "filter-method"]) {
    $(id).addEventListener("change", filtersChanged);
  }
  $("filter-problems").addEventListener("click", () => {
    const on = $("filter-problems").getAttribute("aria-pressed") !== "true";
    $("filter-problems").setAttribute("aria-pressed", String(on));
    filtersChanged();
  });
  $("filter-clear").addEventListener("click", () => {
    for (const id of ["filter-text", "filter-host", "filter-verdict", "filter-status", "filter-method"]) {
      $(id).value = "";
    }
    $("filter-problems").setAttribute("aria-pressed", "false");
    filtersChanged();
  });
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("list").addEventListener("scroll", onScroll, { passive: true });
  $("tab-traffic").addEventListener("click", () => showTab("traffic"));
  $("tab-hosts").addEventListener("click", () => showTab("hosts"));
  $("tab-rules").addEventListener("click", () => showTab("rules"));
  if (replayEnabled()) {
    $("compose-open").hidden = false;
    $("compose-open").addEventListener("click", showCompose);
  }
  if (rulesEnabled()) {
    $("tab-rules").hidden = false;
    await refreshRules();
  }
  $("report-refresh").addEventListener("click", refreshReport);
  refreshHeld();
  document.addEventListener("keydown", onKey);
  await reload();
  $("list").focus();
}

start();
