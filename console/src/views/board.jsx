// The caller's board: tasks by context and state, each with its lease holder, fence, last heartbeat
// and when the dispatcher will fence it (read for the rows on screen only), and one task opened:
// its timeline live, reply to input_required, cancel, the artifact and its apply receipt.
import { Component } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, call, seg } from '../api.js';
import { tokenFor } from '../session.js';
import { Busy, Columns, ErrorNote, Field, Missing, TextBody, When, useLoad, useNow } from '../ui.jsx';
import { TERMINAL } from '../live.js';
import { textMessage, useCommand } from './commands.js';
import { TaskPanel } from './task.jsx';

const STATES = ['', 'submitted', 'working', 'input_required', 'completed', 'canceled', 'rejected', 'failed'];
const BOARD_MAX = 1000;
const LEASE_READS = 4; // lease reads in flight at once

// Reads each visible open task's lease, a few at a time.
// Answers are applied together, at most every FLUSH_MS: one board render for many leases.
const FLUSH_MS = 200;

function useLeases(token) {
  const [leases, setLeases] = useState({});
  const queue = useRef([]);
  const seen = useRef(new Set());
  const running = useRef(0);
  const arrived = useRef({});
  const timer = useRef(0);
  const flush = () => {
    timer.current = 0;
    const batch = arrived.current;
    arrived.current = {};
    setLeases((all) => ({ ...all, ...batch }));
  };
  const pump = () => {
    while (running.current < LEASE_READS && queue.current.length) {
      const id = queue.current.shift();
      running.current += 1;
      call(token, 'GET', `/v1/tasks/${seg(id)}`)
        .then((read) => {
          arrived.current[id] = { lease: read.lease || null, last: read.last_lease || null };
          if (!timer.current) timer.current = setTimeout(flush, FLUSH_MS);
        })
        .catch(() => seen.current.delete(id))
        .finally(() => {
          running.current -= 1;
          pump();
        });
    }
  };
  return {
    leases,
    want(id) {
      if (seen.current.has(id)) return;
      seen.current.add(id);
      queue.current.push(id);
      pump();
    },
    forget() {
      seen.current.clear();
      queue.current = [];
      setLeases({});
    },
  };
}

// A row renders again only when its task, its lease or the clock changed (a board of 1,000 rows
// would otherwise re-render whole for each lease that arrives).
class Row extends Component {
  shouldComponentUpdate(next) {
    return next.task !== this.props.task || next.lease !== this.props.lease || next.now !== this.props.now;
  }

  render(props) {
    return <RowBody {...props} />;
  }
}

function RowBody({ task, lease, want, now }) {
  const ref = useRef(null);
  useEffect(() => {
    if (TERMINAL.has(task.state) || !ref.current) return undefined;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) {
        want(task.id);
        observer.disconnect();
      }
    });
    observer.observe(ref.current);
    return () => observer.disconnect();
  }, [task.id, task.state, task.revision]);
  const l = lease && lease.lease;
  return (
    <tr ref={ref}>
      <th scope="row">
        <a href={`#/board/${encodeURIComponent(task.id)}`}>{task.id}</a>
      </th>
      <td>{task.context}</td>
      <td>
        <span class={`state state-${task.state}`}>{task.state}</span>
      </td>
      <td>{task.revision}</td>
      <td>{TERMINAL.has(task.state) ? '—' : lease ? (l ? l.worker : <span class="muted">none</span>) : '…'}</td>
      <td>{l ? l.fence : ''}</td>
      <td>{l ? <When iso={l.heartbeat_at} now={now} /> : ''}</td>
      <td>{l ? (l.fenced_after ? <When iso={l.fenced_after} now={now} /> : 'never') : ''}</td>
      <td>
        <When iso={task.updated_at} now={now} />
      </td>
    </tr>
  );
}

