"""Cross-cutting pieces every service uses: settings, principal, errors, cursors, AWS clients,
observability. Nothing here knows about notes, tasks, recall or memory."""
