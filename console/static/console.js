// gantry console: the two live parts of the pages. A job's output streams
// from the API's server-sent events; the playground streams the agent's
// answer. Everything else is plain forms and htmx. No inline script: the
// Content-Security-Policy allows only this file and htmx.
"use strict";
(function () {
  function csrf() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.content : "";
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  }
  function pathEscape(p) {
    return p.split("/").map(encodeURIComponent).join("/");
  }

  // Forms: one submission at a time.
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.id === "chat-form") return;
    setTimeout(function () {
      f.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
    }, 0);
  });

  // A running job's live output.
  var out = document.getElementById("output");
  if (out && out.dataset.logs) {
    var streams = { stdout: document.getElementById("stdout"), stderr: document.getElementById("stderr") };
    streams.stdout.textContent = "";
    streams.stderr.textContent = "";
    var es = new EventSource(out.dataset.logs);
    ["stdout", "stderr"].forEach(function (name) {
      es.addEventListener(name, function (e) {
        try { streams[name].textContent += JSON.parse(e.data).data; } catch (_) { /* a malformed chunk */ }
      });
    });
    es.addEventListener("status", function (e) {
      es.close();
      try {
        var st = JSON.parse(e.data), badge = document.getElementById("status");
        if (badge) { badge.textContent = st.status; badge.className = "badge " + st.status; }
      } catch (_) { /* the reload shows it */ }
      window.location.reload(); // the finished job: exit code, times, artifacts
    });
    es.onerror = function () {
      // The stream broke before the job ended: read the job afresh rather
      // than let EventSource replay its output.
      es.close();
      setTimeout(function () { window.location.reload(); }, 2000);
    };
  }

  // The agent playground.
  var form = document.getElementById("chat-form");
  if (!form) return;
  var chat = document.getElementById("chat");
  var prompt = document.getElementById("prompt");
  var send = document.getElementById("send");
  var history = [];

  prompt.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  document.getElementById("new-chat").addEventListener("click", function () {
    history = [];
    chat.replaceChildren();
    prompt.focus();
  });

  function errorText(resp) {
    return resp.text().then(function (t) {
      try {
        var j = JSON.parse(t);
        if (j.error && j.error.message) return j.error.message;
      } catch (_) { /* not JSON */ }
      if (resp.status === 401) return "your sign-in has expired: reload the page and sign in again";
      return "the console answered " + resp.status + " " + resp.statusText;
    });
  }

  function toolView(calls, ev, answer) {
    var t = calls[ev.id];
    if (!t) {
      t = el("details", "tool");
      t.summary = el("summary", "", "Running " + ev.name + "…");
      t.append(t.summary);
      var args = ev.arguments;
      var code = args && typeof args === "object" && typeof args.code === "string" ? args.code : JSON.stringify(args, null, 2);
      t.append(el("pre", "", code));
      calls[ev.id] = t;
      answer.append(t);
    }
    if (ev.type !== "tool_result") return;
    t.summary.textContent = (ev.ok ? "✓ " : "✗ ") + ev.name + (ev.status ? " (" + ev.status + ")" : "");
    t.append(el("pre", "", ev.result || ""));
    if (ev.job_id) {
      var link = el("a", "", "job " + ev.job_id);
      link.href = "/console/jobs/" + encodeURIComponent(ev.job_id);
      var p = el("p");
      p.append(link);
      t.append(p);
    }
    var imgs = (ev.artifacts || []).filter(function (a) { return /^image\/(png|jpeg|gif|webp|svg\+xml)/.test(a.content_type); });
    if (imgs.length) {
      var box = el("div", "images");
      imgs.forEach(function (a) {
        var img = el("img");
        img.src = "/console/jobs/" + encodeURIComponent(ev.job_id) + "/artifacts/" + pathEscape(a.path);
        img.alt = a.path + ", a figure the agent's code drew";
        box.append(img);
      });
      answer.append(box); // plots stay visible with the details closed
    }
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = prompt.value.trim();
    if (!text) return;
    history.push({ role: "user", content: text });
    chat.append(el("div", "msg user", text));
    prompt.value = "";
    send.disabled = true;
    var answer = el("div", "msg assistant");
    answer.setAttribute("aria-busy", "true");
    chat.append(answer);
    var calls = {}, content = "", segment = null;

    function onChunk(ch) {
      if (ch.error) throw new Error(ch.error.message);
      if (ch.gantry) { segment = null; toolView(calls, ch.gantry, answer); return; }
      var d = ch.choices && ch.choices[0] && ch.choices[0].delta;
      if (d && d.content) {
        content += d.content;
        if (!segment) { segment = el("div", "text"); answer.append(segment); }
        segment.textContent += d.content;
      }
    }

    fetch("/console/playground/chat", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify({ messages: history })
    }).then(function (resp) {
      if (!resp.ok) return errorText(resp).then(function (m) { throw new Error(m); });
      var reader = resp.body.getReader(), dec = new TextDecoder(), buf = "";
      function pump() {
        return reader.read().then(function (r) {
          if (r.done) return;
          buf += dec.decode(r.value, { stream: true });
          var i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            var block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            block.split("\n").forEach(function (line) {
              if (line.indexOf("data:") !== 0) return;
              var data = line.slice(5).trim();
              if (data === "[DONE]") return;
              onChunk(JSON.parse(data));
            });
          }
          return pump();
        });
      }
      return pump();
    }).then(function () {
      history.push({ role: "assistant", content: content });
    }).catch(function (err) {
      history.pop();
      var m = el("div", "msg error", err.message);
      m.setAttribute("role", "alert");
      chat.append(m);
    }).finally(function () {
      answer.removeAttribute("aria-busy");
      if (!answer.childNodes.length) answer.remove();
      send.disabled = false;
      prompt.focus();
    });
  });
})();
