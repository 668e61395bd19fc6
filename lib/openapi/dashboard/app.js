// The hf dashboard: plain JavaScript over the REST API of the node that
// serves it. The token stays in sessionStorage and goes out as a bearer
// header; the live view is one EventSource opened with a stream ticket.
// Every value from the API is put in the page as text, never as HTML.
'use strict';

const API = '/api/v1';
const TOKEN_KEY = 'hf.token';
const PLURALS = {
  Node: 'nodes', MachineClaim: 'machineclaims', Machine: 'machines', MachineSet: 'machinesets',
  ScheduledEvent: 'scheduledevents', AccessCode: 'accesscodes', Session: 'sessions', MachineTemplate: 'machinetemplates',
};
const CLAIM_PHASES = ['Requested', 'Bound', 'Failed', 'Terminated'];

const state = {
  me: null,
  objs: emptyObjects(),
  page: 'fleet',
  claimFilter: { user: '', template: '', phase: '' },
  stream: null,
  retry: null,
  // logs is the output shown under the machines: {machine, text}.
  logs: null,
};

function emptyObjects() {
  const o = {};
  for (const k of Object.keys(PLURALS)) o[k] = new Map();
  return o;
}

// h builds an element: h('td', {class: 'x'}, 'text', child, ...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'style') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const $ = (id) => document.getElementById(id);

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || ('HTTP ' + status));
    this.status = status;
    this.field = e.field;
  }
}

async function api(method, path, body, tok) {
  const res = await fetch(API + path, {
    method,
    headers: Object.assign({ Authorization: 'Bearer ' + (tok || token()) },
      body ? { 'Content-Type': 'application/json' } : {}),
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    if (res.status === 401 && !tok) signOut('Your token was refused: ' + new APIError(res.status, data).message);
    throw new APIError(res.status, data);
  }
  return data;
}

// ---- sign-in ----

async function signIn(tok) {
  const me = await api('GET', '/whoami', null, tok);
  sessionStorage.setItem(TOKEN_KEY, tok);
  state.me = me;
  $('signin').hidden = true;
  $('top').hidden = false;
  $('whoami').textContent = me.user + ' · ' + me.role;
  connect();
  route();
}

function signOut(msg) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (state.stream) state.stream.close();
  clearTimeout(state.retry);
  state.stream = null;
  state.me = null;
  state.objs = emptyObjects();
  state.claimFilter = { user: '', template: '', phase: '' };
  $('top').hidden = true;
  $('page').replaceChildren();
  $('signin').hidden = false;
  $('signin-error').textContent = msg || '';
  $('token').value = '';
}

function staff() { return state.me && (state.me.role === 'admin' || state.me.role === 'operator'); }

// ---- live data ----

// connect opens the event stream. Its snapshot fills fresh maps, which
// replace the shown ones at the synced marker; a resync or a broken
// stream starts over with a new ticket (a ticket opens one stream).
async function connect() {
  if (state.stream) state.stream.close();
  clearTimeout(state.retry);
  setLive('connecting');
  let ticket;
  try {
    ticket = await api('POST', '/stream-tickets');
  } catch (e) {
    if (e.status !== 401) reconnectLater();
    return;
  }
  const kinds = Object.keys(PLURALS).filter((k) => k !== 'AccessCode' || staff()).map((k) => PLURALS[k]);
  const es = new EventSource(API + '/events?kinds=' + kinds.join(',') + '&ticket=' + encodeURIComponent(ticket.ticket));
  state.stream = es;
  let fresh = emptyObjects();
  const target = () => fresh || state.objs;
  es.addEventListener('put', (ev) => {
    const d = JSON.parse(ev.data);
    if (!target()[d.kind]) return;
    target()[d.kind].set(d.name, d.object);
    if (!fresh) changed();
  });
  es.addEventListener('delete', (ev) => {
    const d = JSON.parse(ev.data);
    if (!target()[d.kind]) return;
    target()[d.kind].delete(d.name);
    if (!fresh) changed();
  });
  es.addEventListener('synced', () => {
    state.objs = fresh;
    fresh = null;
    setLive('live');
    changed();
  });
  es.addEventListener('resync', () => connect());
  es.onerror = () => {
    if (state.stream !== es) return;
    es.close();
    reconnectLater();
  };
}

function reconnectLater() {
  setLive('offline');
  clearTimeout(state.retry);
  state.retry = setTimeout(() => { if (state.me) connect(); }, 2000);
}

function setLive(s) {
  const el = $('live');
  el.textContent = s;
  el.dataset.state = s;
}

let pending = false;
function changed() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => { pending = false; renderBody(); });
}

