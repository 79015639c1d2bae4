(function () {
  'use strict';
  var ROW_H = 26, LABEL_W = 150;
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#76b7b2', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#8cd17d', '#86bcb6', '#a0cbe8', '#ffbe7d'];
  var CRIT = '#dc2626', DEP = '#1d4ed8';
  /* A skipped op never ran: its start and end are one instant, which would
   * be no box at all. It gets a mark this many pixels wide, centred on
   * that instant, hatched grey with a dark outline (the legend says so). */
  var SKIPPED = -12, SKIP_W = 7, SKIP_FILL = '#e4e7ec', SKIP_INK = '#475467';

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function fmt(ns) {
    var a = Math.abs(ns);
    if (a < 1e3) return Math.round(ns) + ' ns';
    if (a < 1e6) return (ns / 1e3).toFixed(a < 1e4 ? 2 : 1) + ' \u00b5s';
    if (a < 1e9) return (ns / 1e6).toFixed(a < 1e7 ? 2 : 1) + ' ms';
    return (ns / 1e9).toFixed(2) + ' s';
  }
  function pct(a, b) { return b > 0 ? (100 * a / b).toFixed(1) + '%' : '\u2013'; }
  function num(n) { return n.toLocaleString('en-US'); }
  function fail(msg) {
    var box = $('vf-error') || el('div');
    box.id = 'vf-error';
    box.textContent = 'The report could not be drawn: ' + msg;
    document.body.insertBefore(box, document.body.firstChild);
    document.body.setAttribute('data-vf-rendered', 'error');
  }
  window.addEventListener('error', function (e) { fail(e.message); });

  var D = JSON.parse($('vf-data').textContent);
  var DEVS = D.devices || [];
  var ops = D.ops.map(function (o) {
    /* A device op the device timed has three more: device, its start, its end. */
    return { id: o[0], name: o[1], worker: o[2], start: o[3], end: o[4], ready: o[5],
      push: o[6], status: o[7], deps: o[8], succ: [],
      dev: o.length > 11 && DEVS[o[9]] !== undefined ? o[9] : -1, dstart: o[10], dend: o[11] };
  });
  var W = D.workers, span = Math.max(D.span, 1);
  ops.forEach(function (o) { if (o.dev >= 0) span = Math.max(span, o.dend); });
  var byId = new Map();
  ops.forEach(function (o) { byId.set(o.id, o); });
  ops.forEach(function (o) {
    o.deps.forEach(function (d) { var p = byId.get(d); if (p && p.succ.indexOf(o) < 0) p.succ.push(o); });
  });
  var rank = {};
  D.summary.forEach(function (r, i) { rank[r[0]] = i; });
  function color(nameIdx) { return PALETTE[rank[nameIdx] % PALETTE.length]; }
  /* One op's name: an unnamed one is "op #<id>", as in the trace. */
  function label(o) { return o.name === D.unnamed ? 'op #' + o.id : D.names[o.name]; }
  /* The critical path, and per op of it the time it adds (w) and whether
   * its work on its stream is on the path (dev): device work and stream
   * waits are part of it (src/profile/critical.c). */
  var crit = [], critW = new Map(), critDev = new Set();
  if (D.crit) D.crit.ids.forEach(function (id, i) {
    var o = byId.get(id);
    if (!o) return;
    crit.push(o);
    critW.set(o, D.crit_w ? D.crit_w[i] : o.end - o.start);
    if (D.crit_dev && D.crit_dev[i]) critDev.add(o);
  });
  var critSet = new Set(crit);
  /* Work: ops' run times on workers (each worker's time once, async ops'
   * waits for their completion not at all: D.busy, as the text summary
   * counts it) plus their device work past those run times. */
  var busy = D.busy + (D.device_beyond || 0), critLen = D.crit ? D.crit.length : 0;

  /* ---- tracks: one per worker, one for ops that ran inline ---- */
  var tracks = [];
  for (var w = 0; w < W; w++) tracks.push({ label: D.pools[w] + ' ' + w, sub: 'worker', ops: [] });
  var inline = null;
  ops.forEach(function (o) {
    var t;
    if (o.worker >= 0 && o.worker < W) t = tracks[o.worker];
    else { if (!inline) { inline = { label: 'inline', sub: 'no worker', ops: [] }; tracks.push(inline); } t = inline; }
    o.track = t;
    t.ops.push(o);
  });
  tracks.forEach(function (t, i) {
    t.index = i;
    t.ops.sort(function (a, b) { return a.start - b.start || a.id - b.id; });
    t.busy = measure(union([t])); /* ops nested above a wait once */
  });

  /* ---- device streams: under each device a lane per stream (each device
   * worker owns one), holding a slice per op over the time its work ran
   * there as the device told; the op's own slice on its worker is only its
   * function, which queued the work ---- */
  var devices = DEVS.map(function (n) { return { name: n, lanes: [] }; }), lanes = [];
  ops.forEach(function (o) {
    if (o.dev < 0) return;
    var dv = devices[o.dev], lane = null;
    for (var i = 0; i < dv.lanes.length && !lane; i++) if (dv.lanes[i].worker === o.worker) lane = dv.lanes[i];
    if (!lane) {
      var pool = o.worker >= 0 ? D.pools[o.worker] : 'inline';
      lane = { device: dv, worker: o.worker, pool: pool, copy: /copy/.test(pool), ops: [],
        label: o.worker >= 0 ? pool + ' ' + o.worker : 'inline',
        sub: (o.worker >= 0 ? 'stream of worker ' + o.worker + ' (' + pool + ')' : 'streams of inline ops') + ' on ' + dv.name };
      dv.lanes.push(lane);
    }
    o.lane = lane;
    o.slice = { op: o, id: o.id, name: o.name, status: o.status, start: o.dstart, end: o.dend, track: lane };
    lane.ops.push(o.slice);
  });
  devices.forEach(function (dv) {
    dv.lanes.sort(function (a, b) { return a.worker - b.worker; });
    dv.lanes.forEach(function (l) { lanes.push(l); });
  });
  lanes.forEach(function (t) {
    t.ops.sort(function (a, b) { return a.start - b.start || a.id - b.id; });
    t.busy = t.ops.reduce(function (s, o) { return s + o.end - o.start; }, 0);
  });
  /* Time with work on copy streams and on compute streams at once. */
  function union(list) {
    var iv = [];
    list.forEach(function (t) { t.ops.forEach(function (o) { if (o.end > o.start) iv.push([o.start, o.end]); }); });
    iv.sort(function (a, b) { return a[0] - b[0]; });
    var out = [];
    iv.forEach(function (v) {
      var last = out[out.length - 1];
      if (last && v[0] <= last[1]) last[1] = Math.max(last[1], v[1]); else out.push([v[0], v[1]]);
    });
    return out;
  }
  function measure(iv) { return iv.reduce(function (s, v) { return s + v[1] - v[0]; }, 0); }
  function overlap(a, b) {
    var t = 0, i = 0, j = 0;
    while (i < a.length && j < b.length) {
      t += Math.max(0, Math.min(a[i][1], b[j][1]) - Math.max(a[i][0], b[j][0]));
      if (a[i][1] < b[j][1]) i++; else j++;
    }
    return t;
  }

  /* ---- header, figures, verdict ---- */
  $('vf-sub').textContent = D.engine + ' engine \u00b7 ' + W + ' worker' + (W === 1 ? '' : 's') +
    ' \u00b7 ' + num(D.records) + ' ops \u00b7 varflow ' + D.version;
  var nskip = 0, nfail = 0, queued = 0;
  D.summary.forEach(function (r) { nskip += r[2]; nfail += r[3]; queued += r[8]; });
  /* What the DAG allows: its work weighed as the path weighs it (each
   * op's own time, less its waits and what ran inside it) over the path. */
  var dagWork = D.crit && D.crit.dag_work !== undefined ? D.crit.dag_work : busy;
  var par = busy / span, dagPar = critLen > 0 ? dagWork / critLen : 0;
  var used = tracks.filter(function (t) { return t !== inline && t.ops.length > 0; }).length;
  var Weff = Math.max(used, 1), R = Weff + lanes.length;
  var critDevTime = (D.crit_dn || []).reduce(function (s, v) { return s + v; }, 0);
  var cards = [
    ['Span', fmt(span), 'profile start to the last op\u2019s end', ''],
    ['Critical path', fmt(critLen), pct(critLen, span) + ' of the span \u00b7 ' + crit.length + ' ops' +
      (critDevTime > 0 ? ' \u00b7 ' + fmt(critDevTime) + ' of it device work' : ''), 'crit'],
    ['Work', fmt(busy), (lanes.length ? 'op run times ' + fmt(D.busy) + ' + device work past them ' + fmt(D.device_beyond || 0) :
      'op run times, each worker\u2019s time once' + (inline && inline.ops.length ? ', the program\u2019s threads\u2019 ops each in full' : '')) + (D.async ? '; async ops in flight ' + fmt(D.async) + ', not counted' : ''), ''],
    ['Parallelism', par.toFixed(2) + (W ? ' / ' + R : ''), 'average ops running' + (W ? ' on ' + Weff + ' worker' + (Weff > 1 ? 's' : '') + ' that ran ops' : '') +
      (lanes.length ? ' and work on ' + lanes.length + ' stream' + (lanes.length > 1 ? 's' : '') : '') + '; the DAG allows ' + dagPar.toFixed(1), ''],
    ['Ops', num(D.records), nskip + ' skipped \u00b7 ' + nfail + ' failed \u00b7 ' + num(D.dropped) + ' dropped', ''],
    ['Queued', fmt(queued), 'ready, waiting for a worker (sum)', '']];
  if (lanes.length) {
    var dwork = lanes.reduce(function (s, t) { return s + t.busy; }, 0);
    var copyIv = union(lanes.filter(function (t) { return t.copy; }));
    var compIv = union(lanes.filter(function (t) { return !t.copy; }));
    var both = overlap(copyIv, compIv), copyTime = measure(copyIv);
    var ndev = devices.filter(function (d) { return d.lanes.length; }).length;
    cards.push(['Device work', fmt(dwork), lanes.length + ' stream' + (lanes.length > 1 ? 's' : '') + ' on ' +
      ndev + ' device' + (ndev > 1 ? 's' : '') +
      (copyIv.length && compIv.length ? ' \u00b7 copies overlapped compute for ' + fmt(both) + ' (' + pct(both, copyTime) + ' of copy time)' : ''), '']);
  }
  cards.forEach(function (c) {
    var d = el('div', 'card ' + c[3]);
    d.appendChild(el('div', 'k', c[0])); d.appendChild(el('div', 'v', c[1])); d.appendChild(el('div', 'd', c[2]));
    $('vf-cards').appendChild(d);
  });
  /* The verdict is the library's (src/profile/verdict.c), so the text
   * summary and this page say the same. */
  var vbox = $('vf-verdict');
  vbox.appendChild(el('b', null, D.verdict.title));
  vbox.appendChild(document.createTextNode(' ' + D.verdict.text));
  vbox.setAttribute('data-verdict', D.verdict.kind);
  function note(t) { $('vf-notes').appendChild(el('div', 'note', t)); }
  if (D.dropped > 0) note(num(D.dropped) + ' ops were not recorded (profile_max_records): every figure covers the recorded ops only.');
  if (lanes.length) note('Device ops: an op\u2019s slice on its worker is its function, which only queues work on its stream; the lanes under ' +
    'each device show when the work ran there. Work, parallelism and the critical path count both, and the path runs through the device ' +
    'work and the stream waits between ops.');
  if (D.shown < D.records) note('The timeline shows the first ' + num(D.shown) + ' of ' + num(D.records) + ' ops; the other figures cover all of them.');

  /* ---- timeline ---- */
  var view = { t0: 0, t1: span };
  var rowsEl = $('vf-rows'), canvases = [];
  function addRow(t, cls) {
    var row = el('div', cls), lab = el('div', 'vf-label', t.label);
    lab.appendChild(el('small', null, pct(t.busy, span)));
    lab.title = t.sub + ': busy ' + fmt(t.busy) + ' (' + pct(t.busy, span) + ' of the span), ' + t.ops.length + ' ops';
    var c = el('canvas');
    c.track = t;
    row.appendChild(lab); row.appendChild(c); rowsEl.appendChild(row);
    t.row = row;
    t.canvas = c;
    canvases.push(c);
    return row;
  }
  tracks.forEach(function (t) { addRow(t, 'vf-row').setAttribute('data-track', String(t.index)); });
  devices.forEach(function (dv) {
    if (!dv.lanes.length) return;
    var g = el('div', 'vf-group');
    g.setAttribute('data-device', dv.name);
    g.appendChild(el('div', 'vf-label', dv.name));
    g.appendChild(el('div', 'vf-gtext', 'device \u00b7 a lane per stream: when each op\u2019s work ran on it'));
    rowsEl.appendChild(g);
    dv.lanes.forEach(function (t) {
      var row = addRow(t, 'vf-row vf-stream');
      row.setAttribute('data-stream', String(t.worker));
      row.setAttribute('data-device', dv.name);
    });
  });
  if (lanes.length) $('vf-tl-help').appendChild(document.createTextNode(
    ' Under each device, a lane per stream: when each op\u2019s work ran there, so copies (copy streams) are seen overlapping compute.'));
  var legend = $('vf-legend');
  [['critical path', CRIT, true], ['skipped (never ran: a hatched mark ' + SKIP_W + ' px wide at its instant)', SKIP_FILL, 'skip'],
    ['failed', '#fca5a5']].forEach(function (l) {
    var s = el('span'), sw = el('i', 'sw');
    if (l[2] === true) { sw.style.border = '2px solid ' + l[1]; sw.style.background = '#fff'; } else sw.style.background = l[1];
    if (l[2] === 'skip') { sw.className = 'sw sw-skip'; s.setAttribute('data-legend', 'skipped'); }
    s.appendChild(sw); s.appendChild(document.createTextNode(l[0])); legend.appendChild(s);
  });
  /* A skipped op's mark: hatched, outlined, never narrower than SKIP_W,
   * kept whole inside the row's width `cw` (one at the span's end). */
  function drawSkipped(ctx, x0, x1, y, h, cw) {
    var w = Math.max(SKIP_W, x1 - x0), x = (x0 + x1) / 2 - w / 2;
    if (x1 >= 0 && x0 <= cw) x = Math.max(0, Math.min(x, cw - w));
    ctx.save();
    ctx.fillStyle = SKIP_FILL; ctx.fillRect(x, y, w, h);
    ctx.beginPath(); ctx.rect(x, y, w, h); ctx.clip();
    ctx.beginPath(); ctx.strokeStyle = SKIP_INK; ctx.lineWidth = 1;
    for (var k = -h; k < w; k += 4) { ctx.moveTo(x + k, y + h); ctx.lineTo(x + k + h, y); }
    ctx.stroke();
    ctx.restore();
    ctx.strokeStyle = SKIP_INK; ctx.lineWidth = 1; ctx.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1);
    return [x, w];
  }
  function fit(c, h) {
    var r = window.devicePixelRatio || 1, w = c.clientWidth || 800;
    c.width = Math.max(1, Math.round(w * r)); c.height = Math.round(h * r); c.style.height = h + 'px';
    var ctx = c.getContext('2d');
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return { ctx: ctx, w: w, h: h };
  }
  function X(t, w) { return (t - view.t0) / (view.t1 - view.t0) * w; }
  function niceStep(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9)))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function drawAxis() {
    var g = fit($('vf-axis'), 24), ctx = g.ctx, step = niceStep((view.t1 - view.t0) / Math.max(1, g.w / 110));
    ctx.clearRect(0, 0, g.w, g.h);
    ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#667085'; ctx.strokeStyle = '#d0d5dd';
    for (var t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      var x = Math.round(X(t, g.w)) + 0.5;
      var label = t === 0 ? '0' : fmt(t);
      ctx.beginPath(); ctx.moveTo(x, 17); ctx.lineTo(x, 24); ctx.stroke();
      if (x + 3 + ctx.measureText(label).width <= g.w) ctx.fillText(label, x + 3, 13);
    }
  }
  function drawRow(t) {
    var g = fit(t.canvas, ROW_H), ctx = g.ctx, y = 3, h = ROW_H - 9;
    t.w = g.w;
    ctx.clearRect(0, 0, g.w, g.h);
    ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
    var marks = [], skipped = 0;
    for (var i = 0; i < t.ops.length; i++) {
      var o = t.ops[i], x0 = X(o.start, g.w), x1 = X(o.end, g.w);
      if (x1 < -SKIP_W || x0 > g.w + SKIP_W) continue;
      var w = Math.max(1, x1 - x0);
      if (o.status === SKIPPED) {
        var m = drawSkipped(ctx, x0, x1, y, h, g.w);
        x0 = m[0]; w = m[1]; skipped++;
      } else {
        ctx.fillStyle = o.status === 0 ? color(o.name) : '#fca5a5';
        ctx.fillRect(x0, y, w, h);
        if (o.status !== 0) { ctx.strokeStyle = '#b91c1c'; ctx.strokeRect(x0 + 0.5, y + 0.5, w - 1, h - 1); }
      }
      if (w > 44) {
        ctx.save(); ctx.beginPath(); ctx.rect(x0, y, w, h); ctx.clip();
        ctx.fillStyle = 'rgba(17,24,39,.85)'; ctx.fillText(label(o), x0 + 4, y + h / 2 + 0.5);
        ctx.restore();
      }
      if (critSet.has(o.op || o) && $('vf-showcrit').checked) marks.push([x0, w]);
    }
    /* What the page drew, for a test (and a person) to read. */
    if (t.row) t.row.setAttribute('data-skipped', String(skipped));
    /* The critical path: a red band under each of its ops, and a red
     * outline around those wide enough to keep their colour inside. */
    ctx.strokeStyle = CRIT; ctx.lineWidth = 2; ctx.fillStyle = CRIT;
    marks.forEach(function (m) {
      ctx.fillRect(m[0], y + h + 1, Math.max(1.5, m[1]), 3);
      if (m[1] >= 8) ctx.strokeRect(m[0] + 1, y + 1, m[1] - 2, h - 2);
    });
  }
  var hover = null;
  function arrow(ctx, x0, y0, x1, y1, col, dashed) {
    ctx.strokeStyle = col; ctx.fillStyle = col; ctx.lineWidth = 1.6;
    ctx.setLineDash(dashed ? [4, 3] : []);
    ctx.beginPath(); ctx.moveTo(x0, y0);
    var mx = (x0 + x1) / 2;
    ctx.bezierCurveTo(mx, y0, mx, y1, x1, y1); ctx.stroke(); ctx.setLineDash([]);
    ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x1 - 6, y1 - 3.5); ctx.lineTo(x1 - 6, y1 + 3.5); ctx.fill();
  }
  function rowMid(o) { return o.track.y + ROW_H / 2 + 1; }
  function outline(ctx, t, a, b, w) {
    var x0 = X(a, w);
    ctx.strokeRect(x0 - 1.5, t.y + 3, Math.max(1, X(b, w) - x0) + 3, ROW_H - 4);
  }
  function drawOverlay() {
    var ov = $('vf-overlay'), c0 = canvases[0];
    if (!c0) return;
    ov.style.top = rowsEl.offsetTop + 'px';
    ov.style.width = c0.clientWidth + 'px';
    tracks.concat(lanes).forEach(function (t) { t.y = t.row.offsetTop - rowsEl.offsetTop; });
    var g = fit(ov, rowsEl.offsetHeight + 2), ctx = g.ctx;
    ctx.clearRect(0, 0, g.w, g.h);
    if ($('vf-showcrit').checked)
      for (var i = 1; i < crit.length; i++) {
        /* From where the path leaves a (its work on its stream, when that
         * is on the path) to where it enters b (its work, when a's work
         * and b's are both on it: a stream wait). */
        var a = crit[i - 1], b = crit[i];
        var fa = critDev.has(a) && a.slice ? a.slice : a;
        var tb = critDev.has(a) && critDev.has(b) && b.slice ? b.slice : b;
        if (fa.track === tb.track && X(tb.start, g.w) - X(fa.end, g.w) < 12) continue;
        arrow(ctx, X(fa.end, g.w), rowMid(fa), X(tb.start, g.w), rowMid(tb), CRIT, false);
      }
    if (hover && $('vf-showdeps').checked) {
      hover.deps.forEach(function (d) {
        var p = byId.get(d);
        if (p) arrow(ctx, X(p.end, g.w), rowMid(p), X(hover.start, g.w), rowMid(hover), DEP, false);
      });
      hover.succ.forEach(function (s) { arrow(ctx, X(hover.end, g.w), rowMid(hover), X(s.start, g.w), rowMid(s), DEP, true); });
      if (hover.lane) /* from its function to its work on the stream */
        arrow(ctx, X(hover.start, g.w), rowMid(hover), X(hover.dstart, g.w), rowMid(hover.slice), '#667085', true);
      ctx.strokeStyle = '#111827'; ctx.lineWidth = 1.5;
      outline(ctx, hover.track, hover.start, hover.end, g.w);
      if (hover.lane) outline(ctx, hover.lane, hover.dstart, hover.dend, g.w);
    }
  }

  /* ---- parallelism over time: running ops (against the workers), and
   * ready ops waiting for one; each pixel shows the time-weighted mean of
   * its slice of time, so short dips between ops do not turn into noise ---- */
  /* Device work (ops whose work runs on a stream) is stacked on the ops
   * running on workers, against workers plus streams. */
  var PAR_H = 200, RUN_H = 128, GAP = 22, maxRun = 0, maxReady = 0, L = D.levels;
  L.forEach(function (l) { maxRun = Math.max(maxRun, l[1] + (l[3] || 0)); maxReady = Math.max(maxReady, l[2]); });
  function perPixel(w) {
    var run = new Float64Array(w), rdy = new Float64Array(w), dev = new Float64Array(w), len = view.t1 - view.t0;
    var lo = 0, hi = L.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (L[mid][0] <= view.t0) lo = mid + 1; else hi = mid; }
    var i = Math.max(0, lo - 1);
    for (var px = 0; px < w; px++) {
      var a = view.t0 + px / w * len, b = view.t0 + (px + 1) / w * len, r = 0, q = 0, d = 0;
      while (i + 1 < L.length && L[i + 1][0] <= a) i++;
      for (var k = i; k < L.length && L[k][0] < b; k++) {
        var s0 = Math.max(a, L[k][0]), s1 = Math.min(b, k + 1 < L.length ? L[k + 1][0] : Infinity);
        if (s1 > s0 && L[k][0] <= b) { r += L[k][1] * (s1 - s0); q += L[k][2] * (s1 - s0); d += (L[k][3] || 0) * (s1 - s0); }
      }
      run[px] = r / (b - a); rdy[px] = q / (b - a); dev[px] = d / (b - a);
    }
    return [run, rdy, dev];
  }
  function drawPar() {
    var g = fit($('vf-par'), PAR_H), ctx = g.ctx, pp = perPixel(Math.max(1, Math.round(g.w)));
    ctx.clearRect(0, 0, g.w, g.h);
    ctx.font = '11px system-ui, sans-serif';
    function panel(y0, h, vals, vmax, fillCol, lineCol, title, ref, under) {
      var bot = y0 + h;
      function Y(v) { return bot - v / vmax * (h - 4); }
      ctx.strokeStyle = '#eef0f3'; ctx.fillStyle = '#98a2b3'; ctx.lineWidth = 1;
      var ystep = niceStep(vmax / (h > 80 ? 4 : 2));
      for (var v = ystep; v < vmax; v += ystep) {
        ctx.beginPath(); ctx.moveTo(0, Math.round(Y(v)) + 0.5); ctx.lineTo(g.w, Math.round(Y(v)) + 0.5); ctx.stroke();
        ctx.fillText(String(+v.toFixed(2)), 3, Y(v) - 2);
      }
      if (under) { /* stacked: the device work above the ops running */
        ctx.beginPath(); ctx.moveTo(0, bot);
        for (var qx = 0; qx < vals.length; qx++) { var v2 = vals[qx] + under[qx]; ctx.lineTo(qx, Y(v2)); ctx.lineTo(qx + 1, Y(v2)); }
        ctx.lineTo(vals.length, bot); ctx.closePath();
        ctx.fillStyle = 'rgba(22,163,74,.25)'; ctx.fill(); ctx.strokeStyle = '#16a34a'; ctx.lineWidth = 1.2; ctx.stroke();
      }
      ctx.beginPath(); ctx.moveTo(0, bot);
      for (var px = 0; px < vals.length; px++) { ctx.lineTo(px, Y(vals[px])); ctx.lineTo(px + 1, Y(vals[px])); }
      ctx.lineTo(vals.length, bot); ctx.closePath();
      ctx.fillStyle = fillCol; ctx.fill(); ctx.strokeStyle = lineCol; ctx.lineWidth = 1.2; ctx.stroke();
      if (ref > 0) {
        ctx.setLineDash([5, 4]); ctx.strokeStyle = '#475467'; ctx.lineWidth = 1;
        ctx.beginPath(); ctx.moveTo(0, Y(ref)); ctx.lineTo(g.w, Y(ref)); ctx.stroke(); ctx.setLineDash([]);
        var refText = lanes.length ? ref + ' workers + streams' : ref + ' worker' + (ref > 1 ? 's' : '');
        ctx.fillStyle = '#475467'; ctx.fillText(refText, g.w - ctx.measureText(refText).width - 6, Y(ref) - 4);
      }
      ctx.strokeStyle = '#d0d5dd'; ctx.beginPath(); ctx.moveTo(0, bot + 0.5); ctx.lineTo(g.w, bot + 0.5); ctx.stroke();
      ctx.fillStyle = lineCol; ctx.font = '600 11px system-ui, sans-serif';
      ctx.fillText(title, 40, y0 + 10); ctx.font = '11px system-ui, sans-serif';
    }
    var refN = W + lanes.length;
    panel(4, RUN_H, pp[0], Math.max(refN, maxRun, 1) * 1.12, 'rgba(37,99,235,.25)', '#2563eb',
      lanes.length ? 'running: ops on workers (blue), work on device streams (green, above)' : 'running', refN, lanes.length ? pp[2] : null);
    panel(4 + RUN_H + GAP, PAR_H - RUN_H - GAP - 8, pp[1], Math.max(maxReady, 1) * 1.1, 'rgba(245,158,11,.25)', '#d97706', 'ready, waiting for a worker', 0);
  }

  function drawAll() {
    drawAxis();
    tracks.forEach(drawRow);
    lanes.forEach(drawRow);
    drawOverlay();
    drawPar();
    $('vf-range').textContent = fmt(view.t0) + ' \u2013 ' + fmt(view.t1) + ' (' + fmt(view.t1 - view.t0) + ' shown)';
  }

  /* ---- zoom, pan, hover ---- */
  var drag = null, tip = $('vf-tip');
  function plotX(e, c) { var r = c.getBoundingClientRect(); return { x: e.clientX - r.left, w: r.width }; }
  function zoomAt(frac, factor) {
    var len = view.t1 - view.t0, n = Math.min(span * 1.05, Math.max(200, len * factor)), at = view.t0 + frac * len;
    view.t0 = at - frac * n; view.t1 = view.t0 + n; drawAll();
  }
  function wire(c) {
    c.addEventListener('wheel', function (e) {
      e.preventDefault();
      var p = plotX(e, c);
      zoomAt(p.x / p.w, Math.exp(e.deltaY * 0.0015));
    }, { passive: false });
    c.addEventListener('mousedown', function (e) { drag = { x: e.clientX, t0: view.t0, t1: view.t1, w: c.clientWidth }; });
    c.addEventListener('dblclick', function () { view.t0 = 0; view.t1 = span; drawAll(); });
    c.addEventListener('mousemove', function (e) { if (!drag && c.track) hoverAt(e, c); });
    c.addEventListener('mouseleave', function () { if (hover) { hover = null; drawOverlay(); } tip.style.display = 'none'; });
  }
  canvases.concat([$('vf-par'), $('vf-axis')]).forEach(wire);
  window.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var dt = (e.clientX - drag.x) / drag.w * (drag.t1 - drag.t0);
    view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt; drawAll();
  });
  window.addEventListener('mouseup', function () { drag = null; });
  window.addEventListener('resize', drawAll);
  $('vf-reset').addEventListener('click', function () { view.t0 = 0; view.t1 = span; drawAll(); });
  $('vf-showcrit').addEventListener('change', drawAll);
  function hoverAt(e, c) {
    var p = plotX(e, c), t = view.t0 + p.x / p.w * (view.t1 - view.t0), tol = 3 / p.w * (view.t1 - view.t0);
    var list = c.track.ops, lo = 0, hi = list.length, best = null;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (list[mid].start <= t + tol) lo = mid + 1; else hi = mid; }
    for (var i = lo - 1; i >= 0 && i >= lo - 64; i--) {
      var o = list[i];
      if (o.end + tol >= t && (!best || o.start > best.start)) best = o;
    }
    if (best && best.op) best = best.op; /* a device slice: its op */
    if (best !== hover) { hover = best; drawOverlay(); }
    if (!best) { tip.style.display = 'none'; return; }
    var rows = [['id', '#' + best.id], ['worker', best.track.label], ['start', fmt(best.start)],
      ['run time', fmt(best.end - best.start)], ['waited for deps', fmt(best.ready - best.push)],
      ['queued (ready \u2192 start)', fmt(best.start - best.ready)],
      ['status', best.status === 0 ? 'ok' : best.status === SKIPPED ? 'skipped (never ran)' : 'failed (' + best.status + ')'],
      ['deps \u2192 this \u2192 succ', best.deps.length + ' \u2192 \u00b7 \u2192 ' + best.succ.length]];
    if (best.lane) rows.splice(4, 0, ['stream', best.lane.sub], ['device start', fmt(best.dstart)],
      ['device run time', fmt(best.dend - best.dstart)], ['queued on the stream', fmt(best.dstart - best.start)]);
    if (best.lane) rows[3][0] = 'run time (queuing it)';
    tip.innerHTML = '';
    tip.appendChild(el('b', null, label(best)));
    if (critSet.has(best)) { var cp = el('div', null, 'on the critical path'); cp.style.color = '#fca5a5'; tip.appendChild(cp); }
    rows.forEach(function (r) { var d = el('div', 'r'); d.appendChild(el('span', null, r[0])); d.appendChild(el('span', null, r[1])); tip.appendChild(d); });
    tip.style.display = 'block';
    var x = e.clientX + 14, y = e.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = e.clientX - tip.offsetWidth - 14;
    if (y + tip.offsetHeight > window.innerHeight - 8) y = e.clientY - tip.offsetHeight - 14;
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }

  /* ---- top ops, critical path breakdown ---- */
  function bars(box, items, max, fmtv) {
    items.forEach(function (it) {
      var b = el('div', 'bar'), n = el('div', 'n'), t = el('div', 't'), i = el('i');
      var dot = el('span', 'sw'); dot.style.background = it.color;
      n.appendChild(dot); n.appendChild(document.createTextNode(it.name)); n.title = it.name;
      i.style.width = (max > 0 ? Math.max(0.5, 100 * it.v / max) : 0) + '%'; i.style.background = it.color;
      t.appendChild(i); b.appendChild(n); b.appendChild(t); b.appendChild(el('div', 'x', fmtv(it)));
      box.appendChild(b);
    });
  }
  var top = D.summary.slice(0, 12).map(function (r) { return { name: D.names[r[0]], v: r[4], color: color(r[0]), n: r[1] }; });
  /* Each name's total (its ops' end - start, an async op's wait for its
   * completion and ops nested above a wait included) as a share of all
   * names' totals: of Work, a smaller sum, it passed 100%. */
  var allRun = D.summary.reduce(function (s, r) { return s + r[4]; }, 0);
  bars($('vf-top'), top, top.length ? top[0].v : 0, function (it) { return fmt(it.v) + ' \u00b7 ' + pct(it.v, allRun); });
  var agg = {};
  crit.forEach(function (o) {
    var a = agg[o.name] || (agg[o.name] = { name: D.names[o.name], v: 0, n: 0, color: color(o.name) });
    a.v += critW.get(o); a.n++;
  });
  var critAgg = Object.keys(agg).map(function (k) { return agg[k]; }).sort(function (a, b) { return b.v - a.v; }).slice(0, 12);
  $('vf-crit-help').textContent = crit.length ? crit.length + ' ops, ' + fmt(critLen) + ' of run time' +
    (critDevTime > 0 ? ' (' + fmt(critDevTime) + ' of it work on device streams)' : '') + ' = ' + pct(critLen, span) +
    ' of the span; from its first op\u2019s start to its last op\u2019s end it took ' + fmt(D.crit.elapsed) + ', so the chain waited ' +
    fmt(D.crit.elapsed - critLen) + ' between its ops. By op name:' : 'No ops recorded.';
  bars($('vf-crit'), critAgg, critAgg.length ? critAgg[0].v : 0, function (it) { return fmt(it.v) + ' \u00b7 ' + it.n + ' op' + (it.n > 1 ? 's' : ''); });

  /* ---- summary table ---- */
  var cols = [['name', 0, 's'], ['count', 1, 'n'], ['skipped', 2, 'n'], ['failed', 3, 'n'], ['total', 4, 't'],
    ['mean', 5, 't'], ['min', 6, 't'], ['max', 7, 't'], ['queued', 8, 't'], ['% of run time', 4, 'p']];
  var sortCol = 4, table = $('vf-table');
  function drawTable() {
    table.innerHTML = '';
    var head = el('thead'), tr = el('tr');
    cols.forEach(function (c, i) {
      var th = el('th', i === sortCol ? 'on' : '', c[0] + (i === sortCol ? (i === 0 ? ' \u25b2' : ' \u25bc') : ''));
      th.addEventListener('click', function () { sortCol = i; drawTable(); });
      tr.appendChild(th);
    });
    head.appendChild(tr); table.appendChild(head);
    var k = cols[sortCol][1], rows = D.summary.slice();
    rows.sort(function (a, b) {
      if (k === 0) return D.names[a[0]] < D.names[b[0]] ? -1 : 1;
      return b[k] - a[k] || (D.names[a[0]] < D.names[b[0]] ? -1 : 1);
    });
    var body = el('tbody');
    rows.forEach(function (r) {
      var tr2 = el('tr');
      cols.forEach(function (c) {
        var td = el('td');
        if (c[2] === 's') { var d = el('span', 'dot'); d.style.background = color(r[0]); td.appendChild(d); td.appendChild(document.createTextNode(D.names[r[0]])); td.title = D.names[r[0]]; }
        else td.textContent = c[2] === 'n' ? num(r[c[1]]) : c[2] === 't' ? fmt(r[c[1]]) : pct(r[4], allRun);
        tr2.appendChild(td);
      });
      body.appendChild(tr2);
    });
    table.appendChild(body);
  }
  drawTable();
  $('vf-foot').textContent = 'Run time = end \u2212 start of an op. Work = sum of run times (an op run above another\u2019s wait counted once, ' +
    'an async op\u2019s wait for its completion not at all), plus device ops\u2019 work on their streams past them; ' +
    'parallelism = work / span. The critical path is the chain of recorded dependencies (ops released by other ops\u2019 ends) with the most ' +
    'run time, through device work and stream waits for device ops: no number of workers or streams can finish this DAG sooner. ' +
    'Waiting is not part of its length. Generated by varflow ' + D.version + '.';

  drawAll();
  var done = el('div', null, tracks.length + ' rows, ' + ops.length + ' ops, ' + lanes.length + ' streams');
  done.id = 'vf-rendered'; done.hidden = true;
  document.body.appendChild(done);
  document.body.setAttribute('data-vf-rendered', 'ok');
})();
