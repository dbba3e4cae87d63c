// Signing in: paste a token (checked with GET /v1/whoami), or follow the one-time link `dovecote dev`
// prints (`/console/#link=…`). The link's token leaves the URL before anything else runs; it is an
// admin token of one day, spent at once: the console mints the person's own tokens with it (a caller,
// a worker seat `person`, an admin; one day each) and revokes it, so the link signs in only once.
import { useState } from 'preact/hooks';
import { ApiError, AuthError, call, describe, seg } from '../api.js';
import { held, hold } from '../session.js';
import { Field } from '../ui.jsx';

export const PERSON = 'person';

export function takeLinkFromUrl() {
  const hash = location.hash || '';
  if (!hash.startsWith('#link=')) return '';
  const token = decodeURIComponent(hash.slice('#link='.length));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
  return token;
}

export async function spendLink(link) {
  let me;
  try {
    me = await call(link, 'GET', '/v1/whoami', { probe: true });
  } catch (e) {
    if (e instanceof AuthError) throw new Error('This sign-in link was used already, revoked or expired: paste a token, or restart dovecote dev for a new link.');
    throw e;
  }
  if (me.role !== 'admin') throw new Error('A sign-in link carries an admin token; this one is a ' + me.role + ' token. Paste it instead.');
  for (const [role, extra] of [
    ['caller', { agent: PERSON }],
    ['worker', { worker: PERSON }],
    ['admin', {}],
  ]) {
    const minted = await call(link, 'POST', '/v1/admin/tokens', { body: { authority: me.authority, role, expires_in_days: 1, ...extra } });
    const { token, ...whoami } = minted;
    hold(token, whoami, true);
  }
  try {
    await call(link, 'DELETE', `/v1/admin/tokens/${seg(me.token_id)}`);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw new Error(`Signed in, but the link could not be revoked: ${describe(e)}`);
  }
}

export function SignIn({ reason, onSignedIn }) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    const input = e.currentTarget.elements.token;
    const token = input.value.trim();
    setBusy(true);
    setError('');
    try {
      const whoami = await call(token, 'GET', '/v1/whoami', { probe: true });
      hold(token, whoami);
      input.value = '';
      onSignedIn();
    } catch (err) {
      setError(err instanceof AuthError ? err.message : describe(err));
    } finally {
      setBusy(false);
    }
  };
  const list = held();
  return (
    <div class="view signin">
      <h2 tabindex="-1">Sign in</h2>
      {reason ? (
        <p class="error" role="alert">
          {reason}
        </p>
      ) : null}
      <p>
        Paste a Dovecote bearer token (<code>dvc_…</code>). It is kept in this tab's session storage only, and sent only to the API.
        Under <code>dovecote dev</code>, follow the sign-in link it prints instead.
      </p>
      <form onSubmit={submit}>
        <Field label="Token" id="signin-token">
          <input id="signin-token" name="token" type="password" autoComplete="off" spellcheck={false} required />
        </Field>
        <button type="submit" disabled={busy}>
          {list.length ? 'Add this token' : 'Sign in'}
        </button>
      </form>
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : null}
      {list.length ? (
        <>
          <h3>Tokens held in this tab</h3>
          <ul>
            {list.map((t) => (
              <li key={t.whoami.token_id}>
                {t.whoami.role} {t.whoami.worker ? `(worker ${t.whoami.worker})` : ''} {t.whoami.agent ? `(agent ${t.whoami.agent})` : ''} in{' '}
                {t.whoami.authority}, token {t.whoami.token_id}
              </li>
            ))}
          </ul>
          <p>
            <a href="#/board">Go to the task board</a>
          </p>
        </>
      ) : null}
    </div>
  );
}
