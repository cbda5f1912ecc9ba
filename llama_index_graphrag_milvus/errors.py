"""The package's error."""


class GraphStoreError(RuntimeError):
    """A store cannot be opened or written as asked; the message says how to fix it."""
