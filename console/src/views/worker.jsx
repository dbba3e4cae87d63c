// The worker seat: what is claimable, the person's leases, and one task to drive: accept or reject,
// ask for input, complete with a message and an artifact, fail, release. While the seat shows a task
// it holds, it heartbeats at a quarter of the lease timeout; once the tab is gone the heartbeats
// stop, so an unaccepted grant returns at its accept timeout and an accepted one at its lease timeout.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, call, seg } from '../api.js';
import { tokenFor } from '../session.js';
import { Busy, ErrorNote, Field, Missing, When } from '../ui.jsx';
import { filePayload, textMessage, useCommandIds } from './commands.js';
import { TaskPanel } from './task.jsx';
import { TERMINAL } from '../live.js';

const MAX_INLINE = 4 * 1024 * 1024;
const EMPTY_REVISION = 'empty';

function useList(token, load, deps) {
  const [items, setItems] = useState(null);
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!token) return undefined;
    let live = true;
    load()
      .then((list) => live && (setItems(list), setError(null)))
      .catch((e) => live && setError(e));
    return () => {
      live = false;
    };
  }, [token, tick, ...deps]);
  return { items, error, reload: () => setTick((t) => t + 1) };
}

function Heartbeat({ token, task, lease }) {
  const [beat, setBeat] = useState(null);
  useEffect(() => {
    if (!lease || lease.state !== 'accepted' || !lease.lease_timeout_seconds) return undefined;
    const every = Math.max(5, lease.lease_timeout_seconds / 4) * 1000;
    const timer = setInterval(async () => {
      try {
        await call(token, 'POST', `/v1/tasks/${seg(task.id)}/lease/heartbeat`, { body: { fence: lease.fence } });
        setBeat(new Date().toISOString());
      } catch (e) {
        setBeat(null);
      }
    }, every);
    return () => clearInterval(timer);
  }, [token, task.id, lease && lease.fence, lease && lease.state]);
  if (!lease || lease.state !== 'accepted') return null;
  return (
    <p class="muted">
      {lease.lease_timeout_seconds
        ? `While this page shows the task it sends a heartbeat every ${Math.max(5, lease.lease_timeout_seconds / 4)} s; closed, the lease lapses ${lease.lease_timeout_seconds} s after the last one.`
        : 'This lease has no timeout: release it when you stop.'}
      {beat ? (
        <>
          {' '}
          Last heartbeat sent <When iso={beat} />.
        </>
      ) : null}
    </p>
  );
}