function Receipt({ token, recorder, task }) {
  const { ids, error, setError, send } = useCommand(recorder);
  const [found, setFound] = useState(null);
  const [decision, setDecision] = useState('success');
  const [observed, setObserved] = useState('');
  const [note, setNote] = useState('');
  const [tick, setTick] = useState(0);
  const base = `/v1/workspaces/${seg(task.workspace)}/artifacts/${seg(task.artifact)}`;
  useLoad(
    async (live) => {
      const artifact = await call(token, 'GET', base);
      let receipt = null;
      try {
        receipt = (await call(token, 'GET', `${base}/receipt`)).receipt;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 404) throw e;
      }
      if (live()) setFound({ ...artifact, receipt });
    },
    [token, base, tick],
    setError,
  );
  if (error && !found) return <ErrorNote error={error} />;
  if (!found) return <Busy when>Loading the artifact…</Busy>;
  const { artifact, payload, receipt } = found;
  const record = async (e) => {
    e.preventDefault();
    const recorded = await send('receipt', `${base}/receipt`, {
      receipt_id: `${ids.id('receipt')}-r`,
      artifact_digest: artifact.digest,
      base_revision: artifact.base_revision,
      result_revision: artifact.result_revision,
      decision,
      ...(decision === 'success' ? { observed_revision: artifact.result_revision } : {}),
      ...(decision === 'conflict' ? { observed_revision: observed } : {}),
      ...(note ? { message: note } : {}),
    });
    if (recorded) setTick((t) => t + 1);
  };
  return (
    <section class="artifact" aria-labelledby="artifact-title">
      <h4 id="artifact-title">
        Artifact <span class="task-id">{artifact.id}</span> <span class="muted">({artifact.state}, {artifact.media_type}, {artifact.payload_size} bytes)</span>
      </h4>
      <p class="muted">
        Base {artifact.base_revision} → result {artifact.result_revision}
      </p>
      {typeof payload.text === 'string' ? <TextBody text={payload.text} mediaType={payload.media_type} /> : <p class="muted">Binary payload ({payload.media_type}).</p>}
      <ErrorNote error={error} />
      {receipt ? (
        <p class="ok">
          Apply receipt: <strong>{receipt.decision}</strong> <When iso={receipt.recorded_at} />
          {receipt.message ? <> — {receipt.message}</> : null}
        </p>
      ) : artifact.state === 'published' && recorder ? (
        <form onSubmit={record} class="inline-form">
          <Field label="What happened when you applied it" id="receipt-decision">
            <select id="receipt-decision" value={decision} onChange={(e) => setDecision(e.currentTarget.value)}>
              <option value="success">success (the head moves to its result)</option>
              <option value="conflict">conflict</option>
              <option value="rejected">rejected</option>
              <option value="indeterminate">indeterminate</option>
            </select>
          </Field>
          {decision === 'conflict' ? (
            <Field label="Observed revision" id="receipt-observed">
              <input id="receipt-observed" required value={observed} onInput={(e) => setObserved(e.currentTarget.value)} />
            </Field>
          ) : null}
          <Field label="Note (optional)" id="receipt-note">
            <input id="receipt-note" value={note} onInput={(e) => setNote(e.currentTarget.value)} />
          </Field>
          <button type="submit">Record the decision</button>
        </form>
      ) : null}
    </section>
  );
}

function CallerActions({ token, reader, data, refresh }) {
  const { ids, error, send: post } = useCommand(token);
  const [reply, setReply] = useState('');
  const [confirmCancel, setConfirmCancel] = useState(false);
  const task = data.task;
  if (!token) {
    return (
      <>
        <Missing need="caller" />
        {task.artifact ? <Receipt token={reader} recorder={null} task={task} /> : null}
      </>
    );
  }
  const path = `/v1/tasks/${seg(task.id)}`;
  const send = async (action, kind, body) => {
    const sent = await post(action, `${path}/${kind}`, { expected_revision: task.revision, ...body });
    if (sent) refresh();
    return sent;
  };
  return (
    <section class="actions" aria-labelledby="caller-actions">
      <h4 id="caller-actions">As the caller</h4>
      <ErrorNote error={error} />
      {task.state === 'input_required' ? (
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            if (await send('reply', 'reply', { message: textMessage(ids, 'reply', reply) })) setReply('');
          }}
        >
          <Field label="Your answer" id="reply-text">
            <textarea id="reply-text" required rows={3} value={reply} onInput={(e) => setReply(e.currentTarget.value)} />
          </Field>
          <button type="submit" disabled={!reply.trim()}>
            Reply
          </button>
        </form>
      ) : null}
      {!TERMINAL.has(task.state) ? (
        confirmCancel ? (
          <p>
            Cancel task {task.id}? A frozen artifact is discarded.{' '}
            <button type="button" class="danger" onClick={() => send('cancel', 'cancel', {}).then(() => setConfirmCancel(false))}>
              Yes, cancel it
            </button>{' '}
            <button type="button" class="quiet" onClick={() => setConfirmCancel(false)}>
              Keep it
            </button>
          </p>
        ) : (
          <button type="button" class="danger" onClick={() => setConfirmCancel(true)}>
            Cancel the task…
          </button>
        )
      ) : null}
      {task.submission ? (
        <p>
          Result: submission <span class="task-id">{task.submission.id}</span>, published <When iso={task.submission.published_at} />.
        </p>
      ) : null}
      {task.artifact ? <Receipt token={token} recorder={token} task={task} /> : null}
    </section>
  );
}

