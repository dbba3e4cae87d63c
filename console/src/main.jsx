// The Dovecote console: one more client of the public HTTP API. Routes live in the URL's fragment
// (#/board/TASK, #/worker, #/memory?scope=…), so the static host serves one page.
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { call, describe, loadConfig, seg, whenSignedOut } from './api.js';
import { held, signOut, takeReason, drop } from './session.js';
import { AdminView } from './views/admin.jsx';
import { BoardView } from './views/board.jsx';
import { MemoryView } from './views/memory.jsx';
import { NotesView } from './views/notes.jsx';
import { RecallView } from './views/recall.jsx';
import { SignIn, spendLink, takeLinkFromUrl } from './views/signin.jsx';
import { WorkerView } from './views/worker.jsx';

// Before anything else runs: a sign-in link's token leaves the address bar and the history entry.
const link = takeLinkFromUrl();

const VIEWS = [
  ['board', 'Task board'],
  ['worker', 'Worker seat'],
  ['memory', 'Memory review'],
  ['recall', 'Recall'],
  ['notes', 'Notes'],
  ['admin', 'Admin'],
];

function parseRoute() {
  const raw = (location.hash || '#/').slice(1);
  const [pathPart, search = ''] = raw.split('?');
  const parts = pathPart.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { view: parts[0] || '', id: parts[1] || '', query: new URLSearchParams(search) };
}

function useRoute() {
  const [route, setRoute] = useState(parseRoute);
  useEffect(() => {
    const on = () => setRoute(parseRoute());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

function App() {
  const route = useRoute();
  const [tokens, setTokens] = useState(held);
  const [reason, setReason] = useState(takeReason);
  const [linking, setLinking] = useState(!!link);
  const main = useRef(null);
  useEffect(() => {
    whenSignedOut((error) => {
      signOut();
      setTokens([]);
      setReason(`Signed out: ${error.message}`);
      location.hash = '#/signin';
    });
    if (link) {
      spendLink(link)
        .then(
          () => {
            setTokens(held());
            location.hash = '#/board';
          },
          (e) => setReason(describe(e)),
        )
        .finally(() => setLinking(false));
    }
  }, []);
  useEffect(() => {
    // A new view: focus its heading, so a keyboard or screen reader user lands on it.
    const heading = main.current && main.current.querySelector('h2');
    if (heading) heading.focus({ preventScroll: false });
    const label = VIEWS.find(([v]) => v === route.view);
    document.title = `${label ? label[1] : 'Sign in'} · Dovecote console`;
  }, [route.view, tokens.length]);
  const signedIn = tokens.length > 0;
  let view;
  if (linking) view = <p role="status">Signing in with the link…</p>;
  else if (!signedIn || route.view === 'signin' || !route.view) {
    view = signedIn && !route.view ? <BoardView key="board" taskId="" query={route.query} /> : <SignIn reason={reason} onSignedIn={() => { setTokens(held()); setReason(''); location.hash = '#/board'; }} />;
  } else if (route.view === 'board') view = <BoardView key="board" taskId={route.id} query={route.query} />;
  else if (route.view === 'worker') view = <WorkerView taskId={route.id} />;
  else if (route.view === 'memory') view = <MemoryView query={route.query} />;
  else if (route.view === 'recall') view = <RecallView query={route.query} />;
  else if (route.view === 'notes') view = <NotesView query={route.query} noteRef={route.id} />;
  else if (route.view === 'admin') view = <AdminView />;
  else view = <p>No such view. <a href="#/board">The task board</a>.</p>;
  const leave = async () => {
    // Tokens the console minted (a sign-in link's) are revoked, the admin one last; pasted ones are
    // only forgotten: they stay valid until they expire or an admin revokes them.
    const list = held();
    const admin = list.find((t) => t.minted && t.whoami.role === 'admin');
    if (admin) {
      const order = [...list.filter((t) => t.minted && t !== admin), admin];
      for (const t of order) {
        try {
          await call(admin.token, 'DELETE', `/v1/admin/tokens/${seg(t.whoami.token_id)}`, { probe: true });
        } catch {
          /* it expires within a day anyway */
        }
      }
    }
    for (const t of list) drop(t.whoami.token_id);
    signOut('Signed out.');
    setTokens([]);
    setReason(takeReason());
    location.hash = '#/signin';
  };
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); main.current && main.current.focus(); }}>
        Skip to the content
      </a>
      <header class="top">
        <h1>Dovecote</h1>
        {signedIn ? (
          <nav aria-label="Views">
            <ul>
              {VIEWS.map(([v, label]) => (
                <li key={v}>
                  <a href={`#/${v}`} aria-current={route.view === v || (!route.view && v === 'board') ? 'page' : undefined}>
                    {label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        ) : null}
        {signedIn ? (
          <div class="who">
            <span>
              {tokens.map((t) => t.whoami.role + (t.whoami.worker ? ` (${t.whoami.worker})` : '')).join(', ')} in {tokens[0].whoami.authority}
            </span>{' '}
            <a href="#/signin">Tokens</a>{' '}
            <button type="button" class="quiet" onClick={leave}>
              Sign out
            </button>
          </div>
        ) : null}
      </header>
      <main id="main" ref={main} tabindex="-1">
        {view}
      </main>
    </>
  );
}

loadConfig().then(
  () => {
    const root = document.getElementById('app');
    root.replaceChildren(); // the "Loading…" placeholder
    render(<App />, root);
  },
  (error) => {
    const p = document.createElement('p');
    p.className = 'error';
    p.textContent = `The console could not read its configuration: ${error.message}`;
    document.getElementById('app').replaceChildren(p);
  },
);