// ---- formatting ----

function sorted(kind) {
  return [...state.objs[kind].values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

function num(n) { return Math.round((n || 0) * 100) / 100; }

function ago(t) {
  if (!t || t.startsWith('0001')) return '';
  const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
  if (s < 60) return Math.floor(s) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h';
  return Math.floor(s / 86400) + 'd';
}

function when(t) {
  if (!t || t.startsWith('0001')) return '';
  return new Date(t).toLocaleString([], { dateStyle: 'short', timeStyle: 'short' });
}

// unclaimedWhy says why a session has no claim (its Claimed condition), or
// nothing.
function unclaimedWhy(s) {
  const c = (s.status.conditions || []).find((x) => x.type === 'Claimed' && x.status === 'False');
  return c ? h('div', { class: 'reason' }, c.message) : '';
}

function badge(phase) {
  return h('span', { class: 'badge phase-' + String(phase || 'none').toLowerCase() }, phase || '—');
}

function table(cols, rows, empty) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'scroll' }, h('table', {},
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c)))),
    h('tbody', {}, rows)));
}

// bar draws parts ([{value, cls, title}]) over a whole.
function bar(label, parts, whole, text, kind) {
  const total = Math.max(whole, parts.reduce((s, p) => s + p.value, 0), 1e-9);
  return h('div', { class: 'bar-row', 'data-kind': kind },
    h('span', { class: 'bar-label' }, label),
    h('div', { class: 'bar', role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': num(whole), 'aria-valuenow': num(parts[0] ? parts[0].value : 0), 'aria-label': label },
      parts.map((p) => h('div', { class: 'fill ' + p.cls, title: p.title, style: { width: (100 * p.value / total) + '%' } }))),
    h('span', { class: 'bar-text' }, text));
}

// ---- pages ----

const pages = {
  fleet: { title: 'Fleet', body: fleetBody },
  claims: { title: 'Claims', controls: claimControls, body: claimsBody },
  machines: { title: 'Machines', body: machinesBody },
  sets: { title: 'Machine sets', body: setsBody },
  events: { title: 'Scheduled events', body: eventsBody },
  access: { title: 'Access codes and sessions', body: accessBody },
};

function nodeState(n) {
  if (n.status && n.status.phase === 'Down') return 'Down';
  if (n.spec.maintenance || (n.status && n.status.phase === 'Draining')) return 'Drained';
  return (n.status && n.status.phase) || 'Up';
}

// unreachable returns the Reachable condition of a node that the node
// serving the page cannot reach while no verdict says it is Down (the
// case its phase hides: a node cut off from the majority passes none), or
// null. The stream sends the node again whenever that view moves.
function unreachable(n) {
  if (!n.status || n.status.phase === 'Down') return null;
  return (n.status.conditions || []).find((c) => c.type === 'Reachable' && c.status === 'False') || null;
}

// driverStatus shows a driver's status after its name: "ok" not at all,
// "ok: details" plainly, anything else (an error, a degraded mode) as a
// warning. Every healthy docker and test driver used to look like a warning.
function driverStatus(s) {
  if (!s || s === 'ok') return '';
  const ok = s.startsWith('ok: ');
  return h('span', { class: ok ? 'status' : 'warn' }, ' · ' + (ok ? s.slice(4) : s));
}

function fleetBody() {
  const nodes = sorted('Node');
  if (!nodes.length) return h('p', { class: 'empty' }, 'No nodes have reported yet.');
  return h('div', { class: 'cards' }, nodes.map((n) => {
    const st = nodeState(n);
    const cut = unreachable(n);
    return h('section', { class: 'card node state-' + st.toLowerCase() + (cut ? ' unreachable' : ''), 'data-node': n.metadata.name,
      'data-reachable': cut ? 'false' : 'true' },
      h('h2', {}, n.metadata.name, ' ', badge(st), cut ? [' ', h('span', { class: 'badge phase-unreachable', title: cut.reason }, 'Unreachable')] : ''),
      cut ? h('p', { class: 'reason unreachable-why' }, cut.message || cut.reason,
        cut.lastTransitionTime && !cut.lastTransitionTime.startsWith('0001') ? ' (absent for ' + ago(cut.lastTransitionTime) + ')' : '') : '',
      h('p', { class: 'meta' }, n.spec.apiAddress || '', n.spec.softwareVersion ? ' · ' + n.spec.softwareVersion : '',
        ' · ', (n.status && n.status.machines) || 0, ' machines', n.status && n.status.heartbeat ? ' · seen ' + ago(n.status.heartbeat) + ' ago' : ''),
      (n.spec.drivers || []).map((d) => {
        const c = d.capacity || {};
        const u = c.usable || {}; const used = c.used || {}; const res = c.reserved || {}; const free = c.free || {};
        return h('div', { class: 'driver', 'data-driver': d.name },
          h('h3', {}, d.name, d.driver && d.driver !== d.name ? ' (' + d.driver + ')' : '', d.remote ? ' · remote' : '',
            driverStatus(d.status)),
          bar('CPU', [{ value: used.cpu || 0, cls: 'used', title: 'used' }, { value: res.cpu || 0, cls: 'reserved', title: 'reserved' }],
            u.cpu || 0, num(used.cpu) + ' used' + (res.cpu ? ' + ' + num(res.cpu) + ' reserved' : '') + ' of ' + num(u.cpu) + ' CPUs · ' + num(free.cpu) + ' free', 'cpu'),
          bar('RAM', [{ value: used.ramGB || 0, cls: 'used', title: 'used' }, { value: res.ramGB || 0, cls: 'reserved', title: 'reserved' }],
            u.ramGB || 0, num(used.ramGB) + ' used' + (res.ramGB ? ' + ' + num(res.ramGB) + ' reserved' : '') + ' of ' + num(u.ramGB) + ' GB · ' + num(free.ramGB) + ' free', 'ram'));
      }));
  }));
}

function claimControls() {
  const f = state.claimFilter;
  const templates = h('select', { id: 'new-claim-template', required: true, 'aria-label': 'template' });
  const fillTemplates = () => fillTemplateSelect(templates);
  fillTemplates();
  const msg = h('span', { id: 'new-claim-msg', class: 'msg', role: 'status' });
  const create = h('form', { id: 'new-claim', class: 'toolbar', onsubmit: async (ev) => {
    ev.preventDefault();
    fillTemplates();
    const tmpl = templates.value;
    if (!tmpl) { msg.textContent = 'No template to claim.'; return; }
    const name = tmpl.slice(0, 40) + '-' + Math.random().toString(36).slice(2, 8);
    msg.textContent = 'Creating ' + name + '…';
    try {
      await api('POST', '/machineclaims', { kind: 'MachineClaim', metadata: { name }, spec: { machineTemplate: tmpl } });
      msg.textContent = 'Created ' + name + '.';
    } catch (e) {
      msg.textContent = 'Refused: ' + e.message;
    }
  } }, h('label', {}, 'New claim from ', templates), h('button', { type: 'submit' }, 'Create claim'), msg);
  const input = (key, label, el) => {
    el.value = f[key];
    el.addEventListener('input', () => { f[key] = el.value.trim(); renderBody(); });
    return h('label', {}, label, ' ', el);
  };
  const filters = h('div', { class: 'toolbar filters' },
    input('user', 'User', h('input', { id: 'filter-user', type: 'search', placeholder: 'any' })),
    input('template', 'Template', h('input', { id: 'filter-template', type: 'search', placeholder: 'any' })),
    input('phase', 'Phase', h('select', { id: 'filter-phase' }, h('option', { value: '' }, 'any'),
      CLAIM_PHASES.map((p) => h('option', { value: p }, p)))));
  return [create, filters];
}

// fillTemplateSelect offers the templates there are, keeping the choice.
function fillTemplateSelect(sel) {
  const names = sorted('MachineTemplate').map((t) => t.metadata.name);
  if ([...sel.options].map((o) => o.value).join('\n') === names.join('\n')) return;
  const cur = sel.value;
  sel.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
  if (names.includes(cur)) sel.value = cur;
}

function claimsBody() {
  const sel = $('new-claim-template');
  if (sel) fillTemplateSelect(sel);
  const f = state.claimFilter;
  const claims = sorted('MachineClaim').filter((c) =>
    (!f.user || (c.spec.user || '').includes(f.user)) &&
    (!f.template || (c.spec.machineTemplate || '').includes(f.template)) &&
    (!f.phase || c.status.phase === f.phase));
  return table(['Claim', 'User', 'Template', 'Phase', 'Reason', 'Node', 'Machine', 'Age', ''],
    claims.map((c) => h('tr', { 'data-claim': c.metadata.name, 'data-phase': c.status.phase || '' },
      h('td', {}, c.metadata.name), h('td', {}, c.spec.user || ''), h('td', {}, c.spec.machineTemplate),
      h('td', { class: 'phase' }, badge(c.status.phase)), h('td', { class: 'reason' }, c.status.reason || ''),
      h('td', {}, c.status.node || ''), h('td', {}, c.status.machine || ''), h('td', {}, ago(c.metadata.createdAt)),
      h('td', {}, c.status.phase === 'Requested' || c.status.phase === 'Bound'
        ? h('button', { class: 'small', type: 'button', onclick: () => releaseClaim(c.metadata.name) }, 'Release') : ''))),
    'No claims' + (f.user || f.template || f.phase ? ' match the filter.' : ' yet.'));
}

async function releaseClaim(name) {
  if (!confirm('Release claim ' + name + ' and its machine?')) return;
  try { await api('DELETE', '/machineclaims/' + encodeURIComponent(name)); } catch (e) { alert(e.message); }
}

function endpoints(m) {
  const out = [];
  for (const [proto, addr] of Object.entries(m.spec.connectEndpoints || {})) out.push(proto + ' ' + addr);
  for (const a of m.status.addresses || []) out.push(a.protocol + ' ' + a.address);
  return out.length ? h('ul', { class: 'endpoints' }, out.map((e) => h('li', {}, h('code', {}, e)))) : '';
}

function machinesBody() {
  const list = table(['Machine', 'Phase', 'Connect', 'Node', 'Driver', 'Claim', 'Template', 'Set', 'Age', ''],
    sorted('Machine').map((m) => h('tr', { 'data-machine': m.metadata.name },
      h('td', {}, m.metadata.name), h('td', {}, badge(m.status.phase), m.status.paused ? [' ', badge('Paused')] : '',
        m.status.reason ? h('div', { class: 'reason' }, m.status.reason) : ''),
      h('td', {}, endpoints(m)), h('td', {}, m.spec.node || ''), h('td', {}, m.spec.driver || ''),
      h('td', {}, m.spec.claim || ''), h('td', {}, m.spec.machineTemplate || ''), h('td', {}, m.spec.machineSet || ''),
      h('td', {}, ago(m.metadata.createdAt)),
      h('td', {}, m.status.phase === 'Running'
        ? h('button', { class: 'small logs', type: 'button', onclick: () => showLogs(m.metadata.name) }, 'Output') : ''))),
    staff() ? 'No machines.' : 'None of your claims holds a machine.');
  if (!state.logs) return list;
  return [list, h('section', { id: 'machine-logs', class: 'card', 'data-machine': state.logs.machine },
    h('h2', {}, 'Output of ', state.logs.machine, ' (last ', LOG_TAIL, ' lines)'),
    h('pre', { class: 'logs' }, state.logs.text))];
}

// LOG_TAIL is how many of a machine's last output lines the page shows.
const LOG_TAIL = 200;

// showLogs fetches a machine's output (from its node, through this one)
// and shows it as text under the machines.
async function showLogs(name) {
  state.logs = { machine: name, text: 'loading…' };
  renderBody();
  let text;
  try {
    const res = await fetch(API + '/machines/' + encodeURIComponent(name) + '/logs?tail=' + LOG_TAIL,
      { headers: { Authorization: 'Bearer ' + token() } });
    text = await res.text();
    if (!res.ok) {
      let msg = 'HTTP ' + res.status;
      try { msg = JSON.parse(text).error.message; } catch (e) { /* not the error shape */ }
      text = 'No output: ' + msg;
    } else if (!text) {
      text = '(no output yet)';
    }
  } catch (e) {
    text = 'No output: ' + e.message;
  }
  if (state.logs && state.logs.machine === name) {
    state.logs.text = text;
    renderBody();
  }
}

function setsBody() {
  const sets = sorted('MachineSet');
  if (!sets.length) return h('p', { class: 'empty' }, 'No machine sets.');
  return h('div', { class: 'cards' }, sets.map((s) => {
    const prov = s.status.provisioned || 0; const avail = s.status.available || 0;
    const min = s.spec.minAvailable || 0; const max = s.spec.maxProvisioned || 0;
    const av = s.spec.availabilityConfiguration || {};
    return h('section', { class: 'card set', 'data-set': s.metadata.name, 'data-provisioned': prov, 'data-available': avail },
      h('h2', {}, s.metadata.name),
      h('p', { class: 'meta' }, s.spec.machineTemplate, ' · ', s.spec.provisioningStrategy || 'AutoScale', ' · ',
        av.availability || '', av.value ? ' ' + av.value : ''),
      bar('Pool', [{ value: prov - avail, cls: 'used', title: 'assigned' }, { value: avail, cls: 'available', title: 'available' }],
        Math.max(max, min, prov), 'provisioned ' + prov + (max ? ' / max ' + max : '') + ' · available ' + avail + ' (min ' + min + ')', 'pool'));
  }));
}

function eventTimes(e) {
  const start = Date.parse(e.spec.startTime);
  const end = Date.parse(e.spec.endTime);
  let prov = Date.parse(e.spec.provisioningStartTime || '');
  if (!prov || prov < 0) prov = start - 30 * 60 * 1000;
  return { prov, start, end };
}

function eventsBody() {
  const evs = sorted('ScheduledEvent').map((e) => ({ e, t: eventTimes(e) })).sort((a, b) => a.t.prov - b.t.prov);
  if (!evs.length) return h('p', { class: 'empty' }, 'No scheduled events.');
  const now = Date.now();
  const lo = Math.min(now, ...evs.map((x) => x.t.prov));
  const hi = Math.max(now, ...evs.map((x) => x.t.end));
  const span = Math.max(hi - lo, 1);
  const pct = (t) => (100 * (t - lo) / span) + '%';
  return h('div', { class: 'timeline' },
    h('div', { class: 'axis' }, h('span', {}, when(new Date(lo).toISOString())), h('span', {}, when(new Date(hi).toISOString()))),
    evs.map(({ e, t }) => h('div', { class: 'tl-row', 'data-event': e.metadata.name },
      h('div', { class: 'tl-label' }, e.spec.displayName || e.metadata.name, ' ', badge(e.status.phase)),
      h('div', { class: 'tl-track' },
        h('div', { class: 'tl-prov', title: 'provisioning from ' + when(new Date(t.prov).toISOString()), style: { left: pct(t.prov), width: (100 * (t.start - t.prov) / span) + '%' } }),
        h('div', { class: 'tl-run', title: when(e.spec.startTime) + ' – ' + when(e.spec.endTime), style: { left: pct(t.start), width: (100 * (t.end - t.start) / span) + '%' } }),
        h('div', { class: 'tl-now', title: 'now', style: { left: pct(now) } })),
      h('div', { class: 'tl-times' }, 'provisioning ' + when(new Date(t.prov).toISOString()), ' · start ' + when(e.spec.startTime),
        ' · end ' + when(e.spec.endTime), ' · ', (e.spec.requiredMachines || []).map((r) => r.count + '× ' + r.machineTemplate).join(', ')))));
}

function accessBody() {
  const parts = [];
  if (staff()) {
    parts.push(h('h2', {}, 'Access codes'), table(['Code', 'Status', 'Not before', 'Not after', 'Machine sets', 'Events'],
      sorted('AccessCode').map((c) => h('tr', { 'data-code': c.metadata.name },
        h('td', {}, c.metadata.name), h('td', {}, badge(c.status.status || (c.spec.disabled ? 'Disabled' : ''))),
        h('td', {}, when(c.spec.notBefore)), h('td', {}, when(c.spec.notAfter)),
        h('td', {}, (c.spec.machineSets || []).join(', ')), h('td', {}, (c.spec.scheduledEvents || []).join(', ')))),
      'No access codes.'));
  }
  parts.push(h('h2', {}, 'Sessions'), table(['Session', 'User', 'Phase', 'Claim', 'Template', 'Event', 'Age'],
    sorted('Session').map((s) => h('tr', { 'data-session': s.metadata.name },
      h('td', {}, s.metadata.name), h('td', {}, s.spec.user || ''), h('td', {}, badge(s.status.phase), unclaimedWhy(s)),
      h('td', {}, s.status.machineClaim || ''), h('td', {}, s.spec.machineTemplate || ''), h('td', {}, s.spec.scheduledEvent || ''),
      h('td', {}, ago(s.metadata.createdAt)))),
    'No sessions.'));
  return h('div', {}, parts);
}

// ---- routing ----

function route() {
  if (!state.me) return;
  const name = (location.hash.replace(/^#\/?/, '') || 'fleet').split('?')[0];
  state.page = pages[name] ? name : 'fleet';
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === state.page);
  const p = pages[state.page];
  document.title = p.title + ' · hf';
  $('page').replaceChildren(h('h1', {}, p.title), h('div', { id: 'controls' }, p.controls ? p.controls() : ''), h('div', { id: 'body' }));
  renderBody();
}

function renderBody() {
  const body = $('body');
  if (!body || !state.me) return;
  body.replaceChildren(...[pages[state.page].body()].flat());
}

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  $('signin').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('signin-error').textContent = '';
    try {
      await signIn($('token').value.trim());
    } catch (e) {
      $('signin-error').textContent = 'Sign-in failed: ' + e.message;
    }
  });
  $('signout').addEventListener('click', () => signOut(''));
  // Ages in the tables move on without events.
  setInterval(() => { if (state.me && state.page !== 'claims') renderBody(); }, 30000);
  if (token()) signIn(token()).catch(() => signOut('Sign in again.'));
  else signOut('');
});