export function BoardView({ taskId, query }) {
  const held = tokenFor('read');
  const caller = tokenFor('caller');
  const token = held && held.token;
  const [context, setContext] = useState(query.get('context') || '');
  const [state, setState] = useState(query.get('state') || '');
  const [tasks, setTasks] = useState(null);
  const [cursor, setCursor] = useState(null);
  const [total, setTotal] = useState(null);
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  const leases = useLeases(token);
  const now = useNow(15000);
  useLoad(
    async (live) => {
      if (!token) return;
      const started = performance.now();
      setTasks(null);
      leases.forget();
      let all = [];
      let next = null;
      do {
        const page = await call(token, 'GET', '/v1/tasks', { query: { context, state, limit: 100, cursor: next } });
        if (!live()) return;
        all = all.concat(page.items);
        next = page.cursor || null;
        if (page.total_size !== undefined) setTotal({ size: page.total_size, lower: page.total_is_lower_bound });
        setTasks(all);
      } while (next && all.length < BOARD_MAX);
      setCursor(next);
      performance.mark('board-loaded');
      window.__boardLoadMs = performance.now() - started;
    },
    [token, context, state, tick],
    setError,
  );
  const counts = useMemo(() => {
    const c = {};
    for (const t of tasks || []) c[t.state] = (c[t.state] || 0) + 1;
    return c;
  }, [tasks]);
  if (!held) return <Missing need="caller" />;
  return (
    <div class="view board">
      <h2 tabindex="-1">Task board</h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          setContext(form.elements.context.value.trim());
          setState(form.elements.state.value);
          setTick((t) => t + 1);
        }}
      >
        <Field label="Context" id="board-context">
          <input id="board-context" name="context" defaultValue={context} placeholder="any" />
        </Field>
        <Field label="State" id="board-state">
          <select id="board-state" name="state" defaultValue={state}>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s || 'any'}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Show</button>
      </form>
      <ErrorNote error={error} />
      {taskId ? (
        <TaskPanel token={token} taskId={taskId} onChange={() => undefined}>
          {({ data, refresh }) => <CallerActions token={caller && caller.token} reader={token} data={data} refresh={refresh} />}
        </TaskPanel>
      ) : null}
      <p class="summary" aria-live="polite">
        {tasks ? `${tasks.length} task(s) shown` : 'Loading…'}
        {total ? ` of ${total.size}${total.lower ? '+' : ''}` : ''}
        {cursor ? ' (more beyond the board’s 1,000)' : ''}
        {Object.entries(counts).map(([s, n]) => (
          <span key={s} class={`count state-${s}`}>
            {' '}
            {s} {n}
          </span>
        ))}
      </p>
      <div class="table-wrap" tabindex="0" role="region" aria-label="Tasks">
        <table class="tasks" data-testid="board">
          <Columns
            names={[
              'Task',
              'Context',
              'State',
              'Rev',
              'Lease holder',
              'Fence',
              'Last heartbeat',
              'Dispatcher fences',
              'Updated',
            ]}
          />
          <tbody>
            {(tasks || []).map((t) => (
              <Row key={t.id} task={t} lease={leases.leases[t.id]} want={leases.want} now={now} />
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
