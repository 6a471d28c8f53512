// The page of --plan-html (trainer/plan_html.h): HTML, CSS and the script that draws
// the plan from the JSON put in place of /*PLAN_DATA*/. Self-contained: no request
// leaves the page, so it opens from a file on a machine without network.
#ifndef CONVEYOR_TRAINER_PLAN_HTML_PAGE_H_
#define CONVEYOR_TRAINER_PLAN_HTML_PAGE_H_

namespace conveyor {

inline constexpr char kPlanPage[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Conveyor plan</title>
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 24px 32px; color: #1d2430; background: #fff; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h2 { font-size: 16px; margin: 28px 0 8px; }
  .sub { color: #5b6575; }
  .arith { font: 14px/1.8 ui-monospace, monospace; background: #f4f6f9; padding: 10px 14px; border-radius: 6px; }
  .legend span { display: inline-block; margin-right: 16px; }
  .legend i { display: inline-block; width: 14px; height: 14px; vertical-align: -2px; margin-right: 5px; border-radius: 2px; }
  svg text { font: 11px system-ui, sans-serif; }
  table { border-collapse: collapse; margin-top: 8px; }
  td, th { padding: 3px 10px; text-align: right; border-bottom: 1px solid #e3e7ee; }
  th { color: #5b6575; font-weight: 600; }
</style>
</head>
<body>
<h1>Conveyor plan</h1>
<div class="sub" id="summary"></div>
<h2>Batch arithmetic</h2>
<div class="arith" id="arith"></div>
<h2>Pipeline schedule (simulated, cost units)</h2>
<div class="legend" id="gantt-legend"></div>
<svg id="gantt"></svg>
<h2>Memory per pipeline rank (TP rank 0, DP rank 0)</h2>
<div class="legend" id="memory-legend"></div>
<svg id="memory"></svg>
<table id="memory-table"></table>
<script id="plan-data" type="application/json">
/*PLAN_DATA*/
</script>
<script>
"use strict";
const plan = JSON.parse(document.getElementById("plan-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const COLORS = { F: "#4e79a7", B: "#59a14f", W: "#b07aa1", idle: "#e9ecf1" };

function svgEl(parent, tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}
function legend(id, items) {
  document.getElementById(id).innerHTML = items
    .map(([name, color, extra]) => `<span><i style="background:${color};${extra || ""}"></i>${name}</span>`)
    .join("");
}
function mib(bytes) {
  return bytes >= 1024 ** 3 ? (bytes / 1024 ** 3).toFixed(2) + " GiB" : (bytes / 1024 ** 2).toFixed(2) + " MiB";
}
const pct = (x) => (100 * x).toFixed(1) + "%";

const b = plan.batch, l = plan.layout, s = plan.schedule;
document.getElementById("summary").textContent =
  `world ${l.world_size} = TP ${l.tensor_parallel} x PP ${l.pipeline_parallel} x DP ${l.data_parallel}` +
  ` · schedule ${s.name} (V ${l.virtual_stages}, costs F,B,W = ${s.costs}) · ${plan.backend}`;
document.getElementById("arith").innerHTML =
  `global batch ${b.global_batch_size} = M ${b.micro_batches} micro-batches × DP ${b.data_parallel}` +
  ` × micro-batch ${b.micro_batch_size}<br>` +
  `tokens per step = ${b.global_batch_size} × seq ${b.seq_length} = ${b.tokens_per_step}<br>` +
  `${b.tflop_per_iteration.toFixed(3)} TFLOP per iteration (Megatron's formula), padded vocabulary ${b.padded_vocab}<br>` +
  `bubble ${pct(s.bubble_formula)} (formula), ${pct(s.bubble_simulated)} (simulated), makespan ${s.makespan} units`;

// The Gantt chart: one row per pipeline rank; idle time shows the hatched background.
(function drawGantt() {
  legend("gantt-legend", [["forward", COLORS.F], ["backward", COLORS.B], ["weight gradient", COLORS.W],
    ["idle (bubble)", COLORS.idle, "background-image:repeating-linear-gradient(45deg,#c9ced8 0 2px,transparent 2px 6px)"]]);
  const svg = document.getElementById("gantt");
  // As wide as the window allows (the page is read on screens and in screenshots).
  const left = 130, rowH = 30, top = 8;
  const width = Math.max(640, Math.min(40 * s.makespan + left, document.body.clientWidth - 4));
  const unit = (width - left - 10) / s.makespan;
  const height = top + rowH * plan.timeline.length + 30;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const defs = svgEl(svg, "defs", {});
  const pat = svgEl(defs, "pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" });
  svgEl(pat, "rect", { width: 6, height: 6, fill: COLORS.idle });
  svgEl(pat, "rect", { width: 2, height: 6, fill: "#c9ced8" });
  plan.timeline.forEach((rank, r) => {
    const y = top + r * rowH;
    svgEl(svg, "text", { x: 4, y: y + rowH / 2 + 4 }, `rank ${r} · ${pct(rank.bubble)} idle`);
    svgEl(svg, "rect", { x: left, y: y + 3, width: unit * s.makespan, height: rowH - 6, fill: "url(#hatch)" });
    for (const a of rank.actions) {
      const x = left + a.start * unit, w = Math.max(1, (a.end - a.start) * unit);
      const rect = svgEl(svg, "rect", { class: "action", x, y: y + 3, width: w - 1, height: rowH - 6,
        fill: COLORS[a.kind], rx: 2 });
      svgEl(rect, "title", {}, `${a.label}: [${a.start}, ${a.end})`);
      if (w >= 18) {
        svgEl(svg, "text", { x: x + w / 2, y: y + rowH / 2 + 4, "text-anchor": "middle", fill: "#fff" }, a.label);
      }
    }
  });
  const axisY = top + rowH * plan.timeline.length + 14;
  const step = Math.max(1, Math.ceil(s.makespan / 20));
  for (let t = 0; t <= s.makespan; t += step) {
    svgEl(svg, "text", { x: left + t * unit, y: axisY, "text-anchor": "middle", fill: "#5b6575" }, String(t));
  }
})();

// Memory: one stacked bar per pipeline rank, on one scale.
(function drawMemory() {
  const parts = [["weights", "weight_bytes", "#4e79a7"], ["gradients", "grad_bytes", "#f28e2b"],
    ["optimizer", "optimizer_bytes", "#e15759"], ["activations", "activation_bytes", "#76b7b2"]];
  legend("memory-legend", parts.map(([name, , color]) => [name, color]));
  const svg = document.getElementById("memory");
  const left = 130, barH = 24, gap = 10, right = 110, width = 900;
  const max = Math.max(...plan.memory.map((m) => m.total_bytes));
  svg.setAttribute("width", width);
  svg.setAttribute("height", plan.memory.length * (barH + gap) + 4);
  plan.memory.forEach((m, i) => {
    const y = i * (barH + gap) + 2;
    svgEl(svg, "text", { x: 4, y: y + barH / 2 + 4 }, `pipeline rank ${m.pipeline_rank}`);
    let x = left;
    for (const [name, key, color] of parts) {
      const w = (width - left - right) * m[key] / max;
      const rect = svgEl(svg, "rect", { class: "memory", x, y, width: Math.max(0, w), height: barH, fill: color });
      svgEl(rect, "title", {}, `${name}: ${mib(m[key])}`);
      x += w;
    }
    svgEl(svg, "text", { x: x + 6, y: y + barH / 2 + 4 }, mib(m.total_bytes));
  });
  const head = ["pp", "parameters", "weights", "grads", "optimizer", "stashed", "act/micro-batch", "activations", "total"];
  document.getElementById("memory-table").innerHTML =
    "<tr>" + head.map((h) => `<th>${h}</th>`).join("") + "</tr>" +
    plan.memory.map((m) => "<tr>" + [m.pipeline_rank, m.parameters, mib(m.weight_bytes), mib(m.grad_bytes),
      mib(m.optimizer_bytes), m.peak_stashed, mib(m.stash_bytes_per_micro_batch), mib(m.activation_bytes),
      mib(m.total_bytes)].map((v) => `<td>${v}</td>`).join("") + "</tr>").join("");
})();
</script>
</body>
</html>
)html";

}  // namespace conveyor

#endif  // CONVEYOR_TRAINER_PLAN_HTML_PAGE_H_
