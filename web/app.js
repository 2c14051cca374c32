// playd's web remote. Every control sends one request of the JSON protocol
// (docs/protocol.md) to POST api; what it shows comes from `status` and `queue`, read
// again when an event arrives on the events stream (Server-Sent Events), so a change
// made anywhere else (playctl, an MPD client, the schedule) shows here at once.
'use strict';

const $ = (id) => document.getElementById(id);
let current = null;        // the last `status` reply
let currentAt = 0;         // when it arrived (performance.now(), ms)
let dragging = false;      // the seek bar is held: do not move it under the finger
let browsePath = null;     // the library folder shown (null: the roots)
let coverFile = null;      // the track whose cover is shown
let messageTimer = null;
let refreshTimer = null;
let pendingQueue = false;

function show(text, kind) {
  const m = $('message');
  m.textContent = text;
  m.className = kind || '';
  m.hidden = false;
  clearTimeout(messageTimer);
  messageTimer = setTimeout(() => { m.hidden = true; }, 8000);
}

class Refused extends Error {}

async function api(request) {
  let response;
  try {
    response = await fetch('api', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      credentials: 'same-origin',
      body: JSON.stringify(request),
    });
  } catch (e) {
    show('playd is not reachable (' + e.message + ')');
    throw new Refused('unreachable');
  }
  if (response.status === 401) { needLogin(); throw new Refused('log in'); }
  let doc;
  try { doc = await response.json(); } catch (e) { doc = { ok: false, error: { message: 'HTTP ' + response.status } }; }
  if (!doc.ok) {
    const message = (doc.error && doc.error.message) || ('HTTP ' + response.status);
    show(message);
    throw new Refused(message);
  }
  return doc;
}

// A control's handler: its request, errors shown (never a dead control).
function act(fn) {
  return async (event) => {
    if (event && event.preventDefault) event.preventDefault();
    try { await fn(event); } catch (e) { if (!(e instanceof Refused)) show(String(e)); }
  };
}

