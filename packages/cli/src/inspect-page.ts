/**
 * The inspector's one page: pick an app, a user and a session, then step
 * through the session's events and see what each changed. Plain HTML and a
 * little script, no network beyond the page's own JSON routes.
 */
export const INSPECTOR_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>adk-state inspect</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2430; background: #f6f7f9; }
  header { padding: 12px 20px; background: #1d2430; color: #fff; display: flex; gap: 12px; align-items: center; }
  header h1 { font-size: 16px; margin: 0 12px 0 0; }
  header input { padding: 4px 6px; }
  main { display: grid; grid-template-columns: 280px 1fr 360px; gap: 12px; padding: 12px 20px; }
  section { background: #fff; border: 1px solid #dde1e7; border-radius: 6px; padding: 10px; overflow: auto; max-height: 80vh; }
  h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .05em; color: #5b6575; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  td, th { text-align: left; padding: 4px 6px; border-bottom: 1px solid #eef0f3; vertical-align: top; }
  tr.event { cursor: pointer; }
  tr.event.current { background: #e6f0ff; }
  li.session { cursor: pointer; padding: 3px 0; list-style: none; }
  li.session.current { font-weight: 600; }
  ul { padding: 0; margin: 0; }
  code, pre { font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
  .added { color: #0a7a32; } .changed { color: #8a5a00; }
  .muted { color: #8a93a3; }
  .error { color: #a61b1b; font-weight: 600; }
</style>
</head>
<body>
<header>
  <h1>adk-state inspect</h1>
  <label>app <input id="app" size="16"></label>
  <label>user <input id="user" size="12" placeholder="every user"></label>
  <button id="load">List sessions</button>
  <span id="status" class="muted"></span>
</header>
<main>
  <section><h2>Sessions</h2><ul id="sessions"></ul></section>
  <section>
    <h2>Timeline <button id="prev">&larr;</button> <button id="next">&rarr;</button></h2>
    <table><thead><tr><th>#</th><th>time</th><th>author</th><th>what</th><th>changes</th></tr></thead>
    <tbody id="timeline"></tbody></table>
  </section>
  <section><h2>State after the selected event</h2><div id="detail" class="muted">Pick a session.</div></section>
</main>
<script>
const $ = (id) => document.getElementById(id);
let timeline = null;
let current = -1;
const show = (value) => JSON.stringify(value);
function text(tag, content, className) {
  const element = document.createElement(tag);
  element.textContent = content;
  if (className) element.className = className;
  return element;
}
async function getJson(path) {
  const response = await fetch(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}
async function listSessions() {
  const app = $('app').value.trim();
  if (!app) return;
  const user = $('user').value.trim();
  $('status').textContent = 'loading…';
  try {
    const { sessions } = await getJson('/api/sessions?app=' + encodeURIComponent(app) + (user ? '&user=' + encodeURIComponent(user) : ''));
    const list = $('sessions');
    list.replaceChildren();
    for (const session of sessions) {
      const item = text('li', session.userId + ' / ' + session.id, 'session');
      item.dataset.user = session.userId;
      item.dataset.session = session.id;
      item.onclick = () => openSession(item);
      list.append(item);
    }
    $('status').textContent = sessions.length + ' sessions';
  } catch (error) {
    $('status').textContent = String(error.message || error);
  }
}
let opening = 0;
function showError(message) {
  timeline = null;
  current = -1;
  $('timeline').replaceChildren();
  const detail = $('detail');
  detail.className = 'error';
  detail.setAttribute('role', 'alert');
  detail.textContent = message;
  $('status').textContent = 'error';
}
async function openSession(item) {
  for (const other of document.querySelectorAll('li.session')) other.classList.toggle('current', other === item);
  const app = $('app').value.trim();
  const mine = ++opening;
  // Until the new timeline is in, the previous one is not shown: it belongs to another session.
  timeline = null;
  current = -1;
  $('timeline').replaceChildren();
  $('detail').className = 'muted';
  $('detail').removeAttribute('role');
  $('detail').textContent = 'loading…';
  $('status').textContent = 'loading…';
  let loaded;
  try {
    loaded = await getJson('/api/timeline?app=' + encodeURIComponent(app) + '&user=' + encodeURIComponent(item.dataset.user) + '&session=' + encodeURIComponent(item.dataset.session));
  } catch (error) {
    if (mine === opening) showError('Could not load session ' + item.dataset.user + ' / ' + item.dataset.session + ': ' + String((error && error.message) || error));
    return;
  }
  if (mine !== opening) return;
  timeline = loaded;
  const body = $('timeline');
  body.replaceChildren();
  timeline.events.forEach((entry, position) => {
    const row = document.createElement('tr');
    row.className = 'event';
    row.append(text('td', String(entry.index)), text('td', entry.time.slice(11, 23)), text('td', entry.author),
      text('td', [entry.text ? '"' + entry.text + '"' : '', ...entry.calls].filter(Boolean).join('; ')),
      text('td', entry.changes.map((change) => change.key).join(', ')));
    row.onclick = () => select(position);
    body.append(row);
  });
  $('status').textContent = timeline.events.length + ' events';
  if (timeline.events.length === 0) {
    $('detail').className = '';
    $('detail').replaceChildren(text('h2', 'State'), text('pre', JSON.stringify(timeline.state || {}, null, 2)));
  }
  select(timeline.events.length - 1);
}
function select(position) {
  if (!timeline || position < 0 || position >= timeline.events.length) return;
  current = position;
  document.querySelectorAll('tr.event').forEach((row, index) => row.classList.toggle('current', index === position));
  const entry = timeline.events[position];
  const detail = $('detail');
  detail.className = '';
  detail.replaceChildren(text('div', '#' + entry.index + ' ' + entry.author + ' at ' + entry.time));
  const changes = document.createElement('ul');
  for (const change of entry.changes) {
    const had = Object.prototype.hasOwnProperty.call(change, 'before');
    changes.append(text('li', change.key + ': ' + (had ? show(change.before) : '(unset)') + ' → ' + show(change.after), had ? 'changed' : 'added'));
  }
  if (entry.changes.length === 0) changes.append(text('li', 'no state change', 'muted'));
  detail.append(text('h2', 'Changes'), changes, text('h2', 'State'), text('pre', JSON.stringify(entry.stateAfter, null, 2)));
}
$('load').onclick = listSessions;
$('prev').onclick = () => select(current - 1);
$('next').onclick = () => select(current + 1);
$('app').value = __APP__;
if ($('app').value) listSessions();
</script>
</body>
</html>
`;
