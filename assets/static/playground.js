// Pictor playground (/playground). Drives the page through the session-authenticated JSON
// endpoints under /playground/api/ (the image API's validation, prices and job engine):
// generate and edit, follow the job with long-polls until its picture is ready, keep the
// balance, the prices and the gallery current. Served as a file because the pages' CSP forbids
// inline scripts; every text from the server goes into the page with textContent. Its own texts
// come in the page's language from the page (`data-texts` of #pg: the catalogue's
// `playground.js.*`); `t(key)` reads one.
(function () {
  'use strict';

  const root = document.getElementById('pg');
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const meta = document.querySelector('meta[name="csrf-token"]');
  const csrf = meta ? meta.getAttribute('content') : '';
  const MAX_UPLOAD = 20 * 1024 * 1024;
  const MAX_PROMPT = Number(root.dataset.maxPrompt) || 4000;

  const state = {
    balance: Number(root.dataset.balance) || 0,
    dailyLimit: Number(root.dataset.dailyLimit) || 0,
    dailyUsed: Number(root.dataset.dailyUsed) || 0,
    editPrice: Number(root.dataset.editPrice) || 0,
    busy: false,
    jobs: new Map(), // job id -> job view, for the gallery and result buttons
    nextBefore: null,
    galleryIds: new Set(),
  };

  const gen = {
    form: $('gen-form'), prompt: $('gen-prompt'), model: $('gen-model'), ratio: $('gen-ratio'),
    seed: $('gen-seed'), enhance: $('gen-enhance'), submit: $('gen-submit'),
    price: $('gen-price'), unit: $('gen-price-unit'), size: $('gen-size'), count: $('gen-count'),
    warn: $('gen-warn'), error: $('gen-error'),
  };
  const edit = {
    form: $('edit-form'), file: $('edit-file'), fileWrap: $('edit-file-wrap'), prompt: $('edit-prompt'),
    sourceJob: $('edit-source-job'), source: $('edit-source'), sourceImg: $('edit-source-img'),
    sourceText: $('edit-source-text'), sourceClear: $('edit-source-clear'), submit: $('edit-submit'),
    price: $('edit-price'), unit: $('edit-price-unit'), warn: $('edit-warn'), error: $('edit-error'),
  };
  const job = {
    box: $('job'), badge: $('job-badge'), status: $('job-status'), elapsed: $('job-elapsed'),
    progress: $('job-progress'), error: $('job-error'), figure: $('job-figure'), img: $('job-img'),
    facts: $('job-facts'), actions: $('job-actions'), cancel: $('job-cancel'),
    scene: $('job-scene'),
  };

  // ---- texts ---------------------------------------------------------------------------------

  const LANG = (document.documentElement.lang || 'en').toLowerCase();
  const TEXTS = (() => {
    try {
      const parsed = JSON.parse(root.dataset.texts || '{}');
      return parsed && typeof parsed === 'object' ? parsed : {};
    } catch (e) {
      return {};
    }
  })();

  /** The text of `key` (the key itself if the page lacks it), each `{}` replaced by the next arg. */
  function t(key, ...args) {
    const text = Object.prototype.hasOwnProperty.call(TEXTS, key) ? String(TEXTS[key]) : key;
    const parts = text.split('{}');
    let out = parts[0];
    for (let i = 1; i < parts.length; i++) {
      out += (i <= args.length ? String(args[i - 1]) : '{}') + parts[i];
    }
    return out;
  }

  /** The plural form of a count, as the server's: English one/many, Russian one/few/many. */
  function pluralForm(n) {
    if (LANG === 'ru') {
      const d = Math.abs(n) % 10;
      const h = Math.abs(n) % 100;
      if (d === 1 && h !== 11) return 'one';
      if (d >= 2 && d <= 4 && (h < 12 || h > 14)) return 'few';
      return 'many';
    }
    return n === 1 ? 'one' : 'many';
  }

  const creditsWord = (n) => ({ one: t("credits.one"), few: t("credits.few"), many: t("credits.many") })[pluralForm(n)];
  const picturesOfWord = (n) => ({ one: t("pictures_of.one"), few: t("pictures_of.few"), many: t("pictures_of.many") })[pluralForm(n)];
  const credits = (n) => n + ' ' + creditsWord(n);
  /** A number with one decimal, as the page's language writes it. */
  function decimal1(x) {
    try {
      return new Intl.NumberFormat(LANG, { minimumFractionDigits: 1, maximumFractionDigits: 1, useGrouping: false }).format(x);
    } catch (e) {
      return x.toFixed(1);
    }
  }

  // The buttons' labels while idle, as the page has them.
  const GENERATE_LABEL = gen.submit.textContent;
  const EDIT_LABEL = edit.submit.textContent;

  // ---- small helpers -------------------------------------------------------------------------

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function show(el, on) {
    if (el) el.hidden = !on;
  }

  function say(el, text) {
    el.textContent = text || '';
    show(el, !!text);
  }

  /** Announces a short message to screen readers (the visible page says it too). */
  function announce(text) {
    const live = $('pg-announce');
    live.textContent = '';
    setTimeout(() => { live.textContent = text; }, 50);
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? '' : String(v));
    }
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function modelName(id) {
    const opt = Array.from(gen.model.options).find((o) => o.value === id);
    return opt ? opt.dataset.name : id === 'edit' ? t("edit") : id;
  }

  /** Width × height of a generation, as the server computes it (auto is decided from the prompt). */
  function sizeOf(longSide, ratio) {
    const m = /^(\d+):(\d+)$/.exec(ratio);
    if (!m) return null;
    const a = Number(m[1]);
    const b = Number(m[2]);
    return a >= b ? [longSide, Math.round((longSide * b) / a)] : [Math.round((longSide * a) / b), longSide];
  }

  /** One request to the playground API; resolves to {status, body} and never throws. */
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
    let payload;
    if (body instanceof FormData) {
      payload = body;
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
    } catch (e) {
      return { status: 0, body: { ok: false, error_code: 'network', error: t("network") } };
    }
    let data;
    try {
      data = await resp.json();
    } catch (e) {
      data = { ok: false, error_code: 'internal_error', error: t("unexpected", resp.status) };
    }
    return { status: resp.status, body: data || {} };
  }

  /** A friendly message for an error body of the image API. */
  function errorText(body) {
    const code = body && body.error_code;
    const msg = (body && body.error) || t("error");
    switch (code) {
      case 'unauthorized': return t("error.unauthorized");
      case 'csrf_failed': return t("error.csrf");
      case 'job_busy': return t("error.busy");
      case 'invalid_image': return t("error.invalid_image");
      case 'image_too_large': return t("error.too_large");
      default: return msg.charAt(0).toUpperCase() + msg.slice(1);
    }
  }

  // ---- balance, prices, limits -----------------------------------------------------------------

  function renderStats() {
    $('pg-balance').textContent = String(state.balance);
    $('pg-balance-unit').textContent = creditsWord(state.balance);
    $('pg-daily-used').textContent = String(state.dailyUsed);
    $('pg-daily-limit').textContent = String(state.dailyLimit);
    $('pg-daily-unit').textContent = picturesOfWord(state.dailyLimit);
    updateGenerate();
    updateEdit();
  }

  function updateGenerate() {
    const opt = gen.model.selectedOptions[0];
    const price = opt ? Number(opt.dataset.price) : 0;
    gen.price.textContent = String(price);
    gen.unit.textContent = creditsWord(price);
    const size = opt ? sizeOf(Number(opt.dataset.longSide), gen.ratio.value) : null;
    gen.size.textContent = ' · ' + (size ? t("size", size[0], size[1]) : t("size.auto"));
    let warn = '';
    if (price > state.balance) {
      warn = t("warn.credits", credits(price), state.balance);
    } else if (state.dailyLimit > 0 && state.dailyUsed >= state.dailyLimit) {
      warn = t("warn.daily", state.dailyUsed, state.dailyLimit);
    }
    say(gen.warn, warn);
    gen.submit.disabled = state.busy || !!warn;
    gen.submit.textContent = state.busy ? t("working") : GENERATE_LABEL;
    const chars = Array.from(gen.prompt.value).length;
    gen.count.textContent = chars + ' / ' + MAX_PROMPT;
  }

  function updateEdit() {
    edit.price.textContent = String(state.editPrice);
    edit.unit.textContent = creditsWord(state.editPrice);
    const warn = state.editPrice > state.balance
      ? t("warn.edit_credits", credits(state.editPrice), state.balance)
      : '';
    say(edit.warn, warn);
    edit.submit.disabled = state.busy || !!warn;
    edit.submit.textContent = state.busy ? t("working") : EDIT_LABEL;
  }

  /** Re-reads the balance, the daily count and the prices (they are operator settings). */
  async function refreshProfile() {
    const [me, models] = await Promise.all([
      api('GET', '/playground/api/me'),
      api('GET', '/api/pictor/v1/models'),
    ]);
    if (me.status === 200 && me.body.ok) {
      state.balance = me.body.balance;
      state.dailyLimit = me.body.daily_limit;
      state.dailyUsed = me.body.daily_used;
    }
    if (models.status === 200 && models.body.ok) {
      for (const m of models.body.models) {
        const opt = Array.from(gen.model.options).find((o) => o.value === m.id);
        if (!opt) continue;
        opt.dataset.price = String(m.price);
        // The page's own name (in its language) and engine; only the price is news.
        opt.textContent = [opt.dataset.name, opt.dataset.engine, credits(m.price)].filter(Boolean).join(' · ');
      }
      state.editPrice = models.body.edit_price;
    }
    renderStats();
  }

  // ---- the job card ----------------------------------------------------------------------------

  const STATUS = {
    queued: [t("status.queued"), t("status.queued.text")],
    running: [t("status.running"), t("status.running.text")],
    done: [t("status.done"), t("status.done.text")],
    failed: [t("status.failed"), t("status.failed.text")],
  };

  let ticker = null;
  let tickFrom = 0;

  function tick() {
    const secs = Math.max(0, Math.floor((Date.now() - tickFrom) / 1000));
    job.elapsed.textContent = t("seconds", secs);
  }

  function startTicker(from) {
    stopTicker();
    tickFrom = from;
    show(job.elapsed, true);
    tick();
    ticker = setInterval(tick, 1000);
  }

  function stopTicker() {
    if (ticker) clearInterval(ticker);
    ticker = null;
  }

  function setStatus(status, text) {
    const [label, sentence] = STATUS[status] || [status, ''];
    job.box.dataset.state = status;
    job.badge.textContent = label;
    job.badge.className = 'pg-badge pg-badge-' + status;
    show(job.badge, true);
    job.status.textContent = text || sentence;
    const active = status === 'queued' || status === 'running';
    show(job.progress, active);
    show(job.cancel, active);
    if (!active) setProgress(null);
  }

  /** The bar: a fraction 0..1, or null for "under way, amount unknown" (the sliding bar). */
  function setProgress(fraction) {
    const bar = job.progress.firstElementChild;
    if (fraction === null || fraction === undefined) {
      delete job.progress.dataset.known;
      job.progress.removeAttribute('aria-valuenow');
      bar.style.width = '';
      return;
    }
    const pct = Math.round(Math.max(0, Math.min(1, fraction)) * 100);
    job.progress.dataset.known = '';
    job.progress.setAttribute('aria-valuenow', String(pct));
    bar.style.width = pct + '%';
  }

  // "2nd", "3rd"… in English; the other languages' texts put the number into words themselves.
  const ordinal = (n) => (LANG !== 'en' ? String(n)
    : n + (n % 100 >= 11 && n % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] || 'th'));
  const roughly = (s) => (s < 1 ? t("eta.under_second")
    : s < 90 ? t("eta.seconds", Math.round(s)) : t("eta.minutes", Math.round(s / 60)));

  /** The status line and bar for an unfinished job: its place in the queue, or its progress. */
  function showLive(view) {
    if (view.status === 'queued') {
      let text = t("status.queued.text");
      if (view.queue_position) {
        text = view.queue_position === 1
          ? t("queue.next")
          : t("queue.place", ordinal(view.queue_position));
        if (typeof view.eta_seconds === 'number') text += t("queue.starts", roughly(view.eta_seconds));
        text += '.';
      }
      if (job.status.textContent !== text) job.status.textContent = text;
      setProgress(null);
    } else if (view.status === 'running') {
      // The percentage is the bar's (aria-valuenow); the live status line stays quiet.
      const p = typeof view.progress === 'number' ? view.progress : 0;
      setProgress(p > 0 ? p : null);
    }
  }

  let following = null;

  async function cancelJob() {
    if (!following) return;
    job.cancel.disabled = true;
    const r = await api('POST', '/playground/api/jobs/' + encodeURIComponent(following) + '/cancel');
    job.cancel.disabled = false;
    // A job that finished first is shown by the follow loop; other errors are said here.
    if (r.status !== 200 && r.status !== 409) say(job.error, errorText(r.body));
  }

  function clearResult() {
    show(job.figure, false);
    show(job.facts, false);
    show(job.actions, false);
    show(job.scene, false);
    say(job.error, '');
    job.img.removeAttribute('src');
    job.facts.replaceChildren();
    job.actions.replaceChildren();
  }

  function fact(dl, term, value, cls) {
    const row = el('div');
    row.append(el('dt', {}, term), el('dd', cls ? { class: cls } : {}, value));
    dl.append(row);
  }

  function describe(dl, view) {
    fact(dl, view.kind === 'edit' ? t("fact.instruction") : t("fact.prompt"), view.prompt);
    if (view.enhanced_prompt) fact(dl, t("fact.enhanced"), view.enhanced_prompt);
    if (view.kind === 'generate') {
      fact(dl, t("fact.model"), t("fact.model_ratio", modelName(view.model), view.ratio));
      fact(dl, t("fact.seed"), String(view.seed), 'mono');
    }
    if (view.width && view.height) fact(dl, t("fact.size"), t("size", view.width, view.height));
  }

  /** Download / Reuse prompt / Edit this for a finished picture. */
  function actionsFor(view, describedBy) {
    const box = el('div', { class: 'pg-actions' });
    const dl = el('a', {
      class: 'button', href: view.photo_url, download: 'pictor-' + view.job_id + '.png',
      'aria-describedby': describedBy,
    }, t("download"));
    const reuse = el('button', { type: 'button', 'data-act': 'reuse', 'data-job': view.job_id, 'aria-describedby': describedBy },
      view.kind === 'edit' ? t("reuse.instruction") : t("reuse.prompt"));
    const editThis = el('button', { type: 'button', 'data-act': 'edit', 'data-job': view.job_id, 'aria-describedby': describedBy }, t("edit_this"));
    box.append(dl, reuse, editThis);
    return box;
  }

  function showDone(view) {
    state.jobs.set(view.job_id, view);
    const took = view.finished_at && view.created_at ? (view.finished_at - view.created_at) / 1000 : null;
    job.elapsed.textContent = took === null ? '' : took < 0.1 ? t("took.instant") : t("took", decimal1(took));
    show(job.elapsed, took !== null);
    describe(job.facts, view);
    show(job.facts, true);
    if (!view.photo_url) {
      setStatus('done', t("deleted"));
      return;
    }
    setStatus('done', t("status.done.text"));
    job.img.alt = view.prompt;
    if (view.width && view.height) {
      job.img.width = view.width;
      job.img.height = view.height;
    }
    job.img.src = view.photo_url;
    show(job.figure, true);
    // The built-in painter says, as a note (the picture is done), which named things it has
    // no picture for, and who can change that.
    // An edit says what it did and what of the instruction it could not do.
    const missing = (view.scene && view.scene.not_drawn) || [];
    const admin = root.dataset.admin === 'true';
    job.scene.textContent = !missing.length ? ''
      : view.kind === 'edit'
        ? t("not_done", view.scene.drawn.join(', '), missing.join(', ')) + ' ' + (admin ? t("not_done.admin") : t("not_done.user"))
        : t("not_drawn", missing.join(', ')) + ' ' + (admin ? t("not_drawn.admin") : t("not_drawn.user"));
    show(job.scene, missing.length > 0);
    const actions = actionsFor(view, 'job-status');
    job.actions.replaceChildren(...actions.childNodes);
    show(job.actions, true);
  }

  function showFailed(view) {
    state.jobs.set(view.job_id, view);
    if (view.error_code === 'cancelled') {
      setStatus('failed', t("cancelled"));
      say(job.error, '');
      job.badge.textContent = t("status.cancelled");
    } else {
      setStatus('failed', t("failed_refunded"));
      say(job.error, errorText(view));
    }
    describe(job.facts, view);
    fact(job.facts, t("fact.credits"), t("fact.returned", credits(view.balance)));
    show(job.facts, true);
    show(job.elapsed, false);
  }

  /** Follows a job with long-polls until it is done or failed. */
  async function follow(jobId, startedAt) {
    state.busy = true;
    renderStats();
    clearResult();
    setStatus('queued');
    startTicker(startedAt);
    job.box.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    following = jobId;
    let status = 'queued';
    let failures = 0;
    let view = null;
    let since = '';
    for (;;) {
      // Each answer comes as soon as the progress, the place in the queue or the status differs
      // from the last one seen (the first at once).
      const r = await api('GET', '/playground/api/jobs/' + encodeURIComponent(jobId) +
        '?wait=25&wait_for=progress&since=' + encodeURIComponent(since));
      if (r.status === 200 && r.body && r.body.job_id) {
        failures = 0;
        view = r.body;
        since = view.state_token || '';
        if (view.status !== status) {
          status = view.status;
          // The status line is a live region: screen readers hear each change once.
          if (status === 'running' || status === 'queued') setStatus(status);
        }
        showLive(view);
        if (status === 'done' || status === 'failed') break;
      } else if (r.status === 401 || r.status === 404) {
        view = null;
        setStatus('failed', t("lost_job"));
        say(job.error, errorText(r.body));
        break;
      } else {
        failures += 1;
        if (failures > 6) {
          view = null;
          setStatus('failed', t("lost_contact"));
          say(job.error, errorText(r.body) + ' ' + t("reload_for_result"));
          break;
        }
        await sleep(Math.min(8000, 500 * 2 ** failures));
      }
    }
    stopTicker();
    following = null;
    show(job.cancel, false);
    if (view && view.status === 'done') {
      showDone(view);
      addToGallery([view], true);
    } else if (view && view.status === 'failed') {
      showFailed(view);
    }
    state.busy = false;
    await refreshProfile();
  }

  // ---- generate and edit -----------------------------------------------------------------------

  async function submitGenerate(event) {
    event.preventDefault();
    say(gen.error, '');
    const prompt = gen.prompt.value.trim();
    if (!prompt) {
      say(gen.error, t("need_prompt"));
      gen.prompt.focus();
      return;
    }
    if (state.busy || gen.submit.disabled) return;
    const body = {
      prompt,
      model: gen.model.value,
      ratio: gen.ratio.value,
      enhance: gen.enhance.checked,
    };
    const seed = gen.seed.value.trim();
    if (seed !== '') {
      if (!/^\d+$/.test(seed) || Number(seed) > 4294967295) {
        say(gen.error, t("bad_seed"));
        gen.seed.focus();
        return;
      }
      body.seed = Number(seed);
    }
    state.busy = true;
    renderStats();
    const started = Date.now();
    const r = await api('POST', '/playground/api/generate', body);
    if (r.status === 202 && r.body.ok) {
      await follow(r.body.job_id, started);
    } else {
      state.busy = false;
      renderStats();
      say(gen.error, errorText(r.body));
      if (r.body.error_code === 'job_busy' || r.body.error_code === 'insufficient_credits') refreshProfile();
    }
  }

  async function submitEdit(event) {
    event.preventDefault();
    say(edit.error, '');
    const prompt = edit.prompt.value.trim();
    const source = edit.sourceJob.value;
    const file = edit.file.files && edit.file.files[0];
    if (!source && !file) {
      say(edit.error, t("need_photo"));
      edit.file.focus();
      return;
    }
    if (!source && file.size > MAX_UPLOAD) {
      say(edit.error, t("photo_too_large"));
      edit.file.focus();
      return;
    }
    if (!prompt) {
      say(edit.error, t("need_instruction"));
      edit.prompt.focus();
      return;
    }
    if (state.busy || edit.submit.disabled) return;
    const data = new FormData();
    if (source) data.append('source_job', source);
    else data.append('image', file, file.name);
    data.append('prompt', prompt);
    state.busy = true;
    renderStats();
    const started = Date.now();
    const r = await api('POST', '/playground/api/edit', data);
    if (r.status === 202 && r.body.ok) {
      await follow(r.body.job_id, started);
    } else {
      state.busy = false;
      renderStats();
      say(edit.error, errorText(r.body));
      if (r.body.error_code === 'job_busy' || r.body.error_code === 'insufficient_credits') refreshProfile();
    }
  }

  /** "Reuse prompt": the picture's prompt, model, ratio, seed and enhance go back into the form. */
  function reuse(view) {
    if (view.kind === 'edit') {
      edit.prompt.value = view.prompt;
      edit.prompt.focus();
      edit.form.scrollIntoView({ block: 'start', behavior: 'smooth' });
      announce(t("filled.instruction"));
      return;
    }
    gen.prompt.value = view.prompt;
    if (Array.from(gen.model.options).some((o) => o.value === view.model)) gen.model.value = view.model;
    if (Array.from(gen.ratio.options).some((o) => o.value === view.ratio)) gen.ratio.value = view.ratio;
    gen.seed.value = String(view.seed);
    // The enhancement is chosen by the seed: with it on, the same seed gives the same picture.
    gen.enhance.checked = !!view.enhanced_prompt;
    say(gen.error, '');
    updateGenerate();
    gen.form.scrollIntoView({ block: 'start', behavior: 'smooth' });
    gen.prompt.focus();
    announce(t("filled.prompt"));
  }

  /** "Edit this": the picture becomes the edit's source (sent as source_job, no re-upload). */
  function editThis(view) {
    edit.sourceJob.value = view.job_id;
    edit.sourceImg.src = view.photo_url;
    edit.sourceImg.alt = t("source.alt", view.prompt);
    edit.sourceText.textContent = view.width
      ? t("source.text_sized", view.width, view.height)
      : t("source.text");
    edit.file.value = '';
    show(edit.source, true);
    show(edit.fileWrap, false);
    say(edit.error, '');
    edit.form.scrollIntoView({ block: 'start', behavior: 'smooth' });
    edit.prompt.focus();
    announce(t("source.ready"));
  }

  function clearSource() {
    edit.sourceJob.value = '';
    edit.sourceImg.removeAttribute('src');
    show(edit.source, false);
    show(edit.fileWrap, true);
    edit.file.focus();
  }

  // ---- gallery ---------------------------------------------------------------------------------

  function galleryItem(view) {
    const li = el('li', { class: 'pg-item' });
    const capId = 'cap-' + view.job_id;
    const fig = el('figure');
    const img = el('img', {
      src: view.photo_url, alt: view.prompt, loading: 'lazy', decoding: 'async',
      width: view.width || undefined, height: view.height || undefined,
    });
    const cap = el('figcaption', { id: capId });
    cap.append(el('span', { class: 'pg-item-prompt' }, view.prompt));
    const bits = [view.kind === 'edit' ? t("edit") : modelName(view.model)];
    if (view.width) bits.push(view.width + '×' + view.height);
    if (view.kind === 'generate') bits.push(t("meta.seed", view.seed));
    cap.append(el('span', { class: 'muted pg-item-meta' }, bits.join(' · ')));
    fig.append(img, cap);
    li.append(fig, actionsFor(view, capId));
    return li;
  }

  function addToGallery(views, atTop) {
    const list = $('gallery');
    const items = [];
    for (const v of views) {
      if (!v.photo_url || state.galleryIds.has(v.job_id)) continue;
      state.galleryIds.add(v.job_id);
      state.jobs.set(v.job_id, v);
      items.push(galleryItem(v));
    }
    if (atTop) list.prepend(...items);
    else list.append(...items);
    const status = $('gallery-status');
    if (state.galleryIds.size === 0) {
      say(status, t("gallery.empty"));
    } else {
      say(status, '');
    }
  }

  async function loadGallery() {
    const more = $('gallery-more');
    more.disabled = true;
    const q = state.nextBefore ? '&before=' + encodeURIComponent(state.nextBefore) : '';
    const r = await api('GET', '/playground/api/gallery?limit=60' + q);
    more.disabled = false;
    if (r.status !== 200 || !r.body.ok) {
      say($('gallery-status'), t("gallery.failed", errorText(r.body)));
      return;
    }
    const firstNew = r.body.pictures.length ? r.body.pictures[0].job_id : null;
    addToGallery(r.body.pictures, false);
    state.nextBefore = r.body.next_before || null;
    show(more, !!state.nextBefore);
    return firstNew;
  }

  // ---- wiring ----------------------------------------------------------------------------------

  gen.form.addEventListener('submit', submitGenerate);
  edit.form.addEventListener('submit', submitEdit);
  job.cancel.addEventListener('click', cancelJob);
  gen.model.addEventListener('change', updateGenerate);
  gen.ratio.addEventListener('change', updateGenerate);
  gen.prompt.addEventListener('input', updateGenerate);
  edit.sourceClear.addEventListener('click', clearSource);
  edit.file.addEventListener('change', () => say(edit.error, ''));
  for (const [area, form] of [[gen.prompt, gen.form], [edit.prompt, edit.form]]) {
    area.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
  }
  $('gallery-more').addEventListener('click', async () => {
    const first = await loadGallery();
    // Keyboard users continue where the new pictures start.
    const btn = first && document.querySelector('[data-act="reuse"][data-job="' + first + '"]');
    if (btn) btn.focus();
  });
  document.addEventListener('click', (e) => {
    const btn = e.target.closest('button[data-act]');
    if (!btn) return;
    const view = state.jobs.get(btn.dataset.job);
    if (!view) return;
    if (btn.dataset.act === 'reuse') reuse(view);
    else if (btn.dataset.act === 'edit') editThis(view);
  });

  renderStats();
  loadGallery();
  // A job still running (the page was reloaded while it ran) is followed again.
  const active = root.dataset.activeJob;
  if (active) {
    api('GET', '/playground/api/jobs/' + encodeURIComponent(active)).then((r) => {
      const created = r.status === 200 && r.body.created_at ? r.body.created_at : Date.now();
      follow(active, Math.min(Date.now(), created));
    });
  }
})();
