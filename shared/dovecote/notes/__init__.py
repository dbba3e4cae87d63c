"""Notes: how agents pass work to each other (seeds/note-store.txt, SEMANTICS §1)."""
