#include "node/daemon/reporting/status_page.h"

#include "absl/strings/str_replace.h"

namespace skipswarm::node {
namespace {

// The page. Element ids are what tests and operators' scripts look for:
// #node, #health, #members (one tbody row per member), #stage-map (one row
// per stage), #links, #loss-plot and #throughput-plot (an svg with a
// polyline.series whose points are the history), #events (one li each).
constexpr char kHead[] = R"page(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>SkipSwarm node</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#1f2937;color:#fff;padding:10px 18px;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:18px;margin:0}
main{padding:12px 18px;display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:14px}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 14px;overflow:auto}
section h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eef0f3;vertical-align:top;white-space:nowrap}
th{color:#555;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:9px;font-size:12px;font-weight:600}
.ok{background:#d1fae5;color:#065f46}.bad{background:#fee2e2;color:#991b1b}
.warn{background:#fef3c7;color:#92400e}.dim{color:#888}
tr.self td{background:#eef6ff}
#events li{margin:2px 0;list-style:none}#events{padding:0;margin:0;max-height:320px;overflow:auto}
.k{display:inline-block;min-width:70px;font-size:12px;color:#555}
.k-error,.k-drop{color:#b91c1c}.k-member{color:#1d4ed8}.k-reroute{color:#b45309}
.k-health,.k-pause{color:#6d28d9}
svg text{font-size:11px;fill:#444}
#conn{margin-left:auto;font-size:12px}
</style></head><body>
<header><h1 id="title">SkipSwarm node</h1><span id="health" class="badge">…</span>
<span id="paused"></span><span id="conn" class="dim"></span></header>
<main>
<section><h2>This node</h2><table id="node"><tbody></tbody></table></section>
<section><h2>Stages <span id="stage-summary" class="dim"></span></h2>
<table id="stage-map"><thead><tr><th>stage</th><th>replicas</th><th>members</th></tr></thead><tbody></tbody></table></section>
<section style="grid-column:1/-1"><h2>Members <span id="member-summary" class="dim"></span></h2>
<table id="members"><thead><tr><th>id</th><th>state</th><th>stages</th><th>address</th><th>reachability</th><th>entered at</th><th>s/layer/sample</th></tr></thead><tbody></tbody></table></section>
<section><h2>Loss</h2><svg id="loss-plot" width="520" height="240" role="img" aria-label="loss per iteration"></svg></section>
<section><h2>Throughput</h2><svg id="throughput-plot" width="520" height="240" role="img" aria-label="tokens per second per iteration"></svg></section>
<section><h2>Links <span id="link-summary" class="dim"></span></h2>
<table id="links"><thead><tr><th>from</th><th>to</th><th>rtt</th><th>bandwidth</th></tr></thead><tbody></tbody></table></section>
<section><h2>Recent events</h2><ul id="events"></ul></section>
</main>
<script id="initial-status" type="application/json">)page";

constexpr char kTail[] = R"page(</script>
<script>
"use strict";
const SVGNS = "http://www.w3.org/2000/svg";
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = String(text);
  return e;
}
function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) {
    const td = el("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}
function fill(tbody, rows) {
  while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
  for (const r of rows) tbody.appendChild(r);
}
function badge(text, kind) { return el("span", text, "badge " + kind); }
function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
  const t = v.toFixed(digits === undefined ? 3 : digits);
  return t.indexOf(".") < 0 ? t : t.replace(/0+$/, "").replace(/\.$/, "");
}
function ago(s) {
  if (s < 60) return fmt(s, 0) + " s";
  if (s < 3600) return fmt(s / 60, 1) + " min";
  return fmt(s / 3600, 1) + " h";
}
function ticks(lo, hi, n) {
  const span = hi - lo || 1, step0 = span / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= step0) || step0;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) out.push(v);
  return out;
}
// A line plot of pts [[x, y], ...] with axes, ticks, labels and vertical
// event markers [{x, kind, text}].
function plot(id, pts, xlabel, ylabel, markers) {
  const s = document.getElementById(id);
  while (s.firstChild) s.removeChild(s.firstChild);
  const W = +s.getAttribute("width"), H = +s.getAttribute("height");
  const L = 64, R = 12, T = 10, B = 38;
  if (pts.length === 0) {
    s.appendChild(svg("text", {x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty"},
                      "no " + ylabel + " yet"));
    return;
  }
  let x0 = Math.min(...pts.map(p => p[0])), x1 = Math.max(...pts.map(p => p[0]));
  let y0 = Math.min(0, ...pts.map(p => p[1])), y1 = Math.max(...pts.map(p => p[1]));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  y1 += (y1 - y0) * 0.05;
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const Y = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const g = svg("g", {class: "axes"});
  for (const t of ticks(y0, y1, 5)) {
    g.appendChild(svg("line", {x1: L, x2: W - R, y1: Y(t), y2: Y(t), stroke: "#eee"}));
    g.appendChild(svg("text", {x: L - 6, y: Y(t) + 4, "text-anchor": "end"}, fmt(t)));
  }
  for (const t of ticks(x0, x1, 6)) {
    if (t !== Math.round(t)) continue;
    g.appendChild(svg("line", {x1: X(t), x2: X(t), y1: H - B, y2: H - B + 4, stroke: "#888"}));
    g.appendChild(svg("text", {x: X(t), y: H - B + 16, "text-anchor": "middle"}, t));
  }
  g.appendChild(svg("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#888"}));
  g.appendChild(svg("line", {x1: L, x2: L, y1: T, y2: H - B, stroke: "#888"}));
  g.appendChild(svg("text", {x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle"}, xlabel));
  g.appendChild(svg("text", {x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
                             transform: "rotate(-90 12 " + (T + H - B) / 2 + ")"}, ylabel));
  s.appendChild(g);
  const colours = {member: "#1d4ed8", reroute: "#d97706", drop: "#dc2626", error: "#dc2626",
                   health: "#7c3aed", pause: "#7c3aed", node: "#059669"};
  for (const m of markers) {
    if (m.x < x0 || m.x > x1) continue;
    const line = svg("line", {x1: X(m.x), x2: X(m.x), y1: T, y2: H - B, class: "marker",
                              stroke: colours[m.kind] || "#999", "stroke-dasharray": "3,3",
                              "stroke-opacity": 0.7});
    line.appendChild(svg("title", {}, "it " + m.x + ": " + m.text));
    s.appendChild(line);
  }
  s.appendChild(svg("polyline", {class: "series", fill: "none", stroke: "steelblue",
                                 "stroke-width": 1.6,
                                 points: pts.map(p => X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1)).join(" ")}));
}
// Note [Route shapes]: "skip 12% · swap 3% of 240 micro-batches (20 iterations)".
function routes(r) {
  if (!r || !r.micro_batches) return "–";
  const pct = x => (100 * x).toFixed(x > 0 && x < 0.1 ? 1 : 0) + "%";
  return "skip " + pct(r.skip_rate) + " · swap " + pct(r.swap_rate) + " of " +
         r.micro_batches + " micro-batches (last " + r.window_iterations + " iterations)";
}
function render(st) {
  const n = st.node, sw = st.swarm;
  document.title = "SkipSwarm " + n.name;
  document.getElementById("title").textContent = "SkipSwarm · " + n.name;
  const h = document.getElementById("health");
  h.textContent = n.serving === null ? "health ?" : n.serving ? "SERVING" : "NOT_SERVING";
  h.className = "badge " + (n.serving === false ? "bad" : "ok");
  h.title = n.health || "";
  const p = document.getElementById("paused");
  p.textContent = n.paused ? "paused: " + n.paused_why : "";
  p.className = n.paused ? "badge warn" : "";
  const reach = n.reachable === null ? "not checked yet"
              : n.reachable ? "reachable" : "outbound-only (behind NAT)";
  fill(document.querySelector("#node tbody"), [
    row(["name", n.name]), row(["id", n.id.length > 16 ? n.id.slice(0, 16) + "…" : n.id]),
    row(["mode", n.mode]),
    row(["stages", n.stages.length ? n.stages.join(", ") : "none (relay)"]),
    row(["address", n.address || "–"]), row(["reachability", reach]),
    row(["health", n.serving === false ? "NOT_SERVING: " + n.health : n.serving ? "SERVING" : "–"]),
    row(["iteration", n.iteration === null ? "not started" : n.iteration]),
    row(["routes", routes(st.routes)]),
    row(["uptime", ago(n.uptime_s)]), row(["version", n.version]),
  ]);
  if (sw.available) {
    const stages = sw.stages.map(s => row([s.stage,
        badge(s.replicas, s.replicas === 0 ? "bad" : s.replicas === 1 ? "warn" : "ok"),
        s.members.join(", ")]));
    fill(document.querySelector("#stage-map tbody"), stages);
    const uncovered = sw.stages.filter(s => s.replicas === 0).length;
    document.getElementById("stage-summary").textContent =
        sw.stages.length + " stages" + (uncovered ? ", " + uncovered + " without a replica" : ", all covered");
    const members = sw.members.map(m => {
      const state = m.state.replace("MEMBER_STATE_", "") + (m.paused ? " (paused)" : "");
      return row([(m.name ? m.name + " " : "") + m.short + (m.self ? " (this node)" : ""),
                  badge(state, state === "ALIVE" ? "ok" : state === "SUSPECT" || m.paused ? "warn" : "bad"),
                  m.stages.length ? m.stages.join(", ") : "relay", [...new Set(m.addresses)].join(" "),
                  m.outbound_only ? badge("outbound-only", "warn") : "dialable",
                  m.iteration, m.seconds_per_layer_sample ? fmt(m.seconds_per_layer_sample, 6) : "–"],
                 m.self ? "self" : "");
    });
    fill(document.querySelector("#members tbody"), members);
    document.getElementById("member-summary").textContent =
        sw.live_members + " live of " + sw.members.length + " known; view v" + sw.view_version +
        ", " + ago(sw.view_age_s) + " old";
    fill(document.querySelector("#links tbody"), sw.links.map(l => row([l.from, l.to,
        l.rtt_ms === null ? "–" : fmt(l.rtt_ms, 1) + " ms",
        l.mbps === null ? "–" : fmt(l.mbps, 1) + " Mbit/s"])));
    document.getElementById("link-summary").textContent =
        sw.links_total > sw.links.length ? sw.links.length + " of " + sw.links_total : "";
  } else {
    const note = row(["no view of the swarm yet"]);
    fill(document.querySelector("#members tbody"), [note]);
    fill(document.querySelector("#stage-map tbody"), []);
    fill(document.querySelector("#links tbody"), []);
  }
  const markers = st.events.filter(e => e.iteration !== null && e.kind !== "drop")
                           .map(e => ({x: e.iteration, kind: e.kind, text: e.text}));
  plot("loss-plot", st.history.filter(h => h.loss !== null).map(h => [h.iteration, h.loss]),
       "iteration", "loss", markers);
  const tput = st.history.filter(h => h.tokens_per_second !== null);
  if (tput.length) {
    plot("throughput-plot", tput.map(h => [h.iteration, h.tokens_per_second]),
         "iteration", "tokens/s", markers);
  } else {
    plot("throughput-plot", st.history.filter(h => h.iteration_seconds !== null)
         .map(h => [h.iteration, h.iteration_seconds]), "iteration", "seconds per iteration", markers);
  }
  const ev = document.getElementById("events");
  while (ev.firstChild) ev.removeChild(ev.firstChild);
  for (const e of st.events) {
    const li = el("li");
    li.appendChild(el("span", ago(Math.max(0, n.uptime_s - e.t)) + " ago", "dim k"));
    li.appendChild(el("span", e.kind, "k k-" + e.kind));
    li.appendChild(el("span", (e.iteration === null ? "" : "it " + e.iteration + ": ") + e.text));
    ev.appendChild(li);
  }
  if (st.events.length === 0) ev.appendChild(el("li", "none yet", "dim"));
}
const conn = document.getElementById("conn");
render(JSON.parse(document.getElementById("initial-status").textContent));
conn.textContent = "live";
async function refresh() {
  try {
    const r = await fetch("status.json", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    conn.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    conn.textContent = "node unreachable: " + e.message;
  }
}
setInterval(refresh, 2000);
</script></body></html>
)page";

}  // namespace

std::string RenderStatusPage(const std::string& status_json) {
  // Inside <script>, "</script" or "<!--" in a peer's text would end or
  // change the element; '<' occurs only inside JSON strings, where
  // "\u003c" is the same character to JSON.parse.
  return std::string(kHead) + absl::StrReplaceAll(status_json, {{"<", "\\u003c"}}) + kTail;
}

std::vector<HttpPage> StatusPages(const StatusBoard* board) {
  return {
      {"/", "text/html; charset=utf-8", [board] { return RenderStatusPage(board->RenderJson()); }},
      {"/status.json", "application/json", [board] { return board->RenderJson(); }},
  };
}

}  // namespace skipswarm::node
