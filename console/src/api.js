// The one door to the HTTP API: every request carries the person's bearer token and nothing else
// (no cookies, no referrer), and every failure becomes an ApiError. A refusal by the gateway or the
// authorizer (401 with no token, 403 for an invalid, expired or revoked one: their bodies are
// `{"message": …}`, not Dovecote's error envelope) is an AuthError: the app signs out and says why.
// A 403 with Dovecote's envelope (`forbidden`: a caller token on a worker route) is an ordinary
// ApiError, shown where it happened.

let apiBase = '';

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

export class AuthError extends ApiError {}

// config.json names the API's origin ("" or absent: the page's own, as under `dovecote dev`).
export async function loadConfig() {
  const response = await fetch('config.json', { cache: 'no-store', credentials: 'omit' });
  if (!response.ok) throw new Error(`config.json answered ${response.status}`);
  const config = await response.json();
  const api = typeof config.api === 'string' ? config.api.trim() : '';
  if (api) {
    const url = new URL(api);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('config.json: api must be http(s)');
    apiBase = url.href.replace(/\/+$/, '');
  }
  return { api: apiBase };
}

export function apiOrigin() {
  return apiBase || location.origin;
}

export function url(path, query) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  }
  const search = params.toString();
  return `${apiBase}${path}${search ? `?${search}` : ''}`;
}

// One path segment: an id never adds a segment (`/` is encoded).
export function seg(value) {
  return encodeURIComponent(String(value));
}

export function headers(token, extra) {
  return { Authorization: `Bearer ${token}`, ...(extra || {}) };
}

export async function failure(response) {
  let body = null;
  const text = await response.text();
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  const envelope = body && typeof body === 'object' ? body.error : null;
  if (envelope && typeof envelope === 'object') {
    return new ApiError(response.status, String(envelope.code || ''), String(envelope.message || ''), envelope.details);
  }
  const said = body && typeof body.message === 'string' ? body.message : response.statusText;
  if (response.status === 401) {
    return new AuthError(401, 'unauthorized', `The API asked for a token (401 ${said}).`);
  }
  if (response.status === 403) {
    return new AuthError(403, 'forbidden', `The API refused the token (403 ${said}): it is invalid, expired or revoked.`);
  }
  return new ApiError(response.status, `http_${response.status}`, said || `HTTP ${response.status}`);
}

let onAuthError = () => {};
export function whenSignedOut(handler) {
  onAuthError = handler;
}

// `probe`: a token being tried (signing in): its refusal is the caller's to report, not a sign-out.
export async function call(token, method, path, { query, body, signal, probe } = {}) {
  const init = {
    method,
    headers: headers(token, body !== undefined ? { 'Content-Type': 'application/json' } : {}),
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal,
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
    redirect: 'error',
  };
  let response;
  try {
    response = await fetch(url(path, query), init);
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, 'unavailable', `Dovecote did not answer (${error.message}).`);
  }
  if (!response.ok) {
    const error = await failure(response);
    if (error instanceof AuthError && !probe) onAuthError(error);
    throw error;
  }
  if (response.status === 204) return null;
  return response.json();
}

export function newId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `${prefix}-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export function describe(error) {
  if (!error) return '';
  if (error instanceof ApiError) {
    const details = error.details && Object.keys(error.details).length ? ` ${JSON.stringify(error.details)}` : '';
    return `${error.status ? `${error.status} ` : ''}${error.code}: ${error.message}${details}`;
  }
  return String(error.message || error);
}
