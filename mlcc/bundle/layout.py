"""Bytes in a bundle: the alignment of every buffer and weight, and logical arrays to and from the bytes
of a layout (minor-to-major order), as weights.bin, the arena and the kernels' arguments hold them."""

from __future__ import annotations

from typing import Sequence

import numpy as np

ALIGNMENT = 256  # bytes: weights.bin offsets, arena offsets, device staging slots


def align(n: int, alignment: int = ALIGNMENT) -> int:
    """n rounded up to a multiple of alignment."""
    return -(-n // alignment) * alignment


def major_to_minor(layout: Sequence[int]) -> tuple[int, ...]:
    return tuple(reversed(tuple(layout)))


def to_physical(arr: np.ndarray, layout: Sequence[int]) -> np.ndarray:
    """A contiguous array whose memory order is the layout's (returned with physical dims)."""
    if arr.ndim == 0:
        return np.ascontiguousarray(arr)
    return np.ascontiguousarray(np.transpose(arr, major_to_minor(layout)))


def from_physical(flat: np.ndarray, dims: Sequence[int], layout: Sequence[int]) -> np.ndarray:
    """The logical array of shape dims stored in flat under layout."""
    order = major_to_minor(layout)
    if not dims:
        return flat.reshape(())
    phys = flat.reshape([dims[d] for d in order])
    return np.transpose(phys, np.argsort(order))
