// Admin: who each held token is (whoami), and the authority's tokens: list, mint (the secret is
// shown once), revoke.
import { useEffect, useState } from 'preact/hooks';
import { call, seg } from '../api.js';
import { held, tokenFor } from '../session.js';
import { Busy, Columns, ErrorNote, Field, When } from '../ui.jsx';

function WhoAmI() {
  const [answers, setAnswers] = useState(null);
  useEffect(() => {
    Promise.all(
      held().map((t) =>
        call(t.token, 'GET', '/v1/whoami').then(
          (w) => ({ ok: w }),
          (e) => ({ error: e, token_id: t.whoami.token_id }),
        ),
      ),
    ).then(setAnswers);
  }, []);
  return (
    <section aria-labelledby="whoami-title">
      <h3 id="whoami-title">Who you are (whoami)</h3>
      <Busy when={!answers} />
      <table class="whoami">
        <Columns names={['Token id', 'Authority', 'Role', 'Worker', 'Agent', 'Expires']} />
        <tbody>
          {(answers || []).map((a, i) =>
            a.ok ? (
              <tr key={a.ok.token_id}>
                <th scope="row">{a.ok.token_id}</th>
                <td>{a.ok.authority}</td>
                <td>{a.ok.role}</td>
                <td>{a.ok.worker || ''}</td>
                <td>{a.ok.agent || ''}</td>
                <td>
                  <When iso={a.ok.expires_at} />
                </td>
              </tr>
            ) : (
              <tr key={i}>
                <th scope="row">{a.token_id}</th>
                <td colSpan={5}>
                  <ErrorNote error={a.error} />
                </td>
              </tr>
            ),
          )}
        </tbody>
      </table>
    </section>
  );
}

function Mint({ token, authority, onMinted }) {
  const [role, setRole] = useState('caller');
  const [worker, setWorker] = useState('');
  const [agent, setAgent] = useState('');
  const [days, setDays] = useState('');
  const [minted, setMinted] = useState(null);
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setMinted(null);
    try {
      const body = { authority, role };
      if (worker.trim()) body.worker = worker.trim();
      if (agent.trim()) body.agent = agent.trim();
      if (days.trim()) body.expires_in_days = Number(days);
      setMinted(await call(token, 'POST', '/v1/admin/tokens', { body }));
      onMinted();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section aria-labelledby="mint-title">
      <h3 id="mint-title">Mint a token in {authority}</h3>
      <form class="filters" onSubmit={submit}>
        <Field label="Role" id="mint-role">
          <select id="mint-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
            <option value="caller">caller</option>
            <option value="worker">worker</option>
            <option value="admin">admin</option>
          </select>
        </Field>
        <Field label="Worker id" id="mint-worker" hint="worker tokens">
          <input id="mint-worker" value={worker} onInput={(e) => setWorker(e.currentTarget.value)} aria-describedby="mint-worker-hint" />
        </Field>
        <Field label="Agent" id="mint-agent" hint="caller tokens">
          <input id="mint-agent" value={agent} onInput={(e) => setAgent(e.currentTarget.value)} aria-describedby="mint-agent-hint" />
        </Field>
        <Field label="Expires in days" id="mint-days" hint="empty: the default">
          <input id="mint-days" inputMode="numeric" value={days} onInput={(e) => setDays(e.currentTarget.value)} aria-describedby="mint-days-hint" />
        </Field>
        <button type="submit">Mint</button>
      </form>
      <ErrorNote error={error} />
      {minted ? (
        <div class="secret" role="status">
          <p>
            <strong>Token {minted.token_id}</strong> ({minted.role}
            {minted.worker ? `, worker ${minted.worker}` : ''}), expires <When iso={minted.expires_at} />. It is shown this once: copy it now.
          </p>
          <label for="minted-token">The secret</label>
          <input id="minted-token" readOnly value={minted.token} onFocus={(e) => e.currentTarget.select()} />
          <button type="button" onClick={() => navigator.clipboard && navigator.clipboard.writeText(minted.token)}>
            Copy
          </button>{' '}
          <button type="button" class="quiet" onClick={() => setMinted(null)}>
            Done: forget it
          </button>
        </div>
      ) : null}
    </section>
  );
}

export function AdminView() {
  const admin = tokenFor('admin');
  const [tokens, setTokens] = useState(null);
  const [cursor, setCursor] = useState(null);
  const [error, setError] = useState(null);
  const [tick, setTick] = useState(0);
  const [confirm, setConfirm] = useState('');
  useEffect(() => {
    if (!admin) return;
    call(admin.token, 'GET', '/v1/admin/tokens', { query: { limit: 100 } }).then(
      (page) => {
        setTokens(page.items);
        setCursor(page.cursor || null);
      },
      setError,
    );
  }, [tick]);
  const more = async () => {
    try {
      const page = await call(admin.token, 'GET', '/v1/admin/tokens', { query: { limit: 100, cursor } });
      setTokens((t) => [...t, ...page.items]);
      setCursor(page.cursor || null);
    } catch (e) {
      setError(e);
    }
  };
  const revoke = async (id) => {
    setError(null);
    try {
      await call(admin.token, 'DELETE', `/v1/admin/tokens/${seg(id)}`);
      setConfirm('');
      setTick((t) => t + 1);
    } catch (e) {
      setError(e);
    }
  };
  return (
    <div class="view admin">
      <h2 tabindex="-1">Admin</h2>
      <WhoAmI />
      {admin ? (
        <>
          <Mint token={admin.token} authority={admin.whoami.authority} onMinted={() => setTick((t) => t + 1)} />
          <section aria-labelledby="tokens-title">
            <h3 id="tokens-title">Tokens of {admin.whoami.authority}</h3>
            <p class="muted">Revocation takes effect within the authorizer's cache time (300 s deployed).</p>
            <ErrorNote error={error} />
            <Busy when={!tokens && !error} />
            <table class="tokens">
              <Columns
                names={[
                  'Token id',
                  'Role',
                  'Worker',
                  'Agent',
                  'Minted by',
                  'Created',
                  'Expires',
                  'Revoked',
                  '',
                ]}
              />
              <tbody>
                {(tokens || []).map((t) => (
                  <tr key={t.token_id}>
                    <th scope="row">{t.token_id}</th>
                    <td>{t.role}</td>
                    <td>{t.worker || ''}</td>
                    <td>{t.agent || ''}</td>
                    <td>{t.minted_by}</td>
                    <td>
                      <When iso={t.created_at} />
                    </td>
                    <td>
                      <When iso={t.expires_at} />
                    </td>
                    <td>{t.revoked_at ? <When iso={t.revoked_at} /> : ''}</td>
                    <td>
                      {t.revoked_at ? null : confirm === t.token_id ? (
                        <>
                          <button type="button" class="danger small" onClick={() => revoke(t.token_id)}>
                            Revoke {t.token_id}
                          </button>{' '}
                          <button type="button" class="quiet small" onClick={() => setConfirm('')}>
                            Keep
                          </button>
                        </>
                      ) : (
                        <button type="button" class="small" onClick={() => setConfirm(t.token_id)} aria-label={`Revoke token ${t.token_id}…`}>
                          Revoke…
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {cursor ? (
              <button type="button" onClick={more}>
                More
              </button>
            ) : null}
          </section>
        </>
      ) : (
        <p class="notice">Listing, minting and revoking tokens needs an admin token.</p>
      )}
    </div>
  );
}
