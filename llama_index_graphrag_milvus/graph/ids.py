"""The id registry of the adjacency: bijections between Milvus ids and dense positions, held in numpy
arrays rather than dicts.

`IntIds` maps int64 ids (entities, relations) and `StrIds` string ids (passages) to positions 0, 1, 2, …
in the order they were added; `Growable` is a growable integer array and `Names` strings by position.
Positions are private to one process; ids are what Milvus stores.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy as np


class IntIds:
    """A growable bijection between int64 ids and dense positions: ids in a growable array, found
    through a sorted copy (binary search) plus a dict of the ids added since that copy was made, and
    a growable bool array of which positions are live. A removed id keeps its position, dead, and gets
    a new one if it comes back."""

    def __init__(self) -> None:
        self._ids = np.zeros(1024, dtype=np.int64)
        self._n = 0
        self._live = np.zeros(1024, dtype=bool)  # position -> live; capacity may exceed self._n
        self._live_count = 0
        self._sorted = np.zeros(0, dtype=np.int64)  # the live ids sorted, as of the last reindex
        self._at = np.zeros(0, dtype=np.int32)  # the position of each id of self._sorted
        self._recent: Dict[int, int] = {}

    def __len__(self) -> int:
        """The number of positions handed out, dead ones included (`live_count()`: live ones)."""
        return self._n

    def position(self, key: Any) -> int:
        """The position of a live id; KeyError if it is not held."""
        pos = self._find(self._key(key))
        if pos < 0:
            raise KeyError(key)
        return pos

    def _find(self, key: Any) -> int:
        pos = self._recent.get(key)
        if pos is not None:
            return pos
        i = int(np.searchsorted(self._sorted, key))
        if i < len(self._sorted) and self._sorted[i] == key:
            pos = int(self._at[i])
            if self._live[pos]:
                return pos
        return -1

    # how keys are held: int64 here, bytes in `StrIds`
    def _key(self, key: Any) -> Any:
        return int(key)

    def keys(self, values: Any) -> np.ndarray:
        """`values` (ids) as the array of keys this registry holds: int64 here, UTF-8 bytes in `StrIds`."""
        return np.asarray(values, dtype=np.int64)

    def _out(self, value: Any) -> Any:
        return int(value)

    def add(self, key: Any) -> int:
        pos = self._find(self._key(key))
        if pos >= 0:
            return pos
        return int(self.add_new(self.keys([key]))[0])

    def add_new(self, keys: Any) -> np.ndarray:
        """Append ids known to be absent and distinct; return their positions."""
        keys = self.keys(keys)
        start, end = self._n, self._n + len(keys)
        if end > len(self._ids) or keys.dtype.itemsize > self._ids.dtype.itemsize:
            grown = np.zeros(max(end, 2 * len(self._ids)), dtype=np.promote_types(self._ids.dtype, keys.dtype))
            grown[: self._n] = self._ids[: self._n]
            self._ids = grown
        if end > len(self._live):
            live = np.zeros(max(end, 2 * len(self._live)), dtype=bool)
            live[: self._n] = self._live[: self._n]
            self._live = live
        self._ids[start:end] = keys
        self._live[start:end] = True
        self._live_count += len(keys)
        self._n = end
        if len(keys) > 4096 or len(self._recent) + len(keys) > max(4096, self._n // 8):
            self._reindex()
        else:
            self._recent.update(zip(keys.tolist(), range(start, end)))
        return np.arange(start, end, dtype=np.int64)

    def ids_at(self, positions: np.ndarray) -> list:
        """The ids at many positions at once."""
        return [self._out(v) for v in self._ids[np.asarray(positions, dtype=np.int64)].tolist()]

    def ids_array(self) -> np.ndarray:
        """The keys of every position handed out, dead ones included, as one array indexed by position
        (int64, or UTF-8 bytes in `StrIds`). A view: callers must not write to it."""
        view = self._ids[: self._n]
        view.flags.writeable = False
        return view

    def lookup(self, keys: Any) -> np.ndarray:
        """Positions of many ids at once; -1 where an id is not stored."""
        keys = self.keys(keys)
        out = np.full(len(keys), -1, dtype=np.int64)
        if len(self._sorted):
            i = np.minimum(np.searchsorted(self._sorted, keys), len(self._sorted) - 1)
            hit = self._sorted[i] == keys
            pos = self._at[i[hit]].astype(np.int64)
            alive = self._live[pos]
            out[np.flatnonzero(hit)[alive]] = pos[alive]
        if self._recent:
            for j in np.flatnonzero(out < 0).tolist():
                out[j] = self._recent.get(self._key(keys[j]), -1)
        return out

    def _reindex(self) -> None:
        live = np.flatnonzero(self._live[: self._n])
        order = np.argsort(self._ids[live], kind="stable")
        self._sorted = self._ids[live][order]
        self._at = live[order].astype(np.int32)
        self._recent = {}

    def shrink(self) -> None:
        """Release the spare capacity (after a bulk load)."""
        self._ids = self._ids[: max(self._n, 1)].copy()
        self._live = self._live[: max(self._n, 1)].copy()

    def remove(self, key: Any) -> None:
        key = self._key(key)
        pos = self._find(key)
        if pos >= 0:
            self._live[pos] = False
            self._live_count -= 1
            self._recent.pop(key, None)

    def mask(self) -> np.ndarray:
        """Which positions are live, as a bool array of `len(self)`. A read-only view of the registry's
        own array, not a copy: callers must not write to it (numpy refuses), it shows later removals,
        and positions added later are not in it."""
        view = self._live[: self._n]
        view.flags.writeable = False
        return view

    def live_count(self) -> int:
        """The number of live ids."""
        return self._live_count


class StrIds(IntIds):
    """`IntIds` for string ids (passage ids), held as fixed-width UTF-8 bytes in numpy arrays (the width
    grows with the longest id), not as a dict and a list of str. Ids must not end with NUL characters."""

    def __init__(self) -> None:
        super().__init__()
        self._ids = np.zeros(1024, dtype="S1")
        self._sorted = np.zeros(0, dtype="S1")

    def _key(self, key: Any) -> Any:
        return key.encode("utf-8") if isinstance(key, str) else bytes(key)

    def keys(self, values: Any) -> np.ndarray:
        if isinstance(values, np.ndarray) and values.dtype.kind == "S":
            return values
        return np.array([self._key(k) for k in values], dtype=bytes) if len(values) else np.zeros(0, dtype="S1")

    def _out(self, value: Any) -> Any:
        return bytes(value).decode("utf-8")


class Growable:
    """A growable integer array (int32 unless told)."""

    def __init__(self, dtype: type = np.int32) -> None:
        self._data = np.zeros(1024, dtype=dtype)
        self._n = 0

    def shrink(self) -> None:
        self._data = self._data[: max(self._n, 1)].copy()

    def extend(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=self._data.dtype)
        end = self._n + len(values)
        if end > len(self._data):
            grown = np.zeros(max(end, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown
        self._data[self._n : end] = values
        self._n = end

    def __getitem__(self, pos: int) -> int:
        return int(self._data[pos])

    def __len__(self) -> int:
        return self._n

    def array(self) -> np.ndarray:
        """The values, as a view of the backing array (writes go through)."""
        return self._data[: self._n]


class Names:
    """Strings by position: UTF-8 in one buffer, with an offset and a length per position, rather than
    a dict of str."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._start = Growable(np.int64)
        self._length = Growable()

    def set(self, positions: np.ndarray, names: Sequence[str]) -> None:
        """Name the positions that have no name yet (the first name written wins)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return
        needed = int(positions.max()) + 1
        if needed > len(self._length):
            self._start.extend(np.zeros(needed - len(self._start), dtype=np.int64))
            self._length.extend(np.full(needed - len(self._length), -1, dtype=np.int32))
        starts, lengths = self._start.array(), self._length.array()
        for pos, name in zip(positions.tolist(), names):
            if lengths[pos] < 0:
                encoded = name.encode("utf-8")
                starts[pos], lengths[pos] = len(self._buffer), len(encoded)
                self._buffer += encoded

    def get(self, pos: int) -> str:
        if pos >= len(self._length) or self._length[pos] < 0:
            return ""
        start = self._start[pos]
        return self._buffer[start : start + self._length[pos]].decode("utf-8")

    def shrink(self) -> None:
        self._start.shrink()
        self._length.shrink()
