// The person's tokens, in sessionStorage only (gone with the tab; never localStorage, never a
// cookie). A person may hold several (a caller, a worker seat, an admin): each view takes the one
// its commands need.

const KEY = 'dovecote.console.tokens';
const REASON = 'dovecote.console.signed-out';

export function held() {
  try {
    const list = JSON.parse(sessionStorage.getItem(KEY) || '[]');
    return Array.isArray(list) ? list.filter((t) => t && typeof t.token === 'string' && t.whoami) : [];
  } catch {
    return [];
  }
}

// `minted`: the console minted it (a sign-in link): signing out revokes it.
export function hold(token, whoami, minted = false) {
  const list = held().filter((t) => t.whoami.token_id !== whoami.token_id);
  list.push({ token, whoami, minted });
  sessionStorage.setItem(KEY, JSON.stringify(list));
}

export function drop(tokenId) {
  sessionStorage.setItem(KEY, JSON.stringify(held().filter((t) => t.whoami.token_id !== tokenId)));
}

export function signOut(reason) {
  sessionStorage.removeItem(KEY);
  if (reason) sessionStorage.setItem(REASON, reason);
}

export function takeReason() {
  const reason = sessionStorage.getItem(REASON) || '';
  sessionStorage.removeItem(REASON);
  return reason;
}

// What each kind of work needs: worker commands a worker id (a worker token, or an admin one
// with a worker); caller commands a caller or an admin; admin routes an admin; reads any token.
export function tokenFor(need, list = held()) {
  const by = (test) => list.find((t) => test(t.whoami));
  if (need === 'worker') return by((w) => w.role === 'worker') || by((w) => w.role === 'admin' && w.worker);
  if (need === 'caller') return by((w) => w.role === 'caller') || by((w) => w.role === 'admin');
  if (need === 'admin') return by((w) => w.role === 'admin');
  return by((w) => w.role === 'caller') || by((w) => w.role === 'admin') || list[0];
}