function WorkerActions({ token, me, data, refresh, onDone }) {
  const ids = useCommandIds();
  const [busy, setBusy] = useState('');
  const [error, setError] = useState(null);
  const [said, setSaid] = useState('');
  const [question, setQuestion] = useState('');
  const [final, setFinal] = useState('');
  const [reason, setReason] = useState('');
  const [artifactText, setArtifactText] = useState('');
  const [artifactType, setArtifactType] = useState('text/x-diff');
  const [file, setFile] = useState(null);
  const task = data.task;
  const lease = data.lease;
  if (TERMINAL.has(task.state)) {
    // The command that ended the task says what it did, after the refresh that shows the end.
    return (
      <>
        {said ? (
          <p class="ok" role="status">
            {said}
          </p>
        ) : null}
        <p class="notice">The task is {task.state}: nothing more to do.</p>
      </>
    );
  }
  if (!lease || lease.worker !== me.worker) {
    return <p class="notice">This seat ({me.worker}) does not hold this task{lease ? `: ${lease.worker} does` : ''}.</p>;
  }
  const path = `/v1/tasks/${seg(task.id)}`;
  const base = { expected_revision: task.revision, fence: lease.fence };
  const run = async (action, work) => {
    setBusy(action);
    setError(null);
    setSaid('');
    try {
      const message = await work();
      ids.done(action);
      setSaid(message);
      refresh();
      if (onDone) onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy('');
    }
  };
  const command = (action, kind, extra = {}) =>
    call(token, 'POST', `${path}/${kind}`, { body: { command_id: ids.id(action), ...base, ...extra } });

  const complete = async () => {
    let revision = task.revision;
    let artifactId;
    let payload = null;
    if (file) payload = await filePayload(file, artifactType);
    else if (artifactText.trim()) payload = { media_type: artifactType || 'text/plain', text: artifactText };
    if (payload) {
      const size = payload.text ? new Blob([payload.text]).size : (payload.data_b64.length * 3) / 4;
      if (size > MAX_INLINE) throw new ApiError(0, 'too_large', 'The console sends artifacts up to 4 MiB inline; use the CLI for a larger one.');
      let head = EMPTY_REVISION;
      try {
        head = (await call(token, 'GET', `/v1/workspaces/${seg(task.workspace)}/head`)).confirmed_revision;
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 404) throw e;
      }
      artifactId = `${ids.id('complete')}-a`;
      const frozen = await call(token, 'POST', `${path}/artifacts`, {
        body: {
          command_id: `${ids.id('complete')}-f`,
          ...base,
          artifact_id: artifactId,
          expected_base_revision: head,
          payload,
        },
      });
      revision = frozen.task.revision;
    }
    await call(token, 'POST', `${path}/complete`, {
      body: {
        command_id: ids.id('complete'),
        expected_revision: revision,
        fence: lease.fence,
        submission_id: `${ids.id('complete')}-s`,
        message: textMessage(ids, 'complete', final),
        ...(artifactId ? { artifact_id: artifactId } : {}),
      },
    });
    return artifactId ? `Completed, with artifact ${artifactId}.` : 'Completed.';
  };

  return (
    <section class="actions" aria-labelledby="seat-actions">
      <h4 id="seat-actions">Your moves (fence {lease.fence}, revision {task.revision})</h4>
      {lease.state === 'granted' ? (
        <p class="notice">
          Granted, not accepted yet: it returns to the queue <When iso={lease.fenced_after} /> unless you accept it.
        </p>
      ) : null}
      <Heartbeat token={token} task={task} lease={lease} />
      <ErrorNote error={error} />
      {said ? (
        <p class="ok" role="status">
          {said}
        </p>
      ) : null}
      <div class="buttons">
        {task.state === 'submitted' ? (
          <>
            <button type="button" disabled={!!busy} onClick={() => run('accept', async () => (await command('accept', 'accept'), 'Accepted.'))}>
              Accept
            </button>
            <button type="button" disabled={!!busy} onClick={() => run('reject', async () => (await command('reject', 'reject'), 'Rejected.'))}>
              Reject
            </button>
          </>
        ) : null}
        <button
          type="button"
          disabled={!!busy}
          onClick={() =>
            run('release', async () => {
              await call(token, 'POST', `${path}/lease/fence`, { body: { command_id: ids.id('release'), fence: lease.fence } });
              return 'Released: the task is claimable again.';
            })
          }
        >
          Release the lease
        </button>
      </div>
      {task.state === 'working' ? (
        <div class="forms">
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run('ask', async () => {
                await command('ask', 'request-input', { message: textMessage(ids, 'ask', question) });
                setQuestion('');
                return 'Asked: the task waits for the caller.';
              });
            }}
          >
            <Field label="Ask the caller" id="ask-text">
              <textarea id="ask-text" required value={question} onInput={(e) => setQuestion(e.currentTarget.value)} rows={3} />
            </Field>
            <button type="submit" disabled={!!busy || !question.trim()}>
              Ask for input
            </button>
          </form>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              run('complete', complete);
            }}
          >
            <Field label="Final message" id="final-text">
              <textarea id="final-text" required value={final} onInput={(e) => setFinal(e.currentTarget.value)} rows={3} />
            </Field>
            <fieldset>
              <legend>Artifact (optional)</legend>
              <Field label="Paste the artifact" id="artifact-text" hint="A diff is shown as a diff.">
                <textarea id="artifact-text" value={artifactText} onInput={(e) => setArtifactText(e.currentTarget.value)} rows={5} aria-describedby="artifact-text-hint" />
              </Field>
              <Field label="or upload a file" id="artifact-file">
                <input id="artifact-file" type="file" onChange={(e) => setFile(e.currentTarget.files[0] || null)} />
              </Field>
              <Field label="Media type" id="artifact-type">
                <input id="artifact-type" value={artifactType} onInput={(e) => setArtifactType(e.currentTarget.value)} />
              </Field>
            </fieldset>
            <button type="submit" disabled={!!busy || !final.trim()}>
              Complete
            </button>
          </form>
        </div>
      ) : null}
      {task.state === 'input_required' ? <p class="muted">Waiting for the caller's reply.</p> : null}
      {task.state === 'working' || task.state === 'input_required' ? (
        <form
          class="fail"
          onSubmit={(e) => {
            e.preventDefault();
            run('fail', async () => {
              await command('fail', 'fail', reason.trim() ? { reason } : {});
              return reason.trim() ? 'Failed, with your reason on the timeline.' : 'Failed.';
            });
          }}
        >
          <Field label="Why it failed (optional, shown to the caller)" id="fail-reason">
            <textarea id="fail-reason" value={reason} onInput={(e) => setReason(e.currentTarget.value)} rows={2} maxLength={2048} />
          </Field>
          <button type="submit" class="danger" disabled={!!busy}>
            Fail the task
          </button>
        </form>
      ) : null}
    </section>
  );
}

