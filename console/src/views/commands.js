// Commands with ids that make a retry a replay: an action keeps its command id until it succeeds,
// so pressing the button again after a lost answer (a dropped connection, 503 commit_unknown) sends
// the same command and gets the original answer, never a second command.
import { useRef, useState } from 'preact/hooks';
import { call, newId } from '../api.js';

export function useCommandIds() {
  const ids = useRef({});
  return {
    id(action) {
      if (!ids.current[action]) ids.current[action] = newId('console');
      return ids.current[action];
    },
    done(action) {
      delete ids.current[action];
    },
  };
}

// A view's commands: each POSTed under its action's id (above), with the last one's error and the
// action in flight (`busy`). `send` answers true once the command committed.
export function useCommand(token) {
  const ids = useCommandIds();
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState('');
  const send = async (action, path, body) => {
    setBusy(action);
    setError(null);
    try {
      await call(token, 'POST', path, { body: { command_id: ids.id(action), ...body } });
      ids.done(action);
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy('');
    }
  };
  return { ids, error, setError, busy, send };
}

export function textMessage(ids, action, text) {
  return { id: `${ids.id(action)}-m`, parts: [{ media_type: 'text/plain', text }] };
}

const TEXTUAL = /^(text\/|application\/(json|xml|x-diff|x-patch|javascript|x-yaml|yaml|toml)\b|[^;]*\+(json|xml)\b)/i;

export function isTextual(mediaType) {
  return TEXTUAL.test(String(mediaType || ''));
}

function base64(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

// A payload from a file: `text` when its type is textual and its bytes are UTF-8, else `data_b64`.
export async function filePayload(file, mediaType) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const type = mediaType || file.type || 'application/octet-stream';
  if (isTextual(type) || /\.(diff|patch|txt|md)$/i.test(file.name)) {
    try {
      const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
      return { media_type: isTextual(type) ? type : 'text/plain', text };
    } catch {
      /* not UTF-8: bytes */
    }
  }
  return { media_type: type, data_b64: base64(bytes) };
}