function time(s) {
  if (s == null || !isFinite(s)) return '–:––';
  s = Math.max(0, Math.floor(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = String(s % 60).padStart(2, '0');
  return h > 0 ? h + ':' + String(m).padStart(2, '0') + ':' + sec : m + ':' + sec;
}

function baseName(path) {
  if (!path) return '';
  const parts = path.split('/');
  return parts[parts.length - 1] || path;
}

// ---- Now playing ----

function position() {
  if (!current) return 0;
  let p = current.position || 0;
  if (current.state === 'playing') p += (performance.now() - currentAt) / 1000;
  return current.duration ? Math.min(p, current.duration) : p;
}

function renderStatus(s) {
  current = s;
  currentAt = performance.now();
  const playing = s.state === 'playing';
  $('title').textContent = s.file ? (s.title || baseName(s.file)) : 'Nothing playing';
  $('artist').textContent = s.artist || '';
  $('album').textContent = s.album || '';
  $('state').textContent = s.state + (s.stream && s.stream.station ? ' · ' + s.stream.station : '');
  const toggle = $('toggle');
  $('icon-play').hidden = playing;
  $('icon-pause').hidden = !playing;
  toggle.setAttribute('aria-label', playing ? 'Pause' : 'Play');
  $('duration').textContent = time(s.duration);
  const seek = $('seek');
  seek.max = s.duration || 0;
  seek.disabled = !s.duration || (s.stream && s.stream.live);
  if (!dragging) { seek.value = position(); $('elapsed').textContent = time(position()); }
  if (document.activeElement !== $('volume')) { $('volume').value = s.volume; }
  $('volume-value').textContent = s.muted ? s.volume + ' (muted)' : String(s.volume);
  const q = s.queue || {};
  $('repeat').checked = q.repeat && q.repeat !== 'off';
  $('single').checked = q.single && q.single !== 'off';
  $('random').checked = !!q.shuffle;
  $('consume').checked = !!q.consume;
  const fade = s.crossfade ? String(s.crossfade.seconds || 0) : '0';
  const select = $('crossfade');
  if (![...select.options].some((o) => o.value === fade)) select.add(new Option(fade + ' s', fade));
  select.value = fade;
  renderCover(s);
  markCurrent(q.current);
}

function renderCover(s) {
  const img = $('cover'), none = $('no-cover');
  if (!s.file || !s.cover) {
    img.hidden = true; none.hidden = false; coverFile = null;
    img.removeAttribute('src');
    return;
  }
  if (coverFile === s.file) return;
  coverFile = s.file;
  img.src = 'cover?for=' + encodeURIComponent(s.file);
}

function tick() {
  if (current && !dragging) {
    const p = position();
    $('seek').value = p;
    $('elapsed').textContent = time(p);
  }
}

async function refreshStatus() { renderStatus(await api({ cmd: 'status' })); }

// ---- Listen here (the daemon's /stream.* when http.streams serves one) ----

let streams = [];

function streamFor(audio) {
  // Opus where the browser plays it (Chrome, Firefox, Android), else MP3 (Safari).
  if (streams.includes('stream.opus') && audio.canPlayType('audio/ogg; codecs=opus')) return 'stream.opus';
  if (streams.includes('stream.mp3')) return 'stream.mp3';
  return streams[0];
}

function toggleListen() {
  const audio = $('player'), button = $('listen');
  if (button.getAttribute('aria-pressed') === 'true') {
    audio.pause();
    audio.removeAttribute('src');
    audio.load();   // closes the connection: the daemon's encoder stops with its last listener
    button.setAttribute('aria-pressed', 'false');
    button.textContent = 'Listen on this device';
    return;
  }
  audio.src = streamFor(audio);
  audio.play().catch((e) => show('This browser cannot play the stream (' + e.message + ')'));
  button.setAttribute('aria-pressed', 'true');
  button.textContent = 'Stop listening here';
}

// ---- Queue ----

const queueShown = 1000;   // entries drawn; the rest are counted

async function refreshQueue() {
  const r = await api({ cmd: 'queue' });
  const list = $('queue');
  list.textContent = '';
  const entries = r.queue || [];
  $('queue-length').textContent = '(' + entries.length + ')';
  entries.slice(0, queueShown).forEach((e, i) => {
    const li = document.createElement('li');
    li.dataset.index = String(e.index);
    if (e.current) li.className = 'current';
    const label = (e.artist ? e.artist + ' – ' : '') + (e.title || baseName(e.file)) + (e.duration ? ' (' + time(e.duration) + ')' : '');
    li.append(
      button(label, 'Play ' + label, act(() => api({ cmd: 'play', index: e.index })), 'name'),
      button('↑', 'Move up: ' + label, act(() => api({ cmd: 'move', from: e.index, to: e.index - 1 })), '', i === 0),
      button('↓', 'Move down: ' + label, act(() => api({ cmd: 'move', from: e.index, to: e.index + 1 })), '', i === entries.length - 1),
      button('✕', 'Remove: ' + label, act(() => api({ cmd: 'remove', entry: e.entry })))
    );
    list.append(li);
  });
  if (entries.length > queueShown) {
    const li = document.createElement('li');
    li.textContent = (entries.length - queueShown) + ' more';
    list.append(li);
  }
}

function markCurrent(index) {
  for (const li of $('queue').children) li.classList.toggle('current', li.dataset.index === String(index));
}

function button(text, label, onClick, cls, disabled) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  if (label && label !== text) b.setAttribute('aria-label', label);
  if (cls) b.className = cls;
  if (disabled) b.disabled = true;
  b.addEventListener('click', onClick);
  return b;
}

// ---- Library ----

function songRow(song) {
  const li = document.createElement('li');
  const label = (song.artist ? song.artist + ' – ' : '') + (song.title || baseName(song.file));
  const name = document.createElement('span');
  name.className = 'name';
  name.textContent = label;
  li.append(name,
    button('Play', 'Play ' + label, act(async () => { await api({ cmd: 'play', path: song.file }); show('Playing ' + label, 'info'); })),
    button('Add', 'Add ' + label, act(async () => { await api({ cmd: 'add', path: song.file }); show('Added ' + label, 'info'); })));
  return li;
}

async function browse(path) {
  const r = await api(path == null ? { cmd: 'ls' } : { cmd: 'ls', path: path });
  browsePath = path;
  $('browse-path').textContent = path == null ? 'Music folders' : path;
  $('browse-up').disabled = path == null;
  $('browse-add').disabled = path == null;
  const list = $('results');
  list.textContent = '';
  for (const dir of r.directories || []) {
    const li = document.createElement('li');
    li.append(button('📁 ' + baseName(dir), 'Open folder ' + baseName(dir), act(() => browse(dir)), 'name'),
      button('Add', 'Add folder ' + baseName(dir), act(async () => { await api({ cmd: 'add', path: dir }); show('Added ' + baseName(dir), 'info'); })));
    list.append(li);
  }
  for (const song of r.songs || []) list.append(songRow(song));
}

async function search(query) {
  const r = await api({ cmd: 'search', query: query, limit: 200 });
  $('browse-path').textContent = r.count + ' found for “' + query + '”';
  const list = $('results');
  list.textContent = '';
  for (const song of r.songs || []) list.append(songRow(song));
}

// ---- Playlists ----

async function refreshPlaylists() {
  const r = await api({ cmd: 'playlists' });
  const list = $('playlists');
  list.textContent = '';
  for (const p of r.playlists || []) {
    const li = document.createElement('li');
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = p.name;
    li.append(name,
      button('Load', 'Load playlist ' + p.name, act(async () => { const a = await api({ cmd: 'load', name: p.name }); show('Added ' + a.added + ' from ' + p.name, 'info'); })));
    list.append(li);
  }
}

// ---- Events ----

function scheduleRefresh(queueToo) {
  pendingQueue = pendingQueue || queueToo;
  if (refreshTimer) return;
  refreshTimer = setTimeout(async () => {
    refreshTimer = null;
    const q = pendingQueue;
    pendingQueue = false;
    try {
      await refreshStatus();
      if (q) await refreshQueue();
    } catch (e) { /* shown by api() */ }
  }, 50);
}

function connectEvents() {
  const source = new EventSource('events');
  source.onopen = () => { $('link').textContent = 'connected'; scheduleRefresh(true); };
  source.onerror = () => { $('link').textContent = 'reconnecting…'; };
  source.onmessage = (m) => {
    let e;
    try { e = JSON.parse(m.data); } catch (x) { return; }
    switch (e.event) {
      case 'position': break;
      case 'stored_playlist': refreshPlaylists().catch(() => {}); break;
      case 'error': show(e.message || e.code); scheduleRefresh(false); break;
      case 'skipped': show('Skipped ' + baseName(e.file) + ': ' + e.message); scheduleRefresh(true); break;
      case 'queue': case 'track': case 'track_end': case 'options': scheduleRefresh(true); break;
      default: scheduleRefresh(false);
    }
  };
}

// ---- Start ----

function needLogin() {
  $('app').hidden = true;
  $('login').hidden = false;
  $('link').textContent = 'locked';
  $('password').focus();
}

function selectView(name) {
  for (const tab of document.querySelectorAll('.tab')) {
    if (tab.dataset.view === name) tab.setAttribute('aria-current', 'page'); else tab.removeAttribute('aria-current');
  }
  for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + name;
  if (name === 'library' && $('results').children.length === 0) browse(null).catch(() => {});
  if (name === 'playlists') refreshPlaylists().catch(() => {});
  if (name === 'queue') refreshQueue().catch(() => {});
}

let started = false;
async function start() {
  $('login').hidden = true;
  $('app').hidden = false;
  if (started) { scheduleRefresh(true); return; }
  started = true;
  connectEvents();
  setInterval(tick, 250);
  try { await refreshStatus(); await refreshQueue(); } catch (e) { /* shown */ }
}

function wire() {
  for (const tab of document.querySelectorAll('.tab')) tab.addEventListener('click', () => selectView(tab.dataset.view));
  $('toggle').addEventListener('click', act(() => api({ cmd: current && current.state === 'stopped' ? 'play' : 'toggle' })));
  $('stop').addEventListener('click', act(() => api({ cmd: 'stop' })));
  $('listen').addEventListener('click', toggleListen);
  $('player').addEventListener('error', () => { if ($('player').getAttribute('src')) show('The stream stopped (' + ($('player').error ? $('player').error.message || $('player').error.code : '') + ')'); });
  $('next').addEventListener('click', act(() => api({ cmd: 'next' })));
  $('prev').addEventListener('click', act(() => api({ cmd: 'prev' })));
  const seek = $('seek');
  seek.addEventListener('input', () => { dragging = true; $('elapsed').textContent = time(Number(seek.value)); });
  seek.addEventListener('change', act(async () => {
    try { await api({ cmd: 'seek', to: { seconds: Number(seek.value) } }); } finally { dragging = false; }
  }));
  const volume = $('volume');
  volume.addEventListener('input', () => { $('volume-value').textContent = volume.value; });
  volume.addEventListener('change', act(() => api({ cmd: 'volume', set: Number(volume.value) })));
  $('repeat').addEventListener('change', act(async (e) => {
    const single = $('single').checked;
    if (e.target.checked) { await api({ cmd: 'repeat', mode: single ? 'one' : 'on' }); return; }
    await api({ cmd: 'repeat', mode: 'off' });
    if (single) await api({ cmd: 'single', mode: 'on' });
  }));
  $('single').addEventListener('change', act((e) => api({ cmd: 'single', mode: e.target.checked ? 'on' : 'off' })));
  $('random').addEventListener('change', act((e) => api({ cmd: 'shuffle', on: e.target.checked })));
  $('consume').addEventListener('change', act((e) => api({ cmd: 'consume', on: e.target.checked })));
  $('crossfade').addEventListener('change', act((e) => api({ cmd: 'crossfade', seconds: Number(e.target.value) })));
  $('clear').addEventListener('click', act(() => api({ cmd: 'clear' })));
  $('search-form').addEventListener('submit', act(() => search($('search').value)));
  $('browse-up').addEventListener('click', act(async () => {
    if (browsePath == null) return;
    const up = browsePath.slice(0, browsePath.lastIndexOf('/'));
    // Above a music root the daemon refuses the folder: show the roots instead.
    try { await browse(up); } catch (e) { await browse(null); }
  }));
  $('browse-add').addEventListener('click', act(async () => {
    if (browsePath == null) return;
    await api({ cmd: 'add', path: browsePath });
    show('Added ' + baseName(browsePath), 'info');
  }));
  $('save-form').addEventListener('submit', act(async () => {
    const name = $('playlist-name').value.trim();
    await api({ cmd: 'save', name: name });
    show('Saved the queue as ' + name, 'info');
    await refreshPlaylists();
  }));
  $('radio-form').addEventListener('submit', act(async () => {
    await api({ cmd: 'play', url: $('radio-url').value.trim() });
    show('Connecting to the stream…', 'info');
  }));
  $('announce-form').addEventListener('submit', act(async () => {
    const source = $('announce-source').value.trim();
    await api(/^https?:\/\//i.test(source) ? { cmd: 'announce', url: source } : { cmd: 'announce', path: source });
    show('Announcing ' + baseName(source), 'info');
  }));
  $('cover').addEventListener('load', () => { $('cover').hidden = false; $('no-cover').hidden = true; });
  $('cover').addEventListener('error', () => { $('cover').hidden = true; $('no-cover').hidden = false; });
  $('login-form').addEventListener('submit', act(async () => {
    const r = await fetch('login', {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'same-origin',
      body: JSON.stringify({ password: $('password').value }),
    });
    if (!r.ok) { show(r.status === 401 ? 'Wrong password' : 'Login failed (HTTP ' + r.status + ')'); return; }
    $('password').value = '';
    await start();
  }));
}

document.addEventListener('DOMContentLoaded', async () => {
  wire();
  try {
    const r = await fetch('session', { credentials: 'same-origin' });
    const s = await r.json();
    streams = s.streams || [];
    $('listen-row').hidden = streams.length === 0;
    if (s.password_required && !s.authenticated) needLogin(); else await start();
  } catch (e) {
    show('playd is not reachable (' + e.message + ')');
  }
});
