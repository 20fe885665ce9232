// fleetsim's charts, shared by the live dashboard and report.html: one sample a second in, charts out.
// Needs Chart.js (served from the jar, or inlined into the report). Aggregates only, never devices.
"use strict";

window.FleetsimCharts = function (root, options) {
  const maxPoints = (options && options.maxPoints) || Infinity;
  // Message kinds are the device profile's: charted as the samples name them.
  const states = ["Discovering", "Tunneling", "Reporting", "ConfigDownloading", "Backoff", "Stopped", "Off"];
  const colours = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  const charts = {};
  // The run's actions (power cuts, partitions...), each drawn on every chart over its span.
  const marks = [];
  const actionsPlugin = {
    id: "fleetsimActions",
    beforeDatasetsDraw: function (c) {
      const x = c.scales.x, area = c.chartArea, ctx = c.ctx;
      ctx.save();
      marks.forEach(function (a) {
        const from = x.getPixelForValue(a.atS), to = Math.max(x.getPixelForValue(a.atS + a.forS), from + 2);
        if (to < area.left || from > area.right) return;
        const left = Math.max(from, area.left), right = Math.min(to, area.right);
        ctx.fillStyle = "rgba(225, 87, 89, 0.12)";
        ctx.fillRect(left, area.top, right - left, area.bottom - area.top);
        ctx.fillStyle = "rgba(225, 87, 89, 0.9)";
        ctx.font = "10px sans-serif";
        ctx.fillText(a.name, left + 2, area.top + 10);
      });
      ctx.restore();
    }
  };

  /** Seconds since the run's start as m:ss (h:mm:ss past an hour), as the time axis shows them. */
  function elapsed(seconds) {
    const s = Math.max(0, Math.round(seconds));
    const pad = function (n) { return (n < 10 ? "0" : "") + n; };
    const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60;
    return (h > 0 ? h + ":" + pad(m) : m) + ":" + pad(s % 60);
  }

  function chart(id, title, unit, names, parent) {
    const box = document.createElement("div");
    box.className = "chart";
    const canvas = document.createElement("canvas");
    canvas.id = "chart-" + id;
    box.appendChild(canvas);
    (parent || root).appendChild(box);
    const c = new Chart(canvas, {
      type: "line",
      data: { datasets: [] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, normalized: true,
        elements: { point: { radius: 0 }, line: { borderWidth: 1.5 } },
        plugins: { title: { display: true, text: title + (unit ? " (" + unit + ")" : "") }, legend: { labels: { boxWidth: 12 } } },
        scales: {
          x: { type: "linear", title: { display: true, text: "elapsed" }, ticks: { callback: elapsed } },
          y: { beginAtZero: true }
        }
      },
      plugins: [actionsPlugin]
    });
    const series = {};
    function line(name) {
      if (!(name in series)) {
        series[name] = c.data.datasets.length;
        const colour = colours[c.data.datasets.length % colours.length];
        c.data.datasets.push({ label: name, data: [], borderColor: colour, backgroundColor: colour });
      }
      return c.data.datasets[series[name]].data;
    }
    (names || []).forEach(line);
    charts[id] = {
      chart: c,
      put: function (x, name, y) {
        const data = line(name);
        data.push({ x: x, y: y });
        if (data.length > maxPoints) data.shift();
      }
    };
    return charts[id];
  }

  const devices = chart("devices", "Devices per state", "", states);
  const messages = chart("messages", "Replies per second by kind (ok)", "1/s", []);
  const errors = chart("errors", "Errors and 403s per second by kind", "1/s", []);
  const p99 = chart("latency", "Latency p99 by kind", "ms", []);
  const perKindBox = document.createElement("div");
  perKindBox.style.display = "contents"; // its charts sit in the page's grid, here
  root.appendChild(perKindBox);
  const perKind = {};
  function kindChart(k) {
    if (!(k in perKind)) perKind[k] = chart("latency-" + k, "Latency of " + k, "ms", ["p50", "p90", "p99", "max"], perKindBox);
    return perKind[k];
  }
  const lateness = chart("lateness", "Lateness of scheduled sends, p99", "ms", []);
  const transitions = chart("transitions", "State transitions per second", "1/s", []);
  const recovery = chart("recovery", "Backoffs and re-tunnels per second", "1/s", ["backoffs", "re-tunnels"]);
  let tunnels = null;
  let nodes = null; // a run over a cluster: devices per node, from the first sample that names nodes
  const nodeNames = [];
  const threads = chart("threads", "Process: threads and open files", "", ["threads", "open files"]);
  const memory = chart("memory", "Process: heap", "MiB", ["heap used"]);
  const cpu = chart("cpu", "Process: CPU and GC", "% / ms per s", ["cpu %", "gc ms/s"]);

  function number(id, value) {
    const el = document.getElementById(id);
    if (el) el.textContent = value;
  }

  function put(s) {
    const x = Math.round(s.elapsedS * 10) / 10;
    (s.actions || []).forEach(function (a) { marks.push(a); }); // absent from the time series of older builds
    states.forEach(function (st) { devices.put(x, st, s.devices[st] || 0); });
    Object.keys(s.rates).forEach(function (k) {
      const r = s.rates[k];
      messages.put(x, k, r.ok);
      errors.put(x, k + " failed", r.failed);
      errors.put(x, k + " 403", r.forbidden);
      // A second without replies of a kind has no latency: a gap in its line, not a 0.
      const l = r.ok + r.forbidden + r.failed > 0 ? s.latencyMs[k] : { p50: null, p90: null, p99: null, max: null };
      p99.put(x, k, l.p99);
      const own = kindChart(k);
      own.put(x, "p50", l.p50);
      own.put(x, "p90", l.p90);
      own.put(x, "p99", l.p99);
      own.put(x, "max", l.max);
    });
    Object.keys(s.latenessMs).forEach(function (k) { lateness.put(x, k, s.rates[k] && s.rates[k].sent > 0 ? s.latenessMs[k].p99 : null); });
    let backoffs = 0;
    Object.keys(s.transitions).forEach(function (t) {
      transitions.put(x, t.replace(">", " → "), s.transitions[t]);
      if (t.endsWith(">Backoff")) backoffs += s.transitions[t];
    });
    recovery.put(x, "backoffs", backoffs);
    recovery.put(x, "re-tunnels", s.tunnels ? s.tunnels.retunnelsPerS : 0);
    if (s.tunnels) {
      // MQTT connections use the same figures: opening = connecting, re-tunnels = reconnects.
      if (!tunnels) tunnels = chart("tunnels", s.tunnels.mqtt ? "MQTT connections (re-tunnels above: reconnects)" : "Tunnels", "", ["up", "opening"]);
      tunnels.put(x, "up", s.tunnels.up);
      tunnels.put(x, "opening", s.tunnels.opening);
    }
    if (s.nodes && Object.keys(s.nodes).length > 0) {
      if (!nodes) nodes = chart("nodes", "Devices per cluster node", "", []);
      Object.keys(s.nodes).forEach(function (n) { if (nodeNames.indexOf(n) < 0) nodeNames.push(n); });
      // A node lost drops to 0, where its devices left it; the others take them up.
      nodeNames.forEach(function (n) { nodes.put(x, n.replace(/^pekko:\/\/[^@]*@/, ""), s.nodes[n] || 0); });
    }
    threads.put(x, "threads", s.process.threads);
    threads.put(x, "open files", s.process.openFiles);
    memory.put(x, "heap used", Math.round(s.process.heapUsedBytes / 1048576));
    cpu.put(x, "cpu %", s.process.cpuPct);
    cpu.put(x, "gc ms/s", s.process.gcMsPerS);

    states.forEach(function (st) { number("state-" + st, s.devices[st] || 0); });
    number("running", Object.entries(s.devices).reduce(function (a, e) { return e[0] === "Off" ? a : a + e[1]; }, 0));
    number("target", s.target);
    number("rate", Math.round(Object.values(s.rates).reduce(function (a, r) { return a + r.ok + r.forbidden + r.failed; }, 0)));
    number("errors", s.errors);
  }

  function redraw() { Object.values(charts).forEach(function (c) { c.chart.update("none"); }); }

  return {
    charts: charts,
    samples: 0,
    actions: marks,
    add: function (s) { put(s); this.samples++; redraw(); },
    addAll: function (list) { list.forEach(put); this.samples += list.length; redraw(); }
  };
};
