"""The page shardify.view serves: one HTML document with its CSS and JavaScript inline (no
file or host besides the viewer's own API), so that it works offline."""

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>shardify view</title>
<link rel="icon" href="data:,">
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #234; color: #fff; padding: 8px 16px; display: flex; gap: 16px; align-items: center; }
header h1 { font-size: 16px; margin: 0; font-weight: 600; }
header button { background: #456; color: #fff; border: 0; padding: 6px 12px; cursor: pointer; border-radius: 3px; }
header button.on { background: #7ab; color: #123; }
main { padding: 12px 16px; }
section { display: none; }
section.on { display: block; }
table { border-collapse: collapse; margin: 6px 0 14px; }
td, th { border-bottom: 1px solid #ddd; padding: 2px 10px 2px 0; text-align: left; vertical-align: top; }
th { font-weight: 600; }
.bar { display: inline-block; height: 12px; background: #58a; vertical-align: middle; }
.hist { display: inline-flex; align-items: flex-end; height: 40px; border-bottom: 1px solid #999; }
.hist span { width: 3px; background: #58a; }
#error { display: none; background: #fdd; color: #800; padding: 6px 16px; }
#thumbs { display: flex; flex-wrap: wrap; gap: 8px; }
#thumbs figure { margin: 0; width: 100px; cursor: pointer; text-align: center; font-size: 12px; }
#thumbs img { width: 96px; height: 96px; object-fit: contain; background: #000; image-rendering: pixelated; }
.views { display: flex; flex-wrap: wrap; gap: 16px; }
.views figure { margin: 0; }
.views img { image-rendering: pixelated; background: #000; display: block; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: middle; }
#legend li.absent { color: #999; }
#legend { list-style: none; padding: 0; }
.controls { margin: 8px 0; display: flex; gap: 12px; flex-wrap: wrap; align-items: center; }
input[type=number] { width: 80px; }
code { background: #eee; padding: 0 3px; }
</style>
</head>
<body>
<header><h1 id="title">shardify view</h1>
<button id="nav-overview">Overview</button><button id="nav-grid">Samples</button></header>
<div id="error"></div>
<main>
<section id="overview">
  <p id="summary"></p>
  <h2>Splits</h2><table id="splits"></table>
  <div id="classes-part"><h2>Classes</h2><table id="classes"></table></div>
  <div id="preprocessing-part"><h2>Preprocessing</h2><ul id="preprocessing"></ul></div>
  <h2>Fields</h2><table id="fields"></table>
  <div id="stats-part"><h2>Statistics</h2><table id="stats"></table></div>
  <div id="mask-part"><h2>Mask labels</h2><table id="masklabels"></table></div>
  <h2>Provenance</h2><table id="provenance"></table>
</section>
<section id="grid">
  <div class="controls">
    <label>split <select id="split"></select></label>
    <label id="label-choice">class <select id="label"></select></label>
    <button id="prev">&larr; previous</button><span id="page-info"></span><button id="next">next &rarr;</button>
  </div>
  <div id="thumbs"></div>
</section>
<section id="detail">
  <h2 id="detail-title"></h2>
  <div class="controls">
    <label>field <select id="picture-field"></select></label>
    <label id="channel-choice">channel <select id="channel"></select></label>
    <label>window <input type="number" id="lo" step="any"> .. <input type="number" id="hi" step="any"></label>
    <button id="auto-window">own range</button>
    <label><input type="checkbox" id="overlay" checked> mask</label>
    <label id="aspect-choice" title="each pixel as high and wide as its voxel's spacing"><input type="checkbox" id="aspect" checked> spacing</label>
  </div>
  <div class="views" id="views"></div>
  <ul id="legend"></ul>
  <div class="controls">
    <label>augmentation <select id="preset"><option value="nnunet">nnunet</option><option value="mednist">mednist</option></select></label>
    <button id="augment-button">preview 4 draws</button>
  </div>
  <div id="augment"></div>
  <h3>Fields</h3><table id="sample-fields"></table>
</section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const PAGE_SIZE = 48;
let overview = null, offset = 0, total = 0, current = null, slices = [];

function showError(message) { const e = $("error"); e.textContent = message; e.style.display = message ? "block" : "none"; }

async function api(url) {
  const r = await fetch(url);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
  return body;
}

function el(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function row(table, cells, head) {
  const tr = el("tr");
  for (const c of cells) { const td = el(head ? "th" : "td"); if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "-" : String(c); tr.appendChild(td); }
  table.appendChild(tr);
}

function fmt(x) { return typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toPrecision(4)) : x; }

function show(name) {
  for (const s of ["overview", "grid", "detail"]) $(s).classList.toggle("on", s === name);
  $("nav-overview").classList.toggle("on", name === "overview");
  $("nav-grid").classList.toggle("on", name === "grid");
}

function renderOverview() {
  const o = overview;
  $("title").textContent = "shardify view: " + o.path;
  $("summary").textContent = o.samples + (o.samples === 1 ? " sample" : " samples") + ", format version " + o.format_version;
  row($("splits"), ["split", "first sample", "samples"], true);
  for (const s of o.splits) row($("splits"), [s.name, s.first, s.count]);
  $("classes-part").style.display = o.classes.length ? "" : "none";
  const most = Math.max(1, ...o.classes.map((c) => c.count));
  row($("classes"), ["label", "class", "samples", ""], true);
  for (const c of o.classes) row($("classes"), [c.index, c.name, c.count, el("span", null, { class: "bar", style: "width:" + Math.round(200 * c.count / most) + "px" })]);
  if (o.unlabeled) row($("classes"), ["-", "unlabeled", o.unlabeled, ""]);
  row($("fields"), ["name", "kind", "dtype", "shape", "role"], true);
  for (const f of o.fields) row($("fields"), [f.name, f.kind, f.dtype, f.shape ? "[" + f.shape.map((d) => d === null ? "*" : d).join(", ") + "]" : "-", f.role]);
  $("preprocessing-part").style.display = o.preprocessing.length ? "" : "none";
  for (const step of o.preprocessing) $("preprocessing").appendChild(el("li", step));
  $("stats-part").style.display = o.stats.length ? "" : "none";
  row($("stats"), ["field", "count", "min", "max", "mean", "std", "histogram"], true);
  for (const s of o.stats) {
    const drawn = o.picture_fields.includes(s.field) && s.field !== o.mask_field;
    const cell = drawn ? el("div", null, { class: "hist", "data-field": s.field }) : "";
    row($("stats"), [s.field, s.count, fmt(s.min), fmt(s.max), fmt(s.mean), fmt(s.std), cell]);
  }
  $("mask-part").style.display = o.mask_labels.length ? "" : "none";
  row($("masklabels"), ["", o.multi_label ? "channel" : "value", "label"], true);
  for (const m of o.mask_labels) row($("masklabels"), [swatch(m.colour), m.value, m.name]);
  const p = o.provenance || {};
  for (const [k, v] of Object.entries(p)) {
    if (k === "options" && v && typeof v === "object") {
      for (const [ok, ov] of Object.entries(v)) row($("provenance"), [ok, ov]);
    } else row($("provenance"), [k, typeof v === "object" ? JSON.stringify(v) : v]);
  }
  const split = $("split");
  split.appendChild(el("option", "all splits", { value: "" }));
  for (const s of o.splits) split.appendChild(el("option", s.name + " (" + s.count + ")", { value: s.name }));
  $("label-choice").style.display = o.classes.length ? "" : "none";
  $("label").appendChild(el("option", "all classes", { value: "" }));
  for (const c of o.classes) $("label").appendChild(el("option", c.name + " (" + c.count + ")", { value: c.name }));
}

// Each picture field's histogram, bar heights on a log scale (a background's peak would hide the rest).
async function loadHistograms() {
  for (const cell of document.querySelectorAll(".hist")) {
    const h = await api("/api/histogram?" + new URLSearchParams({ field: cell.dataset.field }));
    const most = Math.log1p(Math.max(1, ...h.counts));
    for (const [k, count] of h.counts.entries()) {
      const lo = h.min + (h.max - h.min) * k / h.bins;
      cell.appendChild(el("span", null, { style: "height:" + (40 * Math.log1p(count) / most).toFixed(1) + "px",
                                          title: fmt(lo) + ": " + count }));
    }
    cell.title = "values " + fmt(h.min) + " .. " + fmt(h.max) + " in " + h.samples + " of " + h.of + " samples (log scale)";
  }
}

function swatch(colour) { return el("span", null, { class: "swatch", style: "background:" + colour }); }

async function loadPage() {
  const q = new URLSearchParams({ offset: offset, limit: PAGE_SIZE });
  if ($("split").value) q.set("split", $("split").value);
  if ($("label").value) q.set("label", $("label").value);
  const page = await api("/api/samples?" + q);
  total = page.total;
  const thumbs = $("thumbs");
  thumbs.replaceChildren();
  for (const s of page.samples) {
    const fig = el("figure", null, { class: "thumb", "data-index": s.index });
    if (overview.image_field) fig.appendChild(el("img", null, { src: "/api/image/" + s.index + ".png?size=96", alt: "sample " + s.index }));
    fig.appendChild(el("figcaption", "#" + s.index + (s.class ? " " + s.class : s.label !== null ? " label " + s.label : "")));
    fig.addEventListener("click", () => openSample(s.index).catch((e) => showError(e.message)));
    thumbs.appendChild(fig);
  }
  $("page-info").textContent = total ? (offset + 1) + ".." + Math.min(total, offset + PAGE_SIZE) + " of " + total : "no samples";
  $("prev").disabled = offset === 0;
  $("next").disabled = offset + PAGE_SIZE >= total;
}

function picture() { return current.pictures[$("picture-field").value]; }

// [rows, columns] each view is drawn at: from the voxel spacing, else one pixel per voxel.
function viewSizes(p) {
  if ($("aspect").checked && p.views) return p.views;
  const shape = p.spatial_shape;
  return shape.length === 3 ? [[shape[1], shape[2]], [shape[0], shape[2]], [shape[0], shape[1]]] : [shape];
}

function pictureUrl(axis) {
  const q = new URLSearchParams({ field: $("picture-field").value, axis: axis, mask: $("overlay").checked ? "1" : "0",
                                  aspect: $("aspect").checked ? "1" : "0" });
  if (slices[axis] !== undefined) q.set("slice", slices[axis]);
  if ($("channel").value !== "") q.set("channel", $("channel").value);
  const lo = parseFloat($("lo").value), hi = parseFloat($("hi").value);
  if (isFinite(lo) && isFinite(hi) && lo < hi) q.set("window", lo + "," + hi);
  // Small pictures enlarged by one whole factor for every view, to about 256 pixels.
  const sizes = viewSizes(picture());
  const factor = Math.floor(256 / Math.max(...sizes.flat()));
  if (factor > 1) q.set("size", String(Math.min(1024, Math.max(...sizes[axis]) * factor)));
  return "/api/image/" + current.index + ".png?" + q;
}

function renderViews() {
  const views = $("views");
  views.replaceChildren();
  const p = picture();
  if (!p) return;  // no field of this sample is a picture
  const shape = p.spatial_shape;
  const axes = shape.length === 3 ? [0, 1, 2] : [0];
  for (const axis of axes) {
    const fig = el("figure");
    const img = el("img", null, { id: "view-" + axis, alt: "axis " + axis });
    img.addEventListener("error", () => reportImageError(img.src));
    img.src = pictureUrl(axis);
    fig.appendChild(img);
    if (shape.length === 3) {
      const slider = el("input", null, { type: "range", id: "slice-" + axis, min: 0, max: shape[axis] - 1, value: slices[axis] });
      const label = el("figcaption", "axis " + axis + ", slice " + slices[axis] + " of " + shape[axis]);
      slider.addEventListener("input", () => {
        slices[axis] = parseInt(slider.value, 10);
        label.textContent = "axis " + axis + ", slice " + slices[axis] + " of " + shape[axis];
        img.src = pictureUrl(axis);
      });
      fig.appendChild(slider);
      fig.appendChild(label);
    }
    views.appendChild(fig);
  }
}

async function reportImageError(url) {
  try { const r = await fetch(url); const body = await r.json(); showError(body.error || ("HTTP " + r.status)); }
  catch (e) { showError("could not load " + url); }
}

function renderLegend() {
  const legend = $("legend");
  legend.replaceChildren();
  if (!current.mask_field) return;
  const present = new Set(current.mask_labels_present);
  const listed = new Set();
  for (const m of overview.mask_labels) {
    const li = el("li", null, { class: present.has(m.value) ? "present" : "absent" });
    li.appendChild(swatch(m.colour)); li.appendChild(document.createTextNode(m.value + " " + m.name));
    legend.appendChild(li); listed.add(m.value);
  }
  for (const v of current.mask_labels_present) if (!listed.has(v)) {
    const li = el("li", null, { class: "present" }); li.appendChild(document.createTextNode(v + " label " + v)); legend.appendChild(li);
  }
}

async function openSample(index) {
  showError("");
  current = await api("/api/sample/" + index);
  $("detail-title").textContent = "Sample " + index + (current.split ? " (" + current.split + ")" : "") + (current.class ? ": " + current.class : "");
  const choice = $("picture-field");
  choice.replaceChildren();
  for (const name of Object.keys(current.pictures)) choice.appendChild(el("option", name, { value: name }));
  if (current.image_field && current.pictures[current.image_field]) choice.value = current.image_field;
  resetChannels();
  resetSlices();
  autoWindow();
  renderViews();
  renderLegend();
  $("augment").replaceChildren();
  const table = $("sample-fields");
  table.replaceChildren();
  row(table, ["name", "kind", "dtype", "shape", "value or summary"], true);
  for (const f of current.fields) {
    let v = f.value !== undefined ? f.value : f.values !== undefined ? "[" + f.values.map(fmt).join(", ") + "]" : f.bytes !== undefined ? f.bytes + " bytes" : "";
    if (f.min !== undefined && f.values === undefined) {
      v = f.mean === null ? "no finite values" : "min " + fmt(f.min) + ", max " + fmt(f.max) + ", mean " + fmt(f.mean);
      if (f.not_finite) v += " (" + f.not_finite + " NaN or infinite left out)";
    }
    row(table, [f.name, f.kind, f.dtype, f.shape ? "[" + f.shape.join(", ") + "]" : "-", v]);
  }
  show("detail");
}

// Volumes open at the middle of the mask's labelled box where there is one, else at the middle.
function resetSlices() {
  const shape = picture() ? picture().spatial_shape : [];
  const focus = current.mask_focus && current.mask_focus.length === shape.length ? current.mask_focus : null;
  slices = shape.length === 3 ? shape.map((d, k) => focus ? focus[k] : Math.floor(d / 2)) : [];
}

// Three channels are drawn as colour unless one is chosen; other counts show one channel.
function resetChannels() {
  const p = picture(), choice = $("channel");
  choice.replaceChildren();
  const count = p ? p.channels : 1;
  $("channel-choice").style.display = count > 1 ? "" : "none";
  $("aspect-choice").style.display = p && p.spacing ? "" : "none";
  if (count === 3) choice.appendChild(el("option", "all (colour)", { value: "" }));
  for (let c = 0; c < count && count > 1; ++c) {
    choice.appendChild(el("option", c + (p.channel_names ? " " + p.channel_names[c] : ""), { value: String(c) }));
  }
  if (count === 1) choice.appendChild(el("option", "0", { value: "" }));
}

function autoWindow() {
  const p = picture(), c = $("channel").value;
  const range = p && c !== "" && p.channel_ranges ? p.channel_ranges[parseInt(c, 10)] : p ? [p.min, p.max] : ["", ""];
  $("lo").value = range[0]; $("hi").value = range[1];
}

async function start() {
  try {
    overview = await api("/api/overview");
    renderOverview();
    show("overview");
    loadHistograms().catch((e) => showError(e.message));
  } catch (e) { showError(e.message); }
  $("nav-overview").addEventListener("click", () => show("overview"));
  $("nav-grid").addEventListener("click", () => { show("grid"); loadPage().catch((e) => showError(e.message)); });
  for (const id of ["split", "label"]) $(id).addEventListener("change", () => { offset = 0; loadPage().catch((e) => showError(e.message)); });
  $("prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE_SIZE); loadPage().catch((e) => showError(e.message)); });
  $("next").addEventListener("click", () => { offset += PAGE_SIZE; loadPage().catch((e) => showError(e.message)); });
  $("picture-field").addEventListener("change", () => { resetChannels(); resetSlices(); autoWindow(); renderViews(); });
  $("channel").addEventListener("change", () => { autoWindow(); renderViews(); });
  for (const id of ["lo", "hi", "overlay", "aspect"]) $(id).addEventListener("change", renderViews);
  $("auto-window").addEventListener("click", () => { autoWindow(); renderViews(); });
  $("augment-button").addEventListener("click", () => {
    const url = "/api/augment/" + current.index + ".png?" + new URLSearchParams({ preset: $("preset").value, draws: 4 });
    const img = el("img", null, { id: "augment-img", alt: "augmented draws" });
    img.addEventListener("error", () => reportImageError(url));
    img.src = url;
    $("augment").replaceChildren(img);
  });
}
start();
</script>
</body>
</html>
"""
