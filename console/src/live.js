// A task's timeline, live. `follow` reads `GET /v1/tasks/{id}/stream` (Server-Sent Events) with
// fetch(), since EventSource cannot send an Authorization header; where that route is absent (404
// without Dovecote's error envelope: an API that predates it) it polls
// `GET /v1/tasks/{id}/events?after=N` instead, once a second while the task is open. Either way the
// caller sees the same calls: onEvent(event) for each event, in sequence, onLease(lease) for a
// lease change (the stream only), onEnd() after the terminal event, onError(error).

import { call, failure, headers, seg, url } from './api.js';

export const TERMINAL = new Set(['completed', 'canceled', 'rejected', 'failed']);
const POLL_MS = 1000;
const PAGE = 100;

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

// The SSE wire format (WHATWG HTML § 9.2): lines of `field: value`, a blank line dispatches.
export function sseParser(dispatch) {
  let buffer = '';
  let event = { type: '', data: [], id: null };
  const line = (text) => {
    if (text === '') {
      if (event.data.length || event.type) dispatch({ type: event.type || 'message', data: event.data.join('\n'), id: event.id });
      event = { type: '', data: [], id: null };
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event.type = value;
    else if (field === 'data') event.data.push(value);
    else if (field === 'id' && !value.includes('\0')) event.id = value;
  };
  return {
    push(chunk) {
      buffer += chunk;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const text of lines) line(text);
    },
    end() {
      if (buffer) line(buffer);
      line('');
      buffer = '';
    },
  };
}

async function poll(token, taskId, state, handlers, signal) {
  while (!signal.aborted) {
    let page;
    try {
      page = await call(token, 'GET', `/v1/tasks/${seg(taskId)}/events`, { query: { after: state.after, limit: PAGE }, signal });
    } catch (error) {
      if (signal.aborted) return;
      handlers.onError(error);
      await sleep(POLL_MS * 3, signal);
      continue;
    }
    let ended = false;
    for (const event of page.items) {
      state.after = Math.max(state.after, event.sequence);
      handlers.onEvent(event);
      if (TERMINAL.has(event.state)) ended = true;
    }
    if (page.has_more) continue;
    if (ended) {
      handlers.onEnd();
      return;
    }
    await sleep(POLL_MS, signal);
  }
}

// One connection to the stream. Resolves 'absent' (no such route: poll), 'reconnect' (the server
// asked, or the connection ended early), or 'ended' (after the terminal event).
async function stream(token, taskId, state, handlers, signal) {
  const extra = { Accept: 'text/event-stream' };
  if (state.after > 0) extra['Last-Event-ID'] = String(state.after);
  const response = await fetch(url(`/v1/tasks/${seg(taskId)}/stream`), {
    headers: headers(token, extra),
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
    signal,
  });
  if (response.status === 404) {
    const error = await failure(response);
    if (!error.code || error.code.startsWith('http_')) return 'absent';
    throw error;
  }
  if (!response.ok) throw await failure(response);
  if (!(response.headers.get('content-type') || '').startsWith('text/event-stream')) return 'absent';
  handlers.onMode('stream'); // live from the first byte, not once the connection ends
  let outcome = 'reconnect';
  const parser = sseParser((message) => {
    if (message.type === 'reconnect') {
      outcome = 'reconnect';
      return;
    }
    let data;
    try {
      data = JSON.parse(message.data);
    } catch {
      return;
    }
    if (message.type === 'lease') {
      handlers.onLease(data);
      return;
    }
    if (typeof data.sequence === 'number') {
      if (data.sequence <= state.after) return;
      state.after = data.sequence;
    }
    handlers.onEvent(data);
    if (TERMINAL.has(data.state)) outcome = 'ended';
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.push(value);
  }
  parser.end();
  return outcome;
}

export function follow(token, taskId, after, handlers) {
  const controller = new AbortController();
  const signal = controller.signal;
  const state = { after, mode: 'stream' };
  const h = { onEvent() {}, onLease() {}, onEnd() {}, onError() {}, onMode() {}, ...handlers };
  (async () => {
    let failures = 0;
    while (!signal.aborted) {
      let outcome;
      try {
        outcome = await stream(token, taskId, state, h, signal);
        failures = 0;
      } catch (error) {
        if (signal.aborted) return;
        h.onError(error);
        failures += 1;
        await sleep(Math.min(10000, 500 * 2 ** failures), signal);
        continue;
      }
      if (outcome === 'absent') {
        state.mode = 'poll';
        h.onMode('poll');
        await poll(token, taskId, state, h, signal);
        return;
      }
      if (outcome === 'ended') {
        h.onEnd();
        return;
      }
      await sleep(250, signal);
    }
  })();
  return { stop: () => controller.abort(), state };
}
