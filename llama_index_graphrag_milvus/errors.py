"""The package's error, and the error for keywords a constructor does not know."""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping


class GraphStoreError(RuntimeError):
    """A store cannot be opened or written as asked; the message says how to fix it."""


def unexpected_keywords(owner: str, given: Iterable[str], known: Iterable[str], elsewhere: Mapping[str, str] = {}) -> TypeError:
    """The `TypeError` for keywords `owner` does not take, naming for each the close match among `known`
    (its own) or `elsewhere` (keyword -> where it goes instead, e.g. "MilvusGraphStore(batch_size=...)")."""
    known = list(known)
    said = []
    for key in given:
        names = [*known, *elsewhere]
        match = [n for n in names if len(key) > 2 and key in n] or difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        if key in elsewhere:
            said.append(f"{key!r} goes to {elsewhere[key]}")
        elif match and match[0] in elsewhere:
            said.append(f"{key!r}: did you mean {match[0]!r}, of {elsewhere[match[0]]}")
        elif match:
            said.append(f"{key!r}: did you mean {match[0]!r}")
        else:
            said.append(f"{key!r}")
    return TypeError(f"{owner} got unexpected keyword argument(s): {'; '.join(said)}. It takes: {', '.join(known)}.")
