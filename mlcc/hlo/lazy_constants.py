"""Constants the compiler makes out of weights without copying them: a concatenation of weights
(merged sibling dots' [Wq|Wk|Wv]) kept as its parts until the bundle writer streams it into weights.bin.

A weight of a 7B model is tens of megabytes and there are hundreds of them, memory-mapped from the
model's file: a pass that concatenated them with numpy would hold a copy of most of the model. A
``ConcatenatedWeights`` stands in ``Module.constants`` where an array would; anything that needs the
values as one array (the evaluator, a check) gets them from ``np.asarray`` (``__array__``), and the
writer reads it a block at a time (``block``), touching each part's pages only once.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def block(arr, axis: int, start: int, stop: int) -> np.ndarray:
    """Elements start..stop-1 of ``arr`` along ``axis``, all of every other dim: a view of an ndarray,
    the pieces of the parts gathered for a ConcatenatedWeights."""
    if isinstance(arr, ConcatenatedWeights):
        return arr.block(axis, start, stop)
    index = [slice(None)] * np.ndim(arr)
    index[axis] = slice(start, stop)
    return np.asarray(arr)[tuple(index)]


class ConcatenatedWeights:
    """``np.concatenate(parts, axis)``, computed only block by block or on demand."""

    def __init__(self, parts: Sequence[np.ndarray], axis: int) -> None:
        parts = [p if isinstance(p, ConcatenatedWeights) else np.asarray(p) for p in parts]
        first = parts[0]
        if any(p.ndim != first.ndim or p.dtype != first.dtype for p in parts):
            raise ValueError("concatenated weights need one rank and one dtype")
        others = [tuple(d for k, d in enumerate(p.shape) if k != axis) for p in parts]
        if len(set(others)) != 1:
            raise ValueError(f"cannot concatenate shapes {[p.shape for p in parts]} along axis {axis}")
        self.parts = list(parts)
        self.axis = axis
        self.dtype = np.dtype(first.dtype)
        shape = list(first.shape)
        shape[axis] = sum(int(p.shape[axis]) for p in parts)
        self.shape = tuple(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = np.concatenate([np.asarray(p) for p in self.parts], axis=self.axis)
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def reshape(self, *dims) -> "ConcatenatedWeights | np.ndarray":
        """Itself when ``dims`` are its shape (the writer's reshape to the IR dims); otherwise an array."""
        want = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else tuple(dims)
        if want == self.shape:
            return self
        return np.asarray(self).reshape(want)

    def block(self, axis: int, start: int, stop: int) -> np.ndarray:
        """Elements start..stop-1 along ``axis`` (any axis), as a new array."""
        if axis != self.axis:
            return np.concatenate([block(p, axis, start, stop) for p in self.parts], axis=self.axis)
        pieces, offset = [], 0
        for p in self.parts:
            n = int(p.shape[self.axis])
            lo, hi = max(start, offset), min(stop, offset + n)
            if lo < hi:
                pieces.append(block(p, axis, lo - offset, hi - offset))
            offset += n
        if len(pieces) == 1:
            return np.array(pieces[0])
        if not pieces:
            empty = list(self.shape)
            empty[axis] = 0
            return np.empty(empty, self.dtype)
        return np.concatenate(pieces, axis=axis)

    def mapped_parts(self) -> list[np.ndarray]:
        """The ndarrays it is made of (through nested concatenations)."""
        out: list[np.ndarray] = []
        for p in self.parts:
            out.extend(p.mapped_parts() if isinstance(p, ConcatenatedWeights) else [p])
        return out
