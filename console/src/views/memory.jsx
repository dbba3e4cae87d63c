// Judging memory: a scope's pending relation candidates with their evidence, both memories side by
// side, confirm or dismiss with a note; the audit of past judgments.
import { useState } from 'preact/hooks';
import { call, seg } from '../api.js';
import { tokenFor } from '../session.js';
import { Busy, Columns, ErrorNote, Field, Missing, When, useLoad } from '../ui.jsx';
import { useCommand } from './commands.js';

async function pages(token, path, query, limit = 20) {
  const items = [];
  let cursor = null;
  for (let i = 0; i < limit; i += 1) {
    const page = await call(token, 'GET', path, { query: { ...query, cursor } });
    items.push(...page.items);
    cursor = page.cursor;
    if (!cursor) break;
  }
  return items;
}

function MemoryCard({ memory, id, label }) {
  return (
    <div class="memory-card">
      <h5>{label}</h5>
      {memory ? (
        <>
          <p class="memory-content">{memory.content}</p>
          <p class="muted">
            {memory.tags.length ? `tags: ${memory.tags.join(', ')} · ` : ''}#{memory.seq}, applied <When iso={memory.applied_at} />
          </p>
        </>
      ) : (
        <p class="muted">Memory {id} is not in this scope's list.</p>
      )}
    </div>
  );
}

function Candidate({ token, relation, memories, onJudged }) {
  const { error, busy, send } = useCommand(token);
  const [note, setNote] = useState('');
  const judge = async (decision) => {
    const path = `/v1/memory/relations/${seg(relation.id)}/judgment`;
    if (await send('judge', path, { decision, ...(note.trim() ? { note } : {}) })) onJudged();
  };
  const noteId = `note-${relation.id}`;
  return (
    <li class="candidate">
      <h4>
        <span class={`verb verb-${relation.verb}`}>{relation.verb}</span> <span class="muted">candidate {relation.id}</span>
      </h4>
      <div class="side-by-side">
        <MemoryCard memory={memories[relation.from]} id={relation.from} label="New memory (from)" />
        <MemoryCard memory={memories[relation.to]} id={relation.to} label="Earlier memory (to)" />
      </div>
      <p>
        <strong>Detector's note:</strong> <span class="detector-note">{relation.note}</span>
      </p>
      <p class="muted">Evidence: {relation.evidence_ids.join(', ') || 'none'}</p>
      <ErrorNote error={error} />
      <Field label="Your note (kept with the judgment)" id={noteId}>
        <input id={noteId} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
      </Field>
      <div class="buttons">
        <button type="button" disabled={busy} onClick={() => judge('confirmed')}>
          Confirm
        </button>
        <button type="button" disabled={busy} onClick={() => judge('dismissed')}>
          Dismiss
        </button>
      </div>
    </li>
  );
}

export function MemoryView({ query }) {
  const held = tokenFor('caller') || tokenFor('worker');
  const token = held && held.token;
  const [scope, setScope] = useState(query.get('scope') || '');
  const [found, setFound] = useState(null);
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  useLoad(
    async (live) => {
      if (!token || !scope) return;
      setFound(null);
      const [pending, confirmed, dismissed, memories] = await Promise.all([
        pages(token, '/v1/memory/relations', { scope, status: 'pending' }),
        pages(token, '/v1/memory/relations', { scope, status: 'confirmed' }),
        pages(token, '/v1/memory/relations', { scope, status: 'dismissed' }),
        pages(token, '/v1/memory', { scope }),
      ]);
      if (!live()) return;
      const byId = Object.fromEntries(memories.map((m) => [m.id, m]));
      const audit = [...confirmed, ...dismissed].sort((a, b) => (b.judgment?.judged_at || '').localeCompare(a.judgment?.judged_at || ''));
      setFound({ pending, audit, byId });
      setError(null);
    },
    [token, scope, tick],
    setError,
  );
  if (!held) return <Missing need="caller or worker" />;
  return (
    <div class="view memory">
      <h2 tabindex="-1">Memory review</h2>
      <p class="explain">
        The memory queue flags an earlier memory a new one relates to or conflicts with as a <em>pending</em> candidate. Your judgment
        changes only that candidate: its status becomes <em>confirmed</em> or <em>dismissed</em>, with your note and the time, and it
        leaves this queue. Both memories stay as they are (nothing is deleted, merged or rewritten), and a judgment is final: a
        different second judgment is refused.
      </p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setScope(e.currentTarget.elements.scope.value.trim());
          setTick((t) => t + 1);
        }}
      >
        <Field label="Scope" id="memory-scope">
          <input id="memory-scope" name="scope" required defaultValue={scope} placeholder="team/infra" />
        </Field>
        <button type="submit">Show</button>
      </form>
      <ErrorNote error={error} />
      {scope ? <Busy when={!found && !error} /> : null}
      {found ? (
        <>
          <section aria-labelledby="pending-title">
            <h3 id="pending-title">Pending ({found.pending.length})</h3>
            {found.pending.length ? null : <p class="muted">Nothing waits for a judgment in {scope}.</p>}
            <ul class="candidates">
              {found.pending.map((r) => (
                <Candidate key={r.id} token={token} relation={r} memories={found.byId} onJudged={() => setTick((t) => t + 1)} />
              ))}
            </ul>
          </section>
          <section aria-labelledby="audit-title">
            <h3 id="audit-title">Past judgments ({found.audit.length})</h3>
            <table class="audit">
              <Columns names={['Candidate', 'Verb', 'Decision', 'Note', 'Judged']} />
              <tbody>
                {found.audit.map((r) => (
                  <tr key={r.id}>
                    <th scope="row">{r.id}</th>
                    <td>{r.verb}</td>
                    <td>{r.status}</td>
                    <td>{r.judgment ? r.judgment.note : ''}</td>
                    <td>{r.judgment ? <When iso={r.judgment.judged_at} /> : ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        </>
      ) : null}
    </div>
  );
}
