"""Admin: bearer tokens. A token is shown once; only its SHA-256 is stored."""