export function WorkerView({ taskId }) {
  const held = tokenFor('worker');
  const token = held && held.token;
  const me = held && held.whoami;
  const [error, setError] = useState(null);
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const ids = useCommandIds();
  const leases = useList(token, async () => (await call(token, 'GET', '/v1/leases')).items, []);
  const open = useList(token, async () => (await call(token, 'GET', '/v1/tasks', { query: { state: 'submitted', limit: 50 } })).items, []);
  const reload = useCallback(() => {
    leases.reload();
    open.reload();
  }, []);
  if (!held) return <Missing need="worker" />;
  const take = async (kind, id) => {
    setBusy(true);
    setError(null);
    setSaid('');
    try {
      const answer =
        kind === 'claim'
          ? await call(token, 'POST', '/v1/leases/claim', { body: { command_id: ids.id('claim'), wait_seconds: 0 } })
          : await call(token, 'POST', `/v1/tasks/${seg(id)}/lease`, { body: { command_id: ids.id(`take-${id}`) } });
      ids.done(kind === 'claim' ? 'claim' : `take-${id}`);
      location.hash = `#/worker/${encodeURIComponent(answer.assignment.task.id)}`;
      reload();
    } catch (e) {
      if (kind === 'claim' && e instanceof ApiError && e.status === 404 && e.code === 'not_found') setSaid('Nothing is claimable right now.');
      else setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="view worker">
      <h2 tabindex="-1">Worker seat</h2>
      <p class="muted">
        Working as <strong>{me.worker}</strong> (authority {me.authority}).
      </p>
      <div class="columns">
        <section aria-labelledby="leases-title">
          <h3 id="leases-title">Your leases</h3>
          <ErrorNote error={leases.error} />
          <Busy when={!leases.items && !leases.error} />
          {leases.items && !leases.items.length ? <p class="muted">You hold no task.</p> : null}
          <ul class="list">
            {(leases.items || []).map((a) => (
              <li key={a.task.id}>
                <a href={`#/worker/${encodeURIComponent(a.task.id)}`}>{a.task.id}</a> <span class={`state state-${a.task.state}`}>{a.task.state}</span>{' '}
                <span class="muted">fence {a.fence}</span> {a.accepted_at ? null : <span class="badge">not accepted</span>}
              </li>
            ))}
          </ul>
        </section>
        <section aria-labelledby="open-title">
          <h3 id="open-title">Claimable</h3>
          <button type="button" disabled={busy} onClick={() => take('claim')}>
            Claim the next task
          </button>{' '}
          <button type="button" class="quiet" onClick={reload}>
            Refresh
          </button>
          <ErrorNote error={error || open.error} />
          {said ? <p role="status">{said}</p> : null}
          <Busy when={!open.items && !open.error} />
          {open.items && !open.items.length ? <p class="muted">No submitted task waits.</p> : null}
          <ul class="list">
            {(open.items || []).map((t) => (
              <li key={t.id}>
                <span class="task-id">{t.id}</span> <span class="muted">{t.context}</span> <When iso={t.created_at} />{' '}
                <button type="button" class="small" disabled={busy} onClick={() => take('take', t.id)} aria-label={`Take task ${t.id}`}>
                  Take
                </button>
              </li>
            ))}
          </ul>
        </section>
      </div>
      {taskId ? (
        <TaskPanel token={token} taskId={taskId} onChange={reload}>
          {({ data, refresh }) => <WorkerActions token={token} me={me} data={data} refresh={refresh} onDone={reload} />}
        </TaskPanel>
      ) : (
        <p class="muted">Claim a task, take one, or open one of your leases.</p>
      )}
    </div>
  );
}
