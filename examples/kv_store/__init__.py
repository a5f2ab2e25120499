"""A key-value store with expiring entries: the tutorial in docs/actors.md."""
