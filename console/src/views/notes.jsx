// Notes: a run's notes by coordinates (key, run, name, author), and a note's body.
import { useEffect, useState } from 'preact/hooks';
import { call, seg } from '../api.js';
import { tokenFor } from '../session.js';
import { Busy, Columns, ErrorNote, External, Field, Missing, TextBody, When } from '../ui.jsx';

function Body({ token, noteRef }) {
  const [note, setNote] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let live = true;
    setNote(null);
    call(token, 'GET', `/v1/notes/${seg(noteRef)}`).then(
      (n) => live && setNote(n),
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [token, noteRef]);
  if (error) return <ErrorNote error={error} />;
  if (!note) return <Busy when />;
  return (
    <section class="note-body" aria-labelledby="note-title">
      <h3 id="note-title" tabindex="-1">
        {note.name} <span class="muted">by {note.author || '(shared)'}, run {note.run}</span>
      </h3>
      <p class="muted">
        {note.content_type} · {note.size} bytes · updated <When iso={note.updated_at || note.created_at} />
      </p>
      {typeof note.text === 'string' ? <TextBody text={note.text} mediaType={note.content_type} /> : null}
      {note.body_b64 ? <p class="muted">A binary body ({note.content_type}).</p> : null}
      {note.download_url ? <External href={note.download_url}>download the body</External> : null}
    </section>
  );
}

export function NotesView({ query, noteRef }) {
  const held = tokenFor('read');
  const token = held && held.token;
  const [filter, setFilter] = useState(() => ({
    key: query.get('key') || '',
    run: query.get('run') || '',
    name: query.get('name') || '',
    author: query.get('author') ?? null,
  }));
  const [items, setItems] = useState(null);
  const [cursor, setCursor] = useState(null);
  const [error, setError] = useState(null);
  const load = async (f, after) => {
    setError(null);
    try {
      const q = { key: f.key, run: f.run, name: f.name, limit: 100, cursor: after };
      if (f.author !== null && f.author !== undefined && f.author !== '*') q.author = f.author;
      const page = await call(token, 'GET', '/v1/notes', { query: q });
      setItems((old) => (after ? [...(old || []), ...page.items] : page.items));
      setCursor(page.cursor || null);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    if (token && filter.key) load(filter, null);
  }, [token]);
  if (!held) return <Missing need="caller" />;
  return (
    <div class="view notes">
      <h2 tabindex="-1">Notes</h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const el = e.currentTarget.elements;
          const f = { key: el.key.value.trim(), run: el.run.value.trim(), name: el.name.value.trim(), author: el.author.value === '' ? null : el.author.value };
          setFilter(f);
          load(f, null);
        }}
      >
        <Field label="Key" id="notes-key">
          <input id="notes-key" name="key" defaultValue={filter.key} placeholder="harden:widget" />
        </Field>
        <Field label="Run" id="notes-run">
          <input id="notes-run" name="run" inputMode="numeric" pattern="[0-9]*" defaultValue={filter.run} />
        </Field>
        <Field label="Name" id="notes-name">
          <input id="notes-name" name="name" defaultValue={filter.name} />
        </Field>
        <Field label="Author" id="notes-author" hint="empty: any author">
          <input id="notes-author" name="author" defaultValue={filter.author || ''} aria-describedby="notes-author-hint" />
        </Field>
        <button type="submit">List</button>
      </form>
      <ErrorNote error={error} />
      {items ? (
        <table class="notes-list">
          <Columns names={['Key', 'Run', 'Name', 'Author', 'Size', 'Updated']} />
          <tbody>
            {items.map((n) => (
              <tr key={n.ref}>
                <td>{n.key}</td>
                <td>{n.run}</td>
                <th scope="row">
                  <a href={`#/notes/${encodeURIComponent(n.ref)}`}>{n.name}</a>
                </th>
                <td>{n.author || '(shared)'}</td>
                <td>{n.size}</td>
                <td>
                  <When iso={n.updated_at || n.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {items && !items.length ? <p class="muted">No notes match.</p> : null}
      {cursor ? (
        <button type="button" onClick={() => load(filter, cursor)}>
          More
        </button>
      ) : null}
      {noteRef ? <Body token={token} noteRef={noteRef} /> : null}
    </div>
  );
}
