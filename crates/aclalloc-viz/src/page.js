// aclalloc's memory page: draws the data the `aclalloc viz` command embedded
// (see src/viz/model.rs for its shape). Written for this page; no library.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("aclalloc-data").textContent);
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#8c8c8c"];
  var DARK = ["#3b5d82", "#c46f1c", "#44803c", "#b8434a", "#5a918d", "#c3a22f", "#8d5f8d", "#d97a84", "#7a5a4a", "#6c6c6c"];
  var LIGHT = ["#a7bcd3", "#f8c695", "#acd0a7", "#f0abac", "#bbdbd8", "#f6e4a3", "#d7bcd0", "#ffced3", "#cdbaaf", "#c6c6c6"];
  var MARGIN = { left: 74, right: 16, top: 22, bottom: 30 };
  var HEIGHT = 380;

  var state = { device: 0, xaxis: "time", selected: -2 };
  var D = null; // the prepared device

  function $(id) { return document.getElementById(id); }
  function fmtBytes(b) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var v = b, u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return (u === 0 ? String(v) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)) + " " + units[u];
  }
  function fmtExact(b) { return fmtBytes(b) + (b >= 1024 ? " (" + b.toLocaleString("en-US") + " B)" : ""); }
  function fmtTime(us) {
    if (us < 1000) return us + " µs";
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + " ms";
    return (us / 1e6).toFixed(3) + " s";
  }
  function color(stream) { return PALETTE[stream % PALETTE.length]; }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function setupCanvas(canvas, width, height) {
    var dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }

  // ---- the data of one device --------------------------------------------

  function prepare(dev) {
    var a = dev.allocs, s = dev.segs, E = dev.t.length, N = a.size.length;
    var p = { dev: dev, E: E, N: N, a: a, s: s };
    // A session with no segments at all (tracking alone records allocations,
    // not the memory reserved behind them) has no reserved line to show.
    p.hasSegments = s.size.length > 0;
    p.evStart = new Int32Array(E).fill(-1);
    p.evEnd = new Int32Array(E).fill(-1);
    p.segStart = new Int32Array(E).fill(-1);
    p.segEnd = new Int32Array(E).fill(-1);
    var base = 0, baseRes = 0, i;
    for (i = 0; i < N; i++) {
      if (a.start[i] >= 0) p.evStart[a.start[i]] = i; else base += a.size[i];
      if (a.end[i] >= 0) p.evEnd[a.end[i]] = i;
    }
    for (i = 0; i < s.size.length; i++) {
      if (s.start[i] >= 0) p.segStart[s.start[i]] = i; else baseRes += s.size[i];
      if (s.end[i] >= 0) p.segEnd[s.end[i]] = i;
    }
    // Allocated and reserved bytes after each event.
    p.alloc = new Float64Array(E);
    p.res = new Float64Array(E);
    var cur = base, res = baseRes;
    p.peak = base; p.peakAt = -1;
    p.maxRes = baseRes;
    for (i = 0; i < E; i++) {
      if (p.evEnd[i] >= 0) cur -= a.size[p.evEnd[i]];
      if (p.evStart[i] >= 0) cur += a.size[p.evStart[i]];
      if (p.segEnd[i] >= 0) res -= s.size[p.segEnd[i]];
      if (p.segStart[i] >= 0) res += s.size[p.segStart[i]];
      p.alloc[i] = cur; p.res[i] = res;
      if (cur > p.peak) { p.peak = cur; p.peakAt = i; }
      if (res > p.maxRes) p.maxRes = res;
    }
    p.base = base; p.baseRes = baseRes;
    p.t0 = E ? dev.t[0] : 0;
    p.t1 = E ? dev.t[E - 1] : 0;
    return p;
  }

  function timeOf(p, i) { return i < 0 ? "before the trace" : fmtTime(p.dev.t[i] - p.t0); }

  // ---- the timeline --------------------------------------------------------

  // Rasterizes the stack of live allocations (a linked list in allocation
  // order) into runs [bytesFrom, bytesTo, id]: id >= 0 an allocation,
  // id < 0 band -(id+1) of small allocations of one stream merged.
  function rasterize(p, next, head, minBytes, bands) {
    var runs = [], off = 0, a = p.a;
    var bandStream = -1, bandFrom = 0, bandCount = 0, bandFirst = -1;
    function flush() {
      if (bandCount > 0) {
        bands.push({ stream: bandStream, count: bandCount, bytes: off - bandFrom, first: bandFirst });
        runs.push(bandFrom, off, -bands.length);
      }
      bandCount = 0; bandStream = -1;
    }
    for (var id = next[head]; id !== head; id = next[id]) {
      var size = a.size[id];
      if (size < minBytes) {
        if (bandCount > 0 && bandStream !== a.stream[id]) flush();
        if (bandCount === 0) { bandStream = a.stream[id]; bandFrom = off; bandFirst = id; }
        bandCount++;
        off += size;
      } else {
        flush();
        runs.push(off, off + size, id);
        off += size;
      }
    }
    flush();
    return runs;
  }

  function drawTimeline() {
    var p = D;
    var canvas = $("timeline-canvas"), overlay = $("timeline-overlay");
    var width = Math.max(640, $("timeline").clientWidth - 30);
    var ctx = setupCanvas(canvas, width, HEIGHT);
    setupCanvas(overlay, width, HEIGHT);
    var PW = Math.max(1, width - MARGIN.left - MARGIN.right);
    var PH = HEIGHT - MARGIN.top - MARGIN.bottom;
    var maxY = Math.max(p.peak, p.maxRes, 1) * 1.08;
    var useTime = state.xaxis === "time" && p.t1 > p.t0;
    var E = p.E;
    var colOf = function (i) {
      var x = useTime ? (p.dev.t[i] - p.t0) / (p.t1 - p.t0) * (PW - 1) : (E > 1 ? i / (E - 1) * (PW - 1) : 0);
      return Math.min(PW - 1, Math.max(0, Math.floor(x)));
    };
    // Per column: the event with the most bytes allocated after it (so the
    // peak is drawn exactly), the last event, and the most reserved.
    var colEv = new Int32Array(PW).fill(-1), colLast = new Int32Array(PW).fill(-1);
    var colRes = new Float64Array(PW).fill(-1);
    var evCol = new Int32Array(E);
    var i, c;
    for (i = 0; i < E; i++) {
      c = colOf(i); evCol[i] = c;
      if (colEv[c] < 0 || p.alloc[i] > p.alloc[colEv[c]]) colEv[c] = i;
      colLast[c] = i;
      if (p.res[i] > colRes[c]) colRes[c] = p.res[i];
    }
    // Sweep the events with the stack of live allocations as a linked list.
    var N = p.N, head = N;
    var next = new Int32Array(N + 1), prev = new Int32Array(N + 1);
    next[head] = head; prev[head] = head;
    function append(id) { var last = prev[head]; next[last] = id; prev[id] = last; next[id] = head; prev[head] = id; }
    function unlink(id) { next[prev[id]] = next[id]; prev[next[id]] = prev[id]; }
    for (i = 0; i < N; i++) if (p.a.start[i] < 0) append(i);
    var minBytes = maxY / PH * 1.5;
    var bands = [];
    var colRuns = new Array(PW), colState = new Int32Array(PW).fill(-2);
    var carry = rasterize(p, next, head, minBytes, bands), carryEv = -1;
    var lastRes = p.baseRes;
    var resLine = new Float64Array(PW);
    // Columns without events show the state after the last event before
    // them: here the initial state, replaced below after each event column.
    for (c = 0; c < PW; c++) {
      if (colEv[c] < 0) { colRuns[c] = carry; colState[c] = carryEv; resLine[c] = lastRes; } else resLine[c] = colRes[c];
    }
    // Second pass: walk events in order and rasterize at the chosen ones.
    var pos = 0;
    for (c = 0; c < PW; c++) {
      if (colEv[c] < 0) continue;
      for (; pos <= colLast[c]; pos++) {
        if (p.evEnd[pos] >= 0) unlink(p.evEnd[pos]);
        if (p.evStart[pos] >= 0) append(p.evStart[pos]);
        if (pos === colEv[c]) { colRuns[c] = rasterize(p, next, head, minBytes, bands); colState[c] = pos; }
      }
      if (c + 1 < PW && colEv[c + 1] < 0) {
        // Fill the empty columns that follow with the state after this column.
        carry = colEv[c] === colLast[c] ? colRuns[c] : rasterize(p, next, head, minBytes, bands);
        carryEv = colLast[c];
        lastRes = p.res[colLast[c]];
        for (var g = c + 1; g < PW && colEv[g] < 0; g++) { colRuns[g] = carry; colState[g] = carryEv; resLine[g] = lastRes; }
      }
    }
    // Columns before the first event hold the initial state (already set).
    var yOf = function (bytes) { return MARGIN.top + PH - bytes / maxY * PH; };
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, width, HEIGHT);
    // Grid and axes.
    ctx.strokeStyle = "#e3e6ea"; ctx.lineWidth = 1; ctx.fillStyle = "#5f6b7a"; ctx.font = "11px sans-serif";
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    var step = niceStep(maxY / 5);
    for (var yv = 0; yv <= maxY; yv += step) {
      var yy = Math.round(yOf(yv)) + 0.5;
      ctx.beginPath(); ctx.moveTo(MARGIN.left, yy); ctx.lineTo(MARGIN.left + PW, yy); ctx.stroke();
      ctx.fillText(fmtBytes(yv), MARGIN.left - 6, yy);
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (var k = 0; k <= 5; k++) {
      var x = MARGIN.left + k / 5 * (PW - 1);
      var label = useTime ? fmtTime(Math.round(k / 5 * (p.t1 - p.t0))) : "event " + Math.round(k / 5 * Math.max(0, E - 1));
      ctx.textAlign = k === 0 ? "left" : k === 5 ? "right" : "center";
      ctx.fillText(label, x, MARGIN.top + PH + 6);
    }
    // The stacked allocations, one pixel column at a time.
    for (c = 0; c < PW; c++) {
      var runs = colRuns[c];
      if (!runs) continue;
      for (var r = 0; r < runs.length; r += 3) {
        var id = runs[r + 2], style;
        if (id >= 0) {
          var st = p.a.stream[id] % PALETTE.length;
          style = (id & 1) ? DARK[st] : PALETTE[st];
        } else {
          style = LIGHT[bands[-id - 1].stream % LIGHT.length];
        }
        var y0 = yOf(runs[r]), y1 = yOf(runs[r + 1]);
        ctx.fillStyle = style;
        ctx.fillRect(MARGIN.left + c, y1, 1, Math.max(0.5, y0 - y1));
      }
    }
    // The reserved total (none without segments).
    if (p.hasSegments) {
      ctx.strokeStyle = "#1d232b"; ctx.lineWidth = 1.5; ctx.beginPath();
      for (c = 0; c < PW; c++) {
        var ry = yOf(resLine[c]);
        if (c === 0) ctx.moveTo(MARGIN.left, ry); else ctx.lineTo(MARGIN.left + c, ry);
      }
      ctx.stroke();
    }
    // The peak.
    var pc = p.peakAt >= 0 ? evCol[p.peakAt] : 0;
    var px = MARGIN.left + pc + 0.5, py = yOf(p.peak);
    ctx.strokeStyle = "#b3261e"; ctx.lineWidth = 1; ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(MARGIN.left, Math.round(py) + 0.5); ctx.lineTo(MARGIN.left + PW, Math.round(py) + 0.5); ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = "#b3261e";
    ctx.beginPath(); ctx.moveTo(px, py); ctx.lineTo(px - 5, py - 8); ctx.lineTo(px + 5, py - 8); ctx.closePath(); ctx.fill();
    var peakLabel = "peak " + fmtBytes(p.peak) + (p.peakAt >= 0 ? " at " + timeOf(p, p.peakAt) : "");
    ctx.font = "bold 12px sans-serif"; ctx.textBaseline = "bottom";
    var tw = ctx.measureText(peakLabel).width;
    ctx.textAlign = "left";
    ctx.fillText(peakLabel, Math.min(Math.max(MARGIN.left, px - tw / 2), MARGIN.left + PW - tw), py - 9);
    ctx.strokeStyle = "#9aa4b1"; ctx.lineWidth = 1;
    ctx.strokeRect(MARGIN.left - 0.5, MARGIN.top - 0.5, PW + 1, PH + 1);

    var tl = $("timeline");
    tl.setAttribute("data-peak-bytes", String(p.peak));
    tl.setAttribute("data-reserved-line", p.hasSegments ? "1" : "0");
    tl.setAttribute("data-events", String(E));
    tl.setAttribute("data-allocations", String(N));
    tl.setAttribute("data-columns", String(PW));
    D.view = { colRuns: colRuns, colState: colState, bands: bands, yOf: yOf, maxY: maxY, PW: PW, PH: PH, width: width };
    drawOverlay();
  }

  function niceStep(raw) {
    if (raw <= 0) return 1;
    var mag = Math.pow(2, Math.floor(Math.log2(raw)));
    var steps = [1, 1.25, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (mag * steps[i] >= raw) return mag * steps[i];
    return mag * 10;
  }

  function drawOverlay(hoverCol) {
    var v = D.view, overlay = $("timeline-overlay");
    var ctx = overlay.getContext("2d");
    var dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, v.width, HEIGHT);
    function vline(c, style, w) {
      ctx.strokeStyle = style; ctx.lineWidth = w;
      ctx.beginPath(); ctx.moveTo(MARGIN.left + c + 0.5, MARGIN.top); ctx.lineTo(MARGIN.left + c + 0.5, MARGIN.top + v.PH); ctx.stroke();
    }
    if (state.selectedCol !== undefined && state.selected !== -2) vline(state.selectedCol, "#1d232b", 2);
    if (hoverCol !== undefined) vline(hoverCol, "rgba(29,35,43,0.35)", 1);
  }

  function hitTimeline(ev) {
    var v = D.view, rect = $("timeline-overlay").getBoundingClientRect();
    var c = Math.floor(ev.clientX - rect.left - MARGIN.left);
    if (c < 0 || c >= v.PW) return null;
    var bytes = (MARGIN.top + v.PH - (ev.clientY - rect.top)) / v.PH * v.maxY;
    var runs = v.colRuns[c], found = null;
    if (runs) for (var r = 0; r < runs.length; r += 3) if (bytes >= runs[r] && bytes < runs[r + 1]) { found = runs[r + 2]; break; }
    return { col: c, state: v.colState[c], id: found };
  }

  function allocText(p, id) {
    var a = p.a;
    return "allocation " + a.addr[id] + "\n" +
      "size " + fmtExact(a.size[id]) + (a.req[id] && a.req[id] !== a.size[id] ? ", requested " + fmtExact(a.req[id]) : "") + "\n" +
      "stream " + p.dev.streams[a.stream[id]] + "\n" +
      "allocated " + timeOf(p, a.start[id]) + "\n" +
      "freed " + (a.end[id] >= 0 ? timeOf(p, a.end[id]) : "never (live at the end)") +
      (stackOf(p, id) ? "\nfrom:\n  " + stackOf(p, id).split("\n").slice(0, 12).join("\n  ") : "");
  }

  // The allocating stack of allocation `id`, one frame a line ("" if none).
  function stackOf(p, id) {
    var s = p.a.stack ? p.a.stack[id] : -1;
    return s >= 0 ? p.dev.stacks[s] : "";
  }

  function showStack(p, id) {
    var box = $("stack"), text = stackOf(p, id);
    box.textContent = "allocation " + p.a.addr[id] + ", " + fmtExact(p.a.size[id]) + "\n" +
      (text || "(no stack recorded)");
    box.className = "";
    box.setAttribute("data-alloc", String(id));
  }

  function showTip(ev, text) {
    var tip = $("tooltip");
    if (!text) { tip.hidden = true; return; }
    tip.textContent = text;
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth) x = ev.clientX - tip.offsetWidth - 10;
    if (y + tip.offsetHeight > window.innerHeight) y = ev.clientY - tip.offsetHeight - 10;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  }

  function onTimelineMove(ev) {
    var hit = hitTimeline(ev);
    if (!hit) { showTip(ev, null); drawOverlay(); return; }
    drawOverlay(hit.col);
    var p = D, text;
    var at = hit.state >= 0 ? "after event " + hit.state + " (" + timeOf(p, hit.state) + ")" : "before the first event";
    var totals = "allocated " + fmtBytes(hit.state >= 0 ? p.alloc[hit.state] : p.base) +
      (p.hasSegments ? ", reserved " + fmtBytes(hit.state >= 0 ? p.res[hit.state] : p.baseRes) : "") + "\n" + at;
    if (hit.id === null) text = totals;
    else if (hit.id >= 0) text = allocText(p, hit.id) + "\n\n" + totals;
    else {
      var b = D.view.bands[-hit.id - 1];
      text = b.count + " small allocations on stream " + p.dev.streams[b.stream] + ", " + fmtExact(b.bytes) + "\n\n" + totals;
    }
    showTip(ev, text);
  }

  function onTimelineClick(ev) {
    var hit = hitTimeline(ev);
    if (!hit) return;
    state.selected = hit.state;
    state.selectedCol = hit.col;
    if (hit.id !== null && hit.id >= 0) showStack(D, hit.id);
    drawOverlay(hit.col);
    drawSegments();
    drawTables();
  }

  // ---- segments --------------------------------------------------------------

  // The segments live after event `at` (-2: the end, from the snapshot's own
  // block lists; -1: before the first event), each with its blocks.
  function segmentsAt(p, at) {
    var s = p.s, a = p.a, list = [], i, byId = {};
    if (at === -2) {
      for (i = 0; i < s.size.length; i++) if (s.end[i] < 0) { byId[i] = { id: i, blocks: [] }; list.push(byId[i]); }
      var eb = p.dev.end_blocks;
      for (i = 0; i < eb.length; i++) {
        var seg = byId[eb[i][0]];
        if (seg) seg.blocks.push({ off: eb[i][1], size: eb[i][2], req: eb[i][3], live: eb[i][4].indexOf("active") === 0, alloc: eb[i][5] });
      }
    } else {
      for (i = 0; i < s.size.length; i++) {
        if (s.start[i] <= at && (s.end[i] < 0 || s.end[i] > at)) { byId[i] = { id: i, blocks: [] }; list.push(byId[i]); }
      }
      for (i = 0; i < p.N; i++) {
        if (a.start[i] <= at && (a.end[i] < 0 || a.end[i] > at) && byId[a.seg[i]]) {
          byId[a.seg[i]].blocks.push({ off: a.off[i], size: a.size[i], req: a.req[i], live: true, alloc: i });
        }
      }
      // What lies between the live blocks is cached, free memory.
      list.forEach(function (g) {
        g.blocks.sort(function (x, y) { return x.off - y.off; });
        var filled = [], at2 = 0, total = s.size[g.id];
        g.blocks.forEach(function (b) {
          if (b.off > at2) filled.push({ off: at2, size: b.off - at2, req: 0, live: false, alloc: -1 });
          filled.push(b); at2 = b.off + b.size;
        });
        if (at2 < total) filled.push({ off: at2, size: total - at2, req: 0, live: false, alloc: -1 });
        g.blocks = filled;
      });
    }
    list.sort(function (x, y) { return x.id - y.id; });
    return list;
  }

  var ROW = 24, LABEL = 330, MAX_ROWS = 2000;

  function drawSegments() {
    var p = D, at = state.selected;
    var segs = segmentsAt(p, at);
    $("segments-title").textContent = at === -2 ? "Segments at the end of the trace" :
      "Segments " + (at < 0 ? "before the first event" : "after event " + at + " (" + timeOf(p, at) + ")");
    var reserved = 0, live = 0, free = 0, maxSize = 1;
    segs.forEach(function (g) {
      reserved += p.s.size[g.id];
      maxSize = Math.max(maxSize, p.s.size[g.id]);
      g.blocks.forEach(function (b) { if (b.live) live += b.size; else free += b.size; });
    });
    $("segments-summary").textContent = segs.length + " segment(s), " + fmtBytes(reserved) + " reserved: " +
      fmtBytes(live) + " in live blocks, " + fmtBytes(free) + " cached and free" +
      (segs.length > MAX_ROWS ? " (the first " + MAX_ROWS + " are drawn)" : "") +
      (at !== -2 ? ". Free space between live blocks is drawn as one free block; the split points are known only at the end." : ".");
    var shown = segs.slice(0, MAX_ROWS);
    var canvas = $("segments-canvas");
    var width = Math.max(640, $("segments").clientWidth - 30);
    var height = Math.max(ROW, shown.length * ROW + 4);
    var ctx = setupCanvas(canvas, width, height);
    var BW = width - LABEL - 10;
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, width, height);
    ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
    var rects = [];
    shown.forEach(function (g, row) {
      var y = row * ROW + 3, total = p.s.size[g.id] || 1;
      var type = p.s.type[g.id];
      ctx.fillStyle = "#1d232b"; ctx.textAlign = "left";
      ctx.fillText(p.s.addr[g.id] + "  " + fmtBytes(total) + (type ? "  " + type : "") + "  stream " + p.dev.streams[p.s.stream[g.id]], 4, y + ROW / 2 - 2);
      var w = Math.max(BW * 0.12, BW * total / maxSize);
      g.blocks.forEach(function (b) {
        var x0 = LABEL + b.off / total * w, bw = Math.max(1, b.size / total * w);
        if (b.live) {
          var st = p.a.stream[b.alloc] !== undefined && b.alloc >= 0 ? p.a.stream[b.alloc] : p.s.stream[g.id];
          ctx.fillStyle = LIGHT[st % LIGHT.length]; ctx.fillRect(x0, y, bw, ROW - 6);
          var rw = b.req > 0 && b.req < b.size ? bw * b.req / b.size : bw;
          ctx.fillStyle = color(st); ctx.fillRect(x0, y, Math.max(1, rw), ROW - 6);
        } else {
          ctx.fillStyle = "#dfe3e8"; ctx.fillRect(x0, y, bw, ROW - 6);
        }
        ctx.fillStyle = "#fff"; ctx.fillRect(x0 + bw - 1, y, 1, ROW - 6); // block boundary
        rects.push({ x0: x0, x1: x0 + bw, y0: y, y1: y + ROW - 6, seg: g.id, block: b });
      });
      ctx.strokeStyle = "#9aa4b1"; ctx.lineWidth = 1; ctx.strokeRect(LABEL - 0.5, y - 0.5, w + 1, ROW - 5);
    });
    canvas.onmousemove = function (ev) {
      var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
      for (var i = 0; i < rects.length; i++) {
        var q = rects[i];
        if (x >= q.x0 && x < q.x1 && y >= q.y0 && y < q.y1) {
          var b = q.block;
          var head = "segment " + p.s.addr[q.seg] + " (" + fmtBytes(p.s.size[q.seg]) + ")\n";
          showTip(ev, head + (b.live && b.alloc >= 0 ? allocText(p, b.alloc) :
            (b.live ? "live block, " : "cached free block, ") + fmtExact(b.size) + " at offset " + fmtBytes(b.off)));
          return;
        }
      }
      showTip(ev, null);
    };
    canvas.onmouseleave = function (ev) { showTip(ev, null); };
    canvas.onclick = function (ev) {
      var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
      rects.forEach(function (q) {
        if (x >= q.x0 && x < q.x1 && y >= q.y0 && y < q.y1 && q.block.live && q.block.alloc >= 0) showStack(p, q.block.alloc);
      });
    };
    canvas.setAttribute("data-segments", String(segs.length));
  }

  // ---- tables -------------------------------------------------------------

  function fillTable(table, head, rows, empty) {
    table.textContent = "";
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", h)); });
    table.appendChild(tr);
    if (!rows.length) { var r = el("tr"), td = el("td", empty, "muted"); td.colSpan = head.length; r.appendChild(td); table.appendChild(r); }
    rows.forEach(function (row) {
      var r = el("tr");
      row.forEach(function (cell) { r.appendChild(el("td", cell[0], cell[1] ? "num" : "")); });
      table.appendChild(r);
    });
  }

  function drawTables() {
    var p = D, a = p.a, at = state.selected, ids = [];
    for (var i = 0; i < p.N; i++) {
      var live = at === -2 ? a.end[i] < 0 : a.start[i] <= at && (a.end[i] < 0 || a.end[i] > at);
      if (live) ids.push(i);
    }
    ids.sort(function (x, y) { return a.size[y] - a.size[x]; });
    $("largest-title").textContent = "Largest live allocations " + (at === -2 ? "at the end" : at < 0 ? "before the first event" : "after event " + at) +
      " (" + ids.length + " live)";
    fillTable($("largest"), ["address", "size", "requested", "stream", "allocated at"],
      ids.slice(0, 25).map(function (id) {
        return [[a.addr[id]], [fmtExact(a.size[id]), 1], [a.req[id] ? fmtExact(a.req[id]) : "", 1], [p.dev.streams[a.stream[id]]], [timeOf(p, a.start[id])]];
      }), "no live allocation");
    // Live bytes by allocating stack, the most first.
    var groups = {}, order = [];
    ids.forEach(function (id) {
      var k = a.stack ? a.stack[id] : -1;
      if (!groups[k]) { groups[k] = { stack: k, count: 0, bytes: 0 }; order.push(groups[k]); }
      groups[k].count++; groups[k].bytes += a.size[id];
    });
    order.sort(function (x, y) { return y.bytes - x.bytes; });
    fillTable($("by-stack"), ["bytes", "allocations", "allocated from"],
      order.slice(0, 25).map(function (g) {
        var frames = g.stack >= 0 ? p.dev.stacks[g.stack].split("\n") : ["(no stack recorded)"];
        return [[fmtExact(g.bytes), 1], [String(g.count), 1], [frames.slice(0, 3).join(" \u2190 ")]];
      }), "no live allocation");
    fillTable($("ooms"), ["time", "requested", "room left"],
      p.dev.ooms.map(function (o) { return [[timeOf(p, o[0])], [fmtExact(o[1]), 1], [fmtExact(o[2]), 1]]; }),
      "none recorded");
    fillTable($("ordered-pools"), ["pool", "streams", "blocks live", "blocks peak", "allocations", "bytes live", "bytes peak"],
      (DATA.stream_ordered_pools || []).map(function (o) {
        var a = o.stats.allocation, b = o.stats.allocated_bytes;
        return [[String(o.pool)], [o.streams.join(", ")], [String(a.current), 1], [String(a.peak), 1],
          [String(a.allocated), 1], [fmtExact(b.current), 1], [fmtExact(b.peak), 1]];
      }), "none (aclrtMemPoolMallocAsync under 'aclalloc run')");
    var keys = ["kind", "stream", "allocator", "pool", "block", "address", "size", "count"];
    fillTable($("faults"), keys.concat(["details", "allocated from"]),
      DATA.faults.map(function (f) {
        var row = keys.map(function (k) { return [f[k] === undefined || f[k] === null ? "" : String(f[k]), k === "size" || k === "count"]; });
        var rest = Object.keys(f).filter(function (k) { return keys.indexOf(k) < 0 && k !== "time_ns" && k !== "frames"; })
          .map(function (k) { return k + "=" + f[k]; }).join(" ");
        row.push([rest]);
        var top = (f.frames || []).slice(0, 3).map(function (fr) { return fr.name + (fr.line ? " at " + fr.filename.split("/").pop() + ":" + fr.line : ""); });
        row.push([top.join(" \u2190 ")]);
        return row;
      }), "none (faults come from 'aclalloc run' snapshots)");
  }

  // ---- page -----------------------------------------------------------------

  function drawHeader() {
    var p = D, h = DATA.history || {};
    var parts = [p.E.toLocaleString("en-US") + " events", p.N.toLocaleString("en-US") + " allocations",
      "peak allocated " + fmtExact(p.peak)];
    if (p.hasSegments) parts.push("peak reserved " + fmtBytes(p.maxRes));
    if (p.E) parts.push("trace length " + fmtTime(p.t1 - p.t0));
    var sum = $("summary");
    sum.textContent = parts.join(" · ");
    if (h.dropped > 0) {
      sum.appendChild(el("div", "The history ring kept the last " + h.entries + " events and dropped " + h.dropped +
        " older ones: allocations made before the first kept event are drawn from the start.", "warn"));
    } else if (!p.E) {
      sum.appendChild(el("div", "No history was recorded: only the state at the end is shown. Record with " +
        "aclallocPoolRecordHistory(pool, N), ACLALLOC_RECORD_HISTORY=N or aclalloc run --history N.", "warn"));
    }
    var legend = $("legend");
    legend.textContent = "";
    p.dev.streams.forEach(function (s, i) {
      var k = el("span", undefined, "key"), sw = el("i");
      sw.style.background = color(i);
      k.appendChild(sw); k.appendChild(document.createTextNode("stream " + s));
      legend.appendChild(k);
    });
    if (p.hasSegments) {
      var k2 = el("span", undefined, "key"), line = el("i");
      k2.id = "legend-reserved";
      line.style.background = "#1d232b"; line.style.height = "2px"; line.style.verticalAlign = "3px";
      k2.appendChild(line); k2.appendChild(document.createTextNode("reserved"));
      legend.appendChild(k2);
    }
  }

  function render() {
    D = prepare(DATA.devices[state.device]);
    state.selected = -2; state.selectedCol = undefined;
    drawHeader();
    drawTimeline();
    drawSegments();
    drawTables();
  }

  var select = $("device");
  DATA.devices.forEach(function (d, i) { var o = el("option", "device " + d.device); o.value = String(i); select.appendChild(o); });
  select.onchange = function () { state.device = Number(select.value); render(); };
  $("xaxis").onchange = function () { state.xaxis = $("xaxis").value; drawTimeline(); };
  var overlay = $("timeline-overlay");
  overlay.addEventListener("mousemove", onTimelineMove);
  overlay.addEventListener("mouseleave", function (ev) { showTip(ev, null); drawOverlay(); });
  overlay.addEventListener("click", onTimelineClick);
  var resizeTimer = 0;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { drawTimeline(); drawSegments(); }, 150);
  });
  render();
  document.body.setAttribute("data-rendered", "1");
})();
