// The console's models page: the downloads the server runs, live (bytes, rate, time left,
// cancel), read from /admin/models/pulls.json every second while one runs. Without script the
// page still works: it lists what it can, and every action is a plain form.
"use strict";
// The mapping forms: fields that do not apply to the chosen model's family are hidden and left
// out of the form (FLUX / SD 3 part files only for them, no tiny decoder or 8-bit text encoders
// for them, no negative prompt for FLUX). Without script every field shows and the server
// refuses what does not apply, with a message.
(function () {
  for (const form of document.querySelectorAll("form.model-map")) {
    const model = form.querySelector("select[name=model]");
    if (!model) continue;
    const apply = () => {
      const arch = model.selectedOptions[0]?.dataset.arch || "";
      for (const field of form.querySelectorAll("[data-archs]")) {
        const off = arch !== "" && !field.dataset.archs.split(" ").includes(arch);
        field.hidden = off;
        for (const input of field.querySelectorAll("input, select")) input.disabled = off;
      }
    };
    model.addEventListener("change", apply);
    apply();
  }
})();

(function () {
  const list = document.getElementById("pull-list");
  if (!list) return;
  const texts = JSON.parse(list.dataset.texts || "{}");
  const csrf = list.dataset.csrf || "";
  const empty = document.getElementById("downloads-empty");
  const size = (n) => {
    if (n < 1024) return n + " B";
    if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
    if (n < 1073741824) return (n / 1048576).toFixed(1) + " MiB";
    return (n / 1073741824).toFixed(2) + " GiB";
  };
  const duration = (s) => (s < 90 ? s + " s" : s < 5400 ? Math.round(s / 60) + " min" : (s / 3600).toFixed(1) + " h");
  // A download running when the page was drawn counts as seen: if it ends before the first
  // look below, the page still reloads to show what it installed.
  let running = document.getElementById("downloads").dataset.running === "true";
  let sawRunning = running;

  function item(p) {
    const li = document.createElement("li");
    li.className = "pull pull-" + p.status;
    li.id = "download-" + p.name;
    const title = document.createElement("strong");
    title.textContent = p.name + " ";
    const repo = document.createElement("span");
    repo.className = "mono muted";
    repo.textContent = p.repo;
    const bar = document.createElement("progress");
    bar.max = Math.max(p.bytes_total, 1);
    bar.value = p.bytes_done;
    bar.setAttribute("aria-label", p.name);
    const line = document.createElement("p");
    line.className = "pull-line";
    const pct = p.bytes_total ? Math.floor((100 * p.bytes_done) / p.bytes_total) : 0;
    let words = texts[p.status] || p.status;
    if (p.status === "running") {
      words = p.bytes_total
        ? `${pct}% · ${size(p.bytes_done)} / ${size(p.bytes_total)} · ${size(p.rate)}/s` +
          (p.eta_seconds != null ? ` · ${(texts.left || "{} left").replace("{}", duration(p.eta_seconds))}` : "")
        : texts.starting || "starting";
    } else if (p.error) {
      words += ": " + p.error;
    }
    line.textContent = words;
    li.append(title, repo, bar, line);
    if (p.status === "running") {
      const form = document.createElement("form");
      form.method = "post";
      form.action = "/admin/models/pull/cancel";
      form.className = "inline";
      for (const [k, v] of [["csrf", csrf], ["name", p.name]]) {
        const i = document.createElement("input");
        i.type = "hidden";
        i.name = k;
        i.value = v;
        form.append(i);
      }
      const b = document.createElement("button");
      b.type = "submit";
      b.className = "danger";
      b.textContent = texts.cancel || "Cancel";
      form.append(b);
      li.append(form);
    }
    return li;
  }

  async function refresh() {
    let data;
    try {
      const r = await fetch("/admin/models/pulls.json", { credentials: "same-origin", cache: "no-store" });
      if (!r.ok) return;
      data = await r.json();
    } catch (_) {
      return;
    }
    const pulls = data.pulls || [];
    list.replaceChildren(...pulls.map(item));
    if (empty) empty.hidden = pulls.length > 0;
    const before = running;
    running = pulls.some((p) => p.status === "running");
    if (running) sawRunning = true;
    // A download finished while the page was open: the installed list and tiers changed.
    if (before && !running && sawRunning && pulls.some((p) => p.status === "done")) {
      window.location.replace("/admin/models?done=finished");
    }
  }

  refresh();
  setInterval(() => {
    if (running || document.getElementById("downloads").dataset.live === "true") refresh();
  }, 1000);
})();
