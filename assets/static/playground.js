// Pictor playground (/playground). Drives the page through the session-authenticated JSON
// endpoints under /playground/api/ (the image API's validation, prices and job engine):
// generate and edit, follow the job with long-polls until its picture is ready, keep the
// balance, the prices and the gallery current. Served as a file because the pages' CSP forbids
// inline scripts; every text from the server goes into the page with textContent.
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

  // ---- small helpers -------------------------------------------------------------------------

  const plural = (n, one, many) => (n === 1 ? one : many);
  const credits = (n) => n + ' ' + plural(n, 'credit', 'credits');
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
    return opt ? opt.dataset.name : id === 'edit' ? 'Edit' : id;
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
      return { status: 0, body: { ok: false, error_code: 'network', error: 'Pictor could not be reached. Check the connection and try again.' } };
    }
    let data;
    try {
      data = await resp.json();
    } catch (e) {
      data = { ok: false, error_code: 'internal_error', error: 'Unexpected answer from the server (HTTP ' + resp.status + ').' };
    }
    return { status: resp.status, body: data || {} };
  }

  /** A friendly message for an error body of the image API. */
  function errorText(body) {
    const code = body && body.error_code;
    const msg = (body && body.error) || 'Something went wrong.';
    switch (code) {
      case 'unauthorized': return 'You are signed out. Reload the page to sign in again.';
      case 'csrf_failed': return 'This page has expired. Reload it and try again.';
      case 'job_busy': return 'You already have a picture in progress. Wait for it to finish.';
      default: return msg.charAt(0).toUpperCase() + msg.slice(1);
    }
  }

  // ---- balance, prices, limits -----------------------------------------------------------------

  function renderStats() {
    $('pg-balance').textContent = String(state.balance);
    $('pg-balance-unit').textContent = plural(state.balance, 'credit', 'credits');
    $('pg-daily-used').textContent = String(state.dailyUsed);
    $('pg-daily-limit').textContent = String(state.dailyLimit);
    updateGenerate();
    updateEdit();
  }

  function updateGenerate() {
    const opt = gen.model.selectedOptions[0];
    const price = opt ? Number(opt.dataset.price) : 0;
    gen.price.textContent = String(price);
    gen.unit.textContent = plural(price, 'credit', 'credits');
    const size = opt ? sizeOf(Number(opt.dataset.longSide), gen.ratio.value) : null;
    gen.size.textContent = size ? ' · ' + size[0] + '×' + size[1] + ' px' : ' · size from the prompt';
    let warn = '';
    if (price > state.balance) {
      warn = 'Not enough credits: this costs ' + credits(price) + ', you have ' + state.balance + '.';
    } else if (state.dailyLimit > 0 && state.dailyUsed >= state.dailyLimit) {
      warn = 'Daily limit reached: ' + state.dailyUsed + ' of ' + state.dailyLimit + ' pictures today. It resets at 00:00 UTC.';
    }
    say(gen.warn, warn);
    gen.submit.disabled = state.busy || !!warn;
    gen.submit.textContent = state.busy ? 'Working…' : 'Generate';
    const chars = Array.from(gen.prompt.value).length;
    gen.count.textContent = chars + ' / ' + MAX_PROMPT;
  }

  function updateEdit() {
    edit.price.textContent = String(state.editPrice);
    edit.unit.textContent = plural(state.editPrice, 'credit', 'credits');
    const warn = state.editPrice > state.balance
      ? 'Not enough credits: an edit costs ' + credits(state.editPrice) + ', you have ' + state.balance + '.'
      : '';
    say(edit.warn, warn);
    edit.submit.disabled = state.busy || !!warn;
    edit.submit.textContent = state.busy ? 'Working…' : 'Edit photo';
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
        opt.textContent = m.name + ' · ' + credits(m.price);
      }
      state.editPrice = models.body.edit_price;
    }
    renderStats();
  }

  // ---- the job card ----------------------------------------------------------------------------

  const STATUS = {
    queued: ['Queued', 'Starting…'],
    running: ['Rendering', 'Drawing your picture…'],
    done: ['Done', 'Your picture is ready.'],
    failed: ['Failed', 'The job failed.'],
  };

  let ticker = null;
  let tickFrom = 0;

  function tick() {
    const secs = Math.max(0, Math.floor((Date.now() - tickFrom) / 1000));
    job.elapsed.textContent = secs + ' s';
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

  const ordinal = (n) => n + (n % 100 >= 11 && n % 100 <= 13 ? 'th' : ['th', 'st', 'nd', 'rd'][n % 10] || 'th');
  const roughly = (s) => (s < 1 ? 'under a second' : s < 90 ? 'about ' + Math.round(s) + ' s' : 'about ' + Math.round(s / 60) + ' min');

  /** The status line and bar for an unfinished job: its place in the queue, or its progress. */
  function showLive(view) {
    if (view.status === 'queued') {
      let text = 'Starting…';
      if (view.queue_position) {
        text = view.queue_position === 1
          ? 'Waiting for a free renderer: you are next'
          : 'Waiting for a free renderer: ' + ordinal(view.queue_position) + ' in line';
        if (typeof view.eta_seconds === 'number') text += ' (starts in ' + roughly(view.eta_seconds) + ')';
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
    fact(dl, view.kind === 'edit' ? 'Instruction' : 'Prompt', view.prompt);
    if (view.enhanced_prompt) fact(dl, 'Enhanced prompt', view.enhanced_prompt);
    if (view.kind === 'generate') {
      fact(dl, 'Model', modelName(view.model) + ' · ratio ' + view.ratio);
      fact(dl, 'Seed', String(view.seed), 'mono');
    }
    if (view.width && view.height) fact(dl, 'Size', view.width + '×' + view.height + ' px');
  }

  /** Download / Reuse prompt / Edit this for a finished picture. */
  function actionsFor(view, describedBy) {
    const box = el('div', { class: 'pg-actions' });
    const dl = el('a', {
      class: 'button', href: view.photo_url, download: 'pictor-' + view.job_id + '.png',
      'aria-describedby': describedBy,
    }, 'Download');
    const reuse = el('button', { type: 'button', 'data-act': 'reuse', 'data-job': view.job_id, 'aria-describedby': describedBy },
      view.kind === 'edit' ? 'Reuse instruction' : 'Reuse prompt');
    const editThis = el('button', { type: 'button', 'data-act': 'edit', 'data-job': view.job_id, 'aria-describedby': describedBy }, 'Edit this');
    box.append(dl, reuse, editThis);
    return box;
  }

  function showDone(view) {
    state.jobs.set(view.job_id, view);
    const took = view.finished_at && view.created_at ? (view.finished_at - view.created_at) / 1000 : null;
    job.elapsed.textContent = took === null ? '' : took < 0.1 ? 'took under 0.1 s' : 'took ' + took.toFixed(1) + ' s';
    show(job.elapsed, took !== null);
    describe(job.facts, view);
    show(job.facts, true);
    if (!view.photo_url) {
      setStatus('done', 'Done, but the picture has been deleted by the server\'s retention policy.');
      return;
    }
    setStatus('done', 'Your picture is ready.');
    job.img.alt = view.prompt;
    if (view.width && view.height) {
      job.img.width = view.width;
      job.img.height = view.height;
    }
    job.img.src = view.photo_url;
    show(job.figure, true);
    // The built-in painter says which named things it could not draw.
    const missing = (view.scene && view.scene.not_drawn) || [];
    job.scene.textContent = missing.length
      ? 'The built-in painter could not draw: ' + missing.join(', ') +
        ' — install a diffusion model for these (see “Diffusion models on your disk” in the README).'
      : '';
    show(job.scene, missing.length > 0);
    const actions = actionsFor(view, 'job-status');
    job.actions.replaceChildren(...actions.childNodes);
    show(job.actions, true);
  }

  function showFailed(view) {
    state.jobs.set(view.job_id, view);
    if (view.error_code === 'cancelled') {
      setStatus('failed', 'You cancelled this job.');
      say(job.error, '');
      job.badge.textContent = 'Cancelled';
    } else {
      setStatus('failed', 'The job failed; your credits were returned.');
      say(job.error, errorText(view));
    }
    describe(job.facts, view);
    fact(job.facts, 'Credits', 'Returned (balance: ' + credits(view.balance) + ')');
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
        setStatus('failed', 'The job could not be followed.');
        say(job.error, errorText(r.body));
        break;
      } else {
        failures += 1;
        if (failures > 6) {
          view = null;
          setStatus('failed', 'Lost contact with Pictor.');
          say(job.error, errorText(r.body) + ' Reload the page to see the result.');
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
      say(gen.error, 'Type a prompt first.');
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
        say(gen.error, 'The seed must be a whole number from 0 to 4294967295, or empty for a random one.');
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
      say(edit.error, 'Choose a photo to edit.');
      edit.file.focus();
      return;
    }
    if (!source && file.size > MAX_UPLOAD) {
      say(edit.error, 'The photo is larger than 20 MB. Choose a smaller one.');
      edit.file.focus();
      return;
    }
    if (!prompt) {
      say(edit.error, 'Say what to change in the instruction.');
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
      announce('Instruction filled in.');
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
    announce('Prompt, model, ratio and seed filled in.');
  }

  /** "Edit this": the picture becomes the edit's source (sent as source_job, no re-upload). */
  function editThis(view) {
    edit.sourceJob.value = view.job_id;
    edit.sourceImg.src = view.photo_url;
    edit.sourceImg.alt = 'The picture to edit: ' + view.prompt;
    edit.sourceText.textContent = 'Editing your picture' + (view.width ? ' (' + view.width + '×' + view.height + ' px)' : '') + '.';
    edit.file.value = '';
    show(edit.source, true);
    show(edit.fileWrap, false);
    say(edit.error, '');
    edit.form.scrollIntoView({ block: 'start', behavior: 'smooth' });
    edit.prompt.focus();
    announce('The picture is ready to edit. Type an instruction.');
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
    const bits = [view.kind === 'edit' ? 'Edit' : modelName(view.model)];
    if (view.width) bits.push(view.width + '×' + view.height);
    if (view.kind === 'generate') bits.push('seed ' + view.seed);
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
      say(status, 'No pictures yet. The ones you make appear here.');
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
      say($('gallery-status'), 'Your pictures could not be loaded: ' + errorText(r.body));
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
