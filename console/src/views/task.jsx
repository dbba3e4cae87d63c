// One task, as both seats see it: its facts, its lease (holder, fence, last sign of life, when the
// dispatcher fences it), the conversation, and the timeline of events, live (live.js).
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { call, seg } from '../api.js';
import { follow, TERMINAL } from '../live.js';
import { Busy, Conversation, ErrorNote, Facts, When, useLoad, useNow } from '../ui.jsx';

export async function readAll(token, path, key = 'items') {
  const items = [];
  let after = 0;
  for (let pages = 0; pages < 50; pages += 1) {
    const page = await call(token, 'GET', path, { query: { after } });
    items.push(...page[key]);
    if (!page.has_more) break;
    after = page.next;
  }
  return items;
}

// The task with its lease and messages, re-read whenever its timeline moves.
export function useTask(token, taskId) {
  const [data, setData] = useState(null);
  const [messages, setMessages] = useState([]);
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  const refresh = useCallback(() => setTick((t) => t + 1), []);
  useLoad(
    async (live) => {
      if (!token || !taskId) return;
      const read = await call(token, 'GET', `/v1/tasks/${seg(taskId)}`);
      const msgs = await readAll(token, `/v1/tasks/${seg(taskId)}/messages`);
      if (!live()) return;
      setData(read);
      setMessages(msgs);
      setError(null);
    },
    [token, taskId, tick],
    setError,
  );
  return { data, messages, error, refresh };
}

export function LeaseFacts({ lease, lastLease }) {
  const now = useNow();
  if (!lease) {
    return (
      <div class="lease">
        <h4>Lease</h4>
        <p>No one holds this task.</p>
        {lastLease ? (
          <p class="muted">
            The last lease (fence {lastLease.fence}, {lastLease.worker}) ended <When iso={lastLease.ended_at} now={now} />:{' '}
            {lastLease.reason}, by {lastLease.by}.
          </p>
        ) : null}
      </div>
    );
  }
  const deadline = lease.state === 'granted' ? 'Returns unless accepted' : 'Fenced if silent';
  return (
    <div class="lease">
      <h4>Lease</h4>
      <Facts
        rows={[
          ['Holder', <span class="holder">{lease.worker}</span>],
          ['Fence', String(lease.fence)],
          ['State', lease.state],
          ['Granted', <When iso={lease.granted_at} now={now} />],
          lease.accepted_at ? ['Accepted', <When iso={lease.accepted_at} now={now} />] : null,
          ['Last heartbeat', <When iso={lease.heartbeat_at} now={now} />],
          [deadline, lease.fenced_after ? <When iso={lease.fenced_after} now={now} /> : 'never (no timeout)'],
        ]}
      />
    </div>
  );
}

export function TaskFacts({ task }) {
  return (
    <Facts
      rows={[
        ['State', <span class={`state state-${task.state}`}>{task.state}</span>],
        ['Revision', String(task.revision)],
        ['Context', task.context],
        ['Workspace', task.workspace],
        ['Updated', <When iso={task.updated_at} />],
        task.artifact ? ['Artifact', task.artifact] : null,
        task.submission ? ['Submission', task.submission.id] : null,
      ]}
    />
  );
}

export function Timeline({ token, taskId, onMove }) {
  const [events, setEvents] = useState([]);
  const [mode, setMode] = useState('');
  const [ended, setEnded] = useState(false);
  const [error, setError] = useState(null);
  const move = useRef(onMove);
  move.current = onMove;
  useEffect(() => {
    setEvents([]);
    setEnded(false);
    const handle = follow(token, taskId, 0, {
      onEvent: (event) => {
        setEvents((list) => [...list, event]);
        setError(null);
        move.current && move.current(event);
      },
      onLease: () => move.current && move.current(null),
      onEnd: () => setEnded(true),
      onError: setError,
      onMode: setMode,
    });
    return () => handle.stop();
  }, [token, taskId]);
  return (
    <section class="timeline" aria-labelledby="timeline-title">
      <h4 id="timeline-title">Timeline</h4>
      <p class="muted" aria-live="polite">
        {ended ? 'The task has ended; the timeline is complete.' : mode === 'poll' ? 'Live (polling every second).' : mode ? 'Live (streamed).' : 'Connecting…'}
      </p>
      <ErrorNote error={error} />
      <ol class="events" data-testid="timeline">
        {events.map((e) => (
          <li key={e.sequence} class={`event state-${e.state}`}>
            <span class="seq">#{e.sequence}</span> <strong>{e.type}</strong> → <span class="state">{e.state}</span>{' '}
            <span class="muted">rev {e.revision}</span> <When iso={e.occurred_at} />
            {e.reason ? (
              <p class="reason">
                Reason given: <q>{e.reason}</q>
              </p>
            ) : null}
          </li>
        ))}
      </ol>
    </section>
  );
}

export function TaskPanel({ token, taskId, children, onChange }) {
  const { data, messages, error, refresh } = useTask(token, taskId);
  const onMove = useCallback(() => {
    refresh();
    onChange && onChange();
  }, [refresh, onChange]);
  if (error && !data) return <ErrorNote error={error} />;
  if (!data) return <Busy when>Loading the task…</Busy>;
  const task = data.task;
  return (
    <article class="task-panel" aria-labelledby="task-title">
      <h3 id="task-title" tabindex="-1">
        Task <span class="task-id">{task.id}</span>
      </h3>
      <ErrorNote error={error} />
      <div class="columns">
        <div>
          <TaskFacts task={task} />
          <LeaseFacts lease={data.lease} lastLease={data.last_lease} />
        </div>
        <Timeline token={token} taskId={taskId} onMove={onMove} />
      </div>
      {children ? children({ data, task, refresh, terminal: TERMINAL.has(task.state) }) : null}
      <section aria-labelledby="conversation-title">
        <h4 id="conversation-title">Conversation</h4>
        <Conversation messages={messages} />
      </section>
    </article>
  );
}
