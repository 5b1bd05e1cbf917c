// The report's page logic: selectors over runs, landscapes and surfaces, and the plots drawn
// with Plotly from the figures embedded in #report-data (written by viz.report). No network.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var CONFIG = {responsive: true, displaylogo: false, toImageButtonOptions: {format: "png", scale: 2}};

  function $(id) { return document.getElementById(id); }

  function draw(id, fig) {
    var el = $(id);
    if (!fig) {
      if (el.data) { Plotly.purge(el); }
      el.hidden = true;
      return;
    }
    el.hidden = false;
    var layout = Object.assign({}, fig.layout, {template: D.template});
    Plotly.react(el, fig.data, layout, CONFIG);
  }

  function fill(select, labels, keep) {
    select.innerHTML = "";
    labels.forEach(function (label, i) {
      var option = document.createElement("option");
      option.value = String(i);
      option.textContent = label;
      select.appendChild(option);
    });
    var index = keep === undefined ? -1 : labels.indexOf(keep);
    select.value = String(index >= 0 ? index : 0);
    select.disabled = labels.length < 2;
  }

  // ---------------------------------------------------------------- scalars
  function showScalar() {
    var item = D.scalars[Number($("scalar-select").value)];
    draw("scalar-plot", item ? item.figure : null);
  }

  // ---------------------------------------------------------------- landscapes
  var runs = D.runs.filter(function (r) { return r.landscapes.length > 0; });

  function current() {
    var run = runs[Number($("run-select").value)];
    var ls = run ? run.landscapes[Number($("landscape-select").value)] : null;
    var names = ls ? Object.keys(ls.views) : [];
    var surface = names[Number($("surface-select").value)];
    return {run: run, ls: ls, surface: surface, view: ls ? ls.views[surface] : null};
  }

  var last = {label: undefined, surface: undefined};  // kept when another run is chosen

  function showView() {
    var c = current();
    if (!c.view) { return; }
    last = {label: c.ls.label, surface: c.surface};
    $("landscape-info").innerHTML = c.view.info;
    var plane = c.ls.dims === 2, line = c.ls.dims === 1;
    $("views").className = plane ? "views plane" : "views line";  // before drawing: the plots take its width
    draw("view-3d", plane ? c.view.surface : null);
    draw("view-contour", plane ? c.view.contour : null);
    draw("view-line", line ? c.view.line : null);
    var topo = c.ls.topology;  // the loss's persistence diagram and merge tree (an n-D grid's only figures)
    $("topology-info").innerHTML = topo ? topo.info : "";
    draw("topology-diagram", topo ? topo.diagram : null);
    draw("topology-tree", topo ? topo.tree : null);
    var hash = "run=" + encodeURIComponent(c.run.name) + "&landscape=" + encodeURIComponent(c.ls.label) +
      "&surface=" + encodeURIComponent(c.surface);
    if (window.history && window.history.replaceState) { window.history.replaceState(null, "", "#" + hash); }
  }

  function showLandscape(keepSurface) {
    var c = current();
    fill($("surface-select"), c.ls ? Object.keys(c.ls.views) : [], keepSurface);
    showView();
  }

  function showRun(keepLandscape, keepSurface) {
    var c = current();
    var tags = c.run ? c.run.landscapes.map(function (l) { return l.label; }) : [];
    fill($("landscape-select"), tags, keepLandscape);
    showLandscape(keepSurface);
  }

  // select(run name, landscape label, surface): what the selectors do, for links and tests
  function select(runName, label, surface) {
    var names = runs.map(function (r) { return r.name; });
    fill($("run-select"), names, runName);
    showRun(label, surface);
  }

  function fromHash() {
    var params = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv.length === 2) { params[kv[0]] = decodeURIComponent(kv[1]); }
    });
    return params;
  }

  function start() {
    fill($("scalar-select"), D.scalars.map(function (s) { return s.tag; }), D.default_scalar);
    $("scalar-select").addEventListener("change", showScalar);
    showScalar();
    if (runs.length) {
      var p = fromHash();
      $("run-select").addEventListener("change", function () { showRun(last.label, last.surface); });
      $("landscape-select").addEventListener("change", function () { showLandscape(last.surface); });
      $("surface-select").addEventListener("change", showView);
      select(p.run, p.landscape, p.surface);
    }
    window.landscapeReport = {select: select, current: current, data: D};
    document.body.setAttribute("data-report-ready", "true");
  }

  start();
})();
