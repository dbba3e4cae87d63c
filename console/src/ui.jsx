// Shared pieces. Everything an agent wrote is rendered as text (JSX children and attributes, never
// dangerouslySetInnerHTML), and a link is made only for an http(s) URL, marked as external.
import { useEffect, useState } from 'preact/hooks';
import { describe } from './api.js';

export function safeHref(value) {
  if (typeof value !== 'string') return null;
  try {
    const parsed = new URL(value);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : null;
  } catch {
    return null;
  }
}

export function External({ href, children }) {
  const safe = safeHref(href);
  if (!safe) return <code class="inert-url">{String(href)}</code>;
  return (
    <a class="external" href={safe} target="_blank" rel="noopener noreferrer nofollow external">
      {children || safe}
      <span class="external-mark" aria-hidden="true"> ↗</span>
      <span class="visually-hidden"> (external link, opens a new tab)</span>
    </a>
  );
}

export function ErrorNote({ error }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {describe(error)}
    </p>
  );
}

export function Busy({ when, children }) {
  return when ? <p class="busy" role="status">{children || 'Loading…'}</p> : null;
}

// "3 s ago" / "in 25 s", with the instant itself as the title; re-rendered every second.
export function useNow(ms = 1000) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}

export function span(seconds) {
  const s = Math.abs(Math.round(seconds));
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function When({ iso, now }) {
  if (!iso) return <span class="muted">—</span>;
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return <span>{String(iso)}</span>;
  const delta = (at - (now || Date.now())) / 1000;
  return (
    <time datetime={iso} title={iso}>
      {delta > 0 ? `in ${span(delta)}` : `${span(delta)} ago`}
    </time>
  );
}

export function Field({ label, id, hint, children }) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children}
      {hint ? <small id={`${id}-hint`}>{hint}</small> : null}
    </div>
  );
}

const DIFF_TYPES = new Set(['text/x-diff', 'text/x-patch', 'application/x-diff', 'application/x-patch']);

export function looksLikeDiff(mediaType, text, filename) {
  const type = String(mediaType || '').split(';')[0].trim().toLowerCase();
  if (DIFF_TYPES.has(type)) return true;
  if (/\.(diff|patch)$/i.test(filename || '')) return true;
  return /^(diff --git |--- \S.*\n\+\+\+ \S)/m.test(text || '') && /^@@ /m.test(text || '');
}

export function Diff({ text }) {
  const lines = String(text).split('\n');
  return (
    <pre class="diff" aria-label="diff">
      {lines.map((line, i) => {
        let kind = 'ctx';
        if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff ')) kind = 'file';
        else if (line.startsWith('@@')) kind = 'hunk';
        else if (line.startsWith('+')) kind = 'add';
        else if (line.startsWith('-')) kind = 'del';
        return (
          <span key={i} class={`line ${kind}`}>
            {line}
            {'\n'}
          </span>
        );
      })}
    </pre>
  );
}

export function TextBody({ text, mediaType, filename }) {
  if (looksLikeDiff(mediaType, text, filename)) return <Diff text={text} />;
  return <pre class="text">{text}</pre>;
}

function saveBytes(b64, filename) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  // Always as octet-stream: a payload is never opened as a page of this origin.
  const href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = href;
  a.download = (filename || 'payload.bin').replace(/[\\/]/g, '_');
  a.click();
  setTimeout(() => URL.revokeObjectURL(href), 1000);
}

export function Part({ part }) {
  const name = part.filename ? <span class="filename">{part.filename}</span> : null;
  if (typeof part.text === 'string') {
    return (
      <div class="part">
        <div class="part-meta">
          {name} <span class="media">{part.media_type}</span>
        </div>
        <TextBody text={part.text} mediaType={part.media_type} filename={part.filename} />
      </div>
    );
  }
  if (part.url) {
    return (
      <div class="part">
        <div class="part-meta">
          {name} <span class="media">{part.media_type}</span> link
        </div>
        <External href={part.url} />
      </div>
    );
  }
  if (part.download_url) {
    return (
      <div class="part">
        <div class="part-meta">
          {name} <span class="media">{part.media_type}</span> stored apart ({part.size} bytes)
        </div>
        <External href={part.download_url}>download</External>
      </div>
    );
  }
  if (part.data_b64) {
    return (
      <div class="part">
        <div class="part-meta">
          {name} <span class="media">{part.media_type}</span> {Math.floor((part.data_b64.length * 3) / 4)} bytes
        </div>
        <button type="button" onClick={() => saveBytes(part.data_b64, part.filename)}>
          Save the bytes
        </button>
      </div>
    );
  }
  return <div class="part muted">(an empty part)</div>;
}

export function Conversation({ messages }) {
  if (!messages.length) return <p class="muted">No messages yet.</p>;
  return (
    <ol class="conversation">
      {messages.map((m) => (
        <li key={m.id} class={`message by-${m.author === 'caller' ? 'caller' : 'worker'}`}>
          <div class="message-head">
            <strong>{m.author}</strong> <span class="muted">#{m.sequence}</span> <When iso={m.created_at} />
          </div>
          {m.parts.map((part, i) => (
            <Part key={i} part={part} />
          ))}
        </li>
      ))}
    </ol>
  );
}

// A table's column headings; an empty name is a column whose heading only a screen reader needs
// (`hidden`, e.g. a row's actions).
export function Columns({ names, hidden = 'Actions' }) {
  return (
    <thead>
      <tr>
        {names.map((name) => (
          <th scope="col" key={name || hidden}>
            {name || <span class="visually-hidden">{hidden}</span>}
          </th>
        ))}
      </tr>
    </thead>
  );
}

// Runs `load(live)` whenever `deps` change, `live()` false once the view has moved on (a newer load
// or an unmounted view must not set state); a failure goes to `onError`, unless the view moved on.
export function useLoad(load, deps, onError) {
  useEffect(() => {
    let live = true;
    load(() => live).catch((e) => live && onError(e));
    return () => {
      live = false;
    };
  }, deps);
}

export function Facts({ rows }) {
  return (
    <dl class="facts">
      {rows
        .filter((r) => r)
        .map(([term, value]) => [<dt key={`${term}-t`}>{term}</dt>, <dd key={`${term}-d`}>{value}</dd>])}
    </dl>
  );
}

export function Missing({ need }) {
  return (
    <p class="notice" role="note">
      This view needs a {need} token. <a href="#/signin">Add one</a> (tokens are kept for this tab only).
    </p>
  );
}
