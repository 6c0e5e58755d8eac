/* personalign results page: the row grid. Vanilla JS, no build step, no request.
   Every value from the data is written with textContent (never innerHTML). */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("page-data").textContent);
  var N = D.ids.length, S = D.strategies.length;
  var failed = D.failed.map(function (list) { var s = {}; list.forEach(function (i) { s[i] = true; }); return s; });
  var state = { disagree: false, errors: "", group: "", search: "", sort: "order", page: 0, size: 100 };
  var hay = null;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function correctOf(k, i) { var c = D.correct[k]; return c ? c[i] : null; }
  function status(k, i) {
    if (failed[k][i]) return "fail";
    var c = correctOf(k, i);
    if (c === null || c === undefined) return "unk";
    return c >= 1 ? "ok" : (c <= 0 ? "bad" : "part");
  }
  function wrong(k, i) { var s = status(k, i); return s === "bad" || s === "fail" || s === "part"; }
  function disagree(i) {
    for (var k = 1; k < S; k++) if (D.pred[k][i] !== D.pred[0][i]) return true;
    return false;
  }
  function matches(i, q) {
    if (!hay) hay = D.ids.map(function (id, j) { return (id + "\n" + D.inputs[j].join("\n") + "\n" + D.gold[j]).toLowerCase(); });
    return hay[i].indexOf(q) >= 0;
  }
  function wrongCount(k) { var n = 0; for (var i = 0; i < N; i++) if (wrong(k, i)) n++; return n; }
  function fmtScore(v) { return (v === null || v === undefined) ? "" : (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(3)); }

  function option(sel, value, text) { var o = el("option", null, text); o.value = value; sel.appendChild(o); return o; }
  function control(label, input) { var l = el("label", null, label); l.appendChild(input); return l; }

  function buildControls() {
    var box = document.getElementById("controls");
    var dis = el("input"); dis.type = "checkbox"; dis.id = "f-disagree"; dis.disabled = S < 2;
    dis.addEventListener("change", function () { state.disagree = dis.checked; state.page = 0; render(); });
    var l = el("label"); l.appendChild(dis); l.appendChild(document.createTextNode("strategies disagree"));
    l.title = S < 2 ? "one strategy: nothing to disagree with" : "rows where the strategies' outputs differ";
    box.appendChild(l);
    var err = el("select"); err.id = "f-errors";
    option(err, "", "any row");
    D.strategies.forEach(function (s, k) {
      var o = option(err, String(k), "wrong for " + s.name + (s.has_correct ? " (" + wrongCount(k) + ")" : " (not scored)"));
      o.disabled = !s.has_correct;
    });
    if (S > 1) { option(err, "all", "wrong for every strategy"); option(err, "some", "wrong for some strategies"); }
    err.addEventListener("change", function () { state.errors = err.value; state.page = 0; render(); });
    box.appendChild(control("show", err));
    if (D.group_name) {
      var grp = el("select"); grp.id = "f-group";
      option(grp, "", "all");
      var seen = {};
      D.groups.forEach(function (g) { if (g !== null && !seen[g]) { seen[g] = true; option(grp, g, g); } });
      grp.addEventListener("change", function () { state.group = grp.value; state.page = 0; render(); });
      box.appendChild(control(D.group_name + (D.cv ? " (held out)" : ""), grp));
    }
    var sort = el("select"); sort.id = "sort";
    option(sort, "order", "evaluation order");
    D.strategies.forEach(function (s, k) {
      if (s.has_scores) { option(sort, "score:" + k + ":desc", s.name + " score, high to low");
                          option(sort, "score:" + k + ":asc", s.name + " score, low to high"); }
      if (s.has_correct && D.kind !== "binary") option(sort, "correct:" + k + ":asc", s.name + " metric, low to high");
    });
    sort.addEventListener("change", function () { state.sort = sort.value; state.page = 0; render(); });
    box.appendChild(control("sort by", sort));
    var q = el("input"); q.type = "search"; q.id = "f-search"; q.placeholder = "id or text";
    q.addEventListener("input", function () { state.search = q.value.trim().toLowerCase(); state.page = 0; render(); });
    box.appendChild(control("find", q));
    var reset = el("button", null, "reset"); reset.type = "button"; reset.id = "f-reset";
    reset.addEventListener("click", function () {
      dis.checked = false; err.value = ""; sort.value = "order"; q.value = "";
      var g = document.getElementById("f-group"); if (g) g.value = "";
      state.disagree = false; state.errors = ""; state.group = ""; state.search = ""; state.sort = "order"; state.page = 0;
      render();
    });
    box.appendChild(reset);
  }

  function buildHead() {
    var tr = el("tr");
    tr.appendChild(el("th", null, "#"));
    tr.appendChild(el("th", null, "id"));
    if (D.group_name) tr.appendChild(el("th", null, D.group_name));
    var g = el("th", null, D.gold_name); g.appendChild(el("span", "sub", "gold (human label)")); tr.appendChild(g);
    D.strategies.forEach(function (s, k) {
      var th = el("th", "strat", s.name);
      th.appendChild(el("span", "sub", "output" + (s.has_scores ? " · score" : "") + " · "
        + (s.has_correct ? wrongCount(k) + " wrong of " + N : "not scored in this result")));
      tr.appendChild(th);
    });
    D.fields.forEach(function (f, j) { tr.appendChild(el("th", j === 0 ? "first-input" : null, f)); });
    document.querySelector("#grid thead").appendChild(tr);
  }

  function selected() {
    var out = [];
    for (var i = 0; i < N; i++) {
      if (state.disagree && !disagree(i)) continue;
      if (state.group && D.groups[i] !== state.group) continue;
      if (state.errors === "all" || state.errors === "some") {
        var w = 0;
        for (var k = 0; k < S; k++) if (wrong(k, i)) w++;
        if (state.errors === "all" ? w !== S : (w === 0 || w === S)) continue;
      } else if (state.errors !== "" && !wrong(+state.errors, i)) continue;
      if (state.search && !matches(i, state.search)) continue;
      out.push(i);
    }
    if (state.sort !== "order") {
      var p = state.sort.split(":"), arr = p[0] === "score" ? D.score[+p[1]] : D.correct[+p[1]], dir = p[2] === "asc" ? 1 : -1;
      out.sort(function (a, b) {
        var x = arr[a], y = arr[b];
        if (x === null || x === undefined) return (y === null || y === undefined) ? a - b : 1;
        if (y === null || y === undefined) return -1;
        return x === y ? a - b : (x < y ? -dir : dir);
      });
    }
    return out;
  }

  function row(i) {
    var tr = el("tr");
    tr.dataset.index = String(i);
    tr.appendChild(el("td", "idx", i + 1));
    tr.appendChild(el("td", "id", D.ids[i]));
    if (D.group_name) tr.appendChild(el("td", "id", D.groups[i]));
    tr.appendChild(el("td", "gold", D.gold[i]));
    for (var k = 0; k < S; k++) {
      var st = status(k, i), td = el("td", "out " + st);
      var words = { ok: "right", bad: "wrong", part: "partly right", fail: "failed", unk: "not scored" }[st];
      td.title = D.strategies[k].name + ": " + words;
      td.appendChild(el("span", "mark", { ok: "✓", bad: "✗", part: "~", fail: "⚠", unk: "?" }[st]));
      td.appendChild(el("span", "val", D.pred[k][i] === null ? "failed" : D.pred[k][i]));
      var c = correctOf(k, i);
      if (st === "part") td.appendChild(el("span", "score", "metric " + fmtScore(c)));
      if (D.score[k] && D.score[k][i] !== null && D.score[k][i] !== undefined) td.appendChild(el("span", "score", fmtScore(D.score[k][i])));
      if (D.err[k][String(i)]) td.appendChild(el("span", "why", D.err[k][String(i)]));
      tr.appendChild(td);
    }
    D.inputs[i].forEach(function (v, j) {
      var td = el("td", j === 0 ? "text first-input" : "text"); td.appendChild(el("div", null, v)); tr.appendChild(td);
    });
    tr.addEventListener("click", function () { tr.classList.toggle("open"); });
    return tr;
  }

  function render() {
    var rows = selected(), pages = Math.max(1, Math.ceil(rows.length / state.size));
    if (state.page >= pages) state.page = pages - 1;
    var start = state.page * state.size, shown = rows.slice(start, start + state.size);
    var body = document.querySelector("#grid tbody");
    var frag = document.createDocumentFragment();
    shown.forEach(function (i) { frag.appendChild(row(i)); });
    if (!shown.length) {
      var tr = el("tr"), td = el("td", "empty", "No row matches these filters.");
      td.colSpan = 3 + (D.group_name ? 1 : 0) + D.fields.length + S; tr.appendChild(td); frag.appendChild(tr);
    }
    body.replaceChildren(frag);
    var count = document.getElementById("grid-count");
    count.dataset.count = String(rows.length);
    count.dataset.total = String(N);
    count.textContent = rows.length + (rows.length === 1 ? " row" : " rows") + (rows.length < N ? " of " + N : "")
      + (shown.length < rows.length ? " · showing " + (start + 1) + "–" + (start + shown.length) : "");
    if (D.source) count.appendChild(el("span", "note", " · rows " + D.source));
    pager(pages);
  }

  function pager(pages) {
    var box = document.getElementById("pager");
    box.replaceChildren();
    if (pages <= 1 && N <= 100) return;
    var prev = el("button", null, "← previous"), next = el("button", null, "next →");
    prev.type = next.type = "button"; prev.id = "page-prev"; next.id = "page-next";
    prev.disabled = state.page === 0; next.disabled = state.page >= pages - 1;
    prev.addEventListener("click", function () { state.page--; render(); });
    next.addEventListener("click", function () { state.page++; render(); });
    var size = el("select"); size.id = "page-size";
    [50, 100, 250, 1000].forEach(function (n) { option(size, String(n), n + " a page"); });
    size.value = String(state.size);
    size.addEventListener("change", function () { state.size = +size.value; state.page = 0; render(); });
    box.appendChild(prev); box.appendChild(el("span", null, "page " + (state.page + 1) + " of " + pages));
    box.appendChild(next); box.appendChild(size);
  }

  buildControls();
  buildHead();
  render();
})();
