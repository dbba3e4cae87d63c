// Recall: search transcripts with the answer's completeness report and warnings shown as such,
// read a bounded excerpt and widen it in place, outline a session.
import { useEffect, useState } from 'preact/hooks';
import { call, seg } from '../api.js';
import { tokenFor } from '../session.js';
import { ErrorNote, Field, Missing, When } from '../ui.jsx';

const BUDGET = 2000;
// Refs and sessions go into a path with their level separator spelled `~` (one segment).
const level = (value) => String(value).replace(/\//g, '~');

function Messages({ messages, anchor }) {
  return (
    <ol class="transcript">
      {messages.map((m) => (
        <li key={m.uuid} class={`turn role-${m.role}${m.uuid === anchor ? ' anchor' : ''}`}>
          <div class="turn-head">
            <strong>{m.role}</strong> {m.kind !== 'text' ? <span class="badge">{m.kind}</span> : null} <When iso={m.timestamp} />
            {m.uuid === anchor ? <span class="badge">the hit</span> : null}
          </div>
          <pre class="text">{m.text}</pre>
        </li>
      ))}
    </ol>
  );
}

function Excerpt({ token, readRef }) {
  const [more, setMore] = useState(0);
  const [read, setRead] = useState(null);
  const [error, setError] = useState(null);
  const load = async (level_) => {
    setError(null);
    try {
      const q = { budget: BUDGET * (level_ + 1), ...(level_ ? { more: level_ } : {}) };
      setRead(await call(token, 'GET', `/v1/recall/read/${seg(level(readRef))}`, { query: q }));
      setMore(level_);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    load(0);
  }, [readRef]);
  return (
    <div class="excerpt">
      <ErrorNote error={error} />
      {read ? (
        <>
          <p class="muted">
            {read.messages.length} message(s): {read.before} before and {read.after} after the hit, window {read.window}
            {read.truncated ? `; truncated (${read.trimmed_chars} characters, ${read.trimmed_msgs} message(s) left out)` : ''}.
          </p>
          <Messages messages={read.messages} anchor={read.anchor_uuid} />
          <button type="button" onClick={() => load(more + 1)}>
            Widen the excerpt
          </button>
        </>
      ) : null}
    </div>
  );
}

function Outline({ token, session }) {
  const [outline, setOutline] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    call(token, 'GET', `/v1/recall/outline/${seg(level(session))}`).then(setOutline, setError);
  }, [session]);
  return (
    <section class="outline" aria-labelledby="outline-title">
      <h3 id="outline-title">
        Outline of <span class="task-id">{session}</span>
      </h3>
      <ErrorNote error={error} />
      {outline ? (
        <>
          <p class="muted">
            {outline.project} · {outline.message_count} message(s) · started <When iso={outline.started_at} />
          </p>
          {outline.summary ? <p class="summary-text">{outline.summary}</p> : null}
          {outline.topics.length ? <p>Topics: {outline.topics.join(' · ')}</p> : null}
          <h4>How it starts</h4>
          <Messages messages={outline.start} />
          {outline.mid_count ? <p class="muted">… {outline.mid_count} message(s) between …</p> : null}
          <h4>How it ends</h4>
          <Messages messages={outline.end} />
        </>
      ) : null}
    </section>
  );
}

export function RecallView({ query }) {
  const held = tokenFor('read');
  const token = held && held.token;
  const [answer, setAnswer] = useState(null);
  const [error, setError] = useState(null);
  const [open, setOpen] = useState({});
  const [session, setSession] = useState(query.get('session') || '');
  if (!held) return <Missing need="caller" />;
  const search = async (e) => {
    e.preventDefault();
    const form = e.currentTarget.elements;
    setError(null);
    setOpen({});
    setSession('');
    try {
      setAnswer(
        await call(token, 'GET', '/v1/recall/search', {
          query: { q: form.q.value, project: form.project.value, since: form.since.value, sort: form.sort.value, limit: 20 },
        }),
      );
    } catch (err) {
      setError(err);
    }
  };
  return (
    <div class="view recall">
      <h2 tabindex="-1">Recall</h2>
      <form class="filters" onSubmit={search} role="search">
        <Field label="Search transcripts" id="recall-q">
          <input id="recall-q" name="q" required />
        </Field>
        <Field label="Project" id="recall-project">
          <input id="recall-project" name="project" placeholder="any" />
        </Field>
        <Field label="Since" id="recall-since">
          <input id="recall-since" name="since" type="date" />
        </Field>
        <Field label="Order" id="recall-sort">
          <select id="recall-sort" name="sort">
            <option value="">relevance</option>
            <option value="newest">newest</option>
            <option value="oldest">oldest</option>
          </select>
        </Field>
        <button type="submit">Search</button>
      </form>
      <ErrorNote error={error} />
      {answer ? (
        <section aria-labelledby="results-title">
          <h3 id="results-title">
            {answer.count} result(s) for <q>{answer.query}</q>
          </h3>
          <div class={`completeness ${answer.complete ? 'complete' : 'incomplete'}`} role="status">
            <strong>{answer.complete ? 'Complete' : 'Incomplete'}:</strong> {answer.total_matches}
            {answer.total_is_lower_bound ? ' or more' : ''} matching conversation(s){answer.has_more ? '; more beyond this page' : ''}.{' '}
            {answer.store ? <span class="muted">Index: {answer.store}. </span> : null}
            {answer.next_command ? (
              <span>
                Next: <code>{answer.next_command}</code>
              </span>
            ) : null}
          </div>
          {answer.warnings.length ? (
            <ul class="warnings" aria-label="Warnings">
              {answer.warnings.map((w, i) => (
                <li key={i} class="warning">
                  <strong>Warning {w.code}:</strong> {w.message} {Object.keys(w.facts || {}).length ? <code>{JSON.stringify(w.facts)}</code> : null}
                </li>
              ))}
            </ul>
          ) : null}
          {answer.scopes_report.length ? (
            <details>
              <summary>Scopes ({answer.scopes_report.length})</summary>
              <ul>
                {answer.scopes_report.map((s, i) => (
                  <li key={i}>
                    {s.project || '(no project)'}: {s.status}, {s.sessions} session(s){s.pending ? `, ${s.pending} pending` : ''} {s.detail}
                  </li>
                ))}
              </ul>
            </details>
          ) : null}
          <ol class="results">
            {answer.results.map((r) => (
              <li key={r.read_ref} class="result">
                <div class="result-head">
                  <span class="project">{r.project || '(no project)'}</span> <When iso={r.iso} /> {r.topic ? <span class="badge">{r.topic}</span> : null}
                </div>
                <p class="snippet">{r.snippet}</p>
                <div class="buttons">
                  <button type="button" aria-expanded={open[r.read_ref] ? 'true' : 'false'} onClick={() => setOpen((o) => ({ ...o, [r.read_ref]: !o[r.read_ref] }))}>
                    {open[r.read_ref] ? 'Hide the excerpt' : 'Read the excerpt'}
                  </button>
                  <button type="button" class="quiet" onClick={() => setSession(r.session_id)}>
                    Outline the session
                  </button>
                </div>
                {open[r.read_ref] ? <Excerpt token={token} readRef={r.read_ref} /> : null}
              </li>
            ))}
          </ol>
        </section>
      ) : null}
      {session ? <Outline key={session} token={token} session={session} /> : null}
    </div>
  );
}
