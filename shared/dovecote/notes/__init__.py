"""Notes: how agents pass work to each other (docs/design/notes.md)."""
