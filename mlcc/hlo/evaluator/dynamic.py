"""Evaluation rules of the data-dependent ops (flag ``binds_count``): nonzero, unique, nms, sort-indices.

Each result is 1-D s64: element 0 is the run-time count (the value of the symbol named by ``symbol``, bound
here as the runtime binds it), the data follows, laid out for the bound (shape_inference._counted). What the
data means follows the ONNX operators (NonZero, Unique, NonMaxSuppression, TopK); entries past the count are 0.
A count above the bound keeps the true count at element 0 and only the entries that fit.
"""

from __future__ import annotations

import numpy as np

from mlcc.hlo.ir import Instruction
from mlcc.hlo.evaluator.core import _context, rule


def _counted(inst: Instruction, count: int, *parts: np.ndarray) -> np.ndarray:
    _context().symbols[inst.attrs["symbol"]] = int(count)
    return np.concatenate([np.array([count], np.int64), *[np.asarray(p, np.int64).reshape(-1) for p in parts]])


def _fit(values: np.ndarray, bound: int) -> np.ndarray:
    out = np.zeros(bound, np.int64)
    n = min(bound, len(values))
    out[:n] = values[:n]
    return out


@rule("nonzero")
def _nonzero(inst: Instruction, ops: list) -> np.ndarray:
    x, bound = ops[0], inst.attrs["bound"]
    coords = np.nonzero(x) if x.ndim else np.nonzero(x.reshape(1))[:0]
    count = int(np.count_nonzero(x))
    return _counted(inst, count, *[_fit(c, bound) for c in coords])


def unique_rows(x: np.ndarray, is_sorted: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ONNX Unique over the rows of a 2-D array: (first index, count) of each distinct row in output order
    (ascending rows when sorted, else order of first occurrence), and each row's position in that order."""
    rows = [tuple(r) for r in x.tolist()]
    first: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        first.setdefault(r, i)
        counts[r] = counts.get(r, 0) + 1
    order = sorted(first) if is_sorted else list(first)
    position = {r: j for j, r in enumerate(order)}
    return (np.array([first[r] for r in order], np.int64), np.array([counts[r] for r in order], np.int64),
            np.array([position[r] for r in rows], np.int64))


@rule("unique")
def _unique(inst: Instruction, ops: list) -> np.ndarray:
    bound = inst.attrs["bound"]
    x = ops[0].astype(np.float64) if ops[0].dtype.kind == "f" else ops[0]
    first, counts, inverse = unique_rows(x, bool(inst.attrs["sorted"]))
    return _counted(inst, len(first), _fit(first, bound), _fit(counts, bound), inverse, first[inverse])


def _suppresses(a: np.ndarray, b: np.ndarray, center: bool, threshold: float) -> bool:
    """ONNX NonMaxSuppression's test: IoU of boxes a and b above threshold (onnx.reference's arithmetic)."""
    if center:
        ax0, ax1, bx0, bx1 = a[0] - a[2] / 2, a[0] + a[2] / 2, b[0] - b[2] / 2, b[0] + b[2] / 2
        ay0, ay1, by0, by1 = a[1] - a[3] / 2, a[1] + a[3] / 2, b[1] - b[3] / 2, b[1] + b[3] / 2
    else:
        ay0, ay1 = min(a[0], a[2]), max(a[0], a[2])
        ax0, ax1 = min(a[1], a[3]), max(a[1], a[3])
        by0, by1 = min(b[0], b[2]), max(b[0], b[2])
        bx0, bx1 = min(b[1], b[3]), max(b[1], b[3])
    ix0, ix1, iy0, iy1 = max(ax0, bx0), min(ax1, bx1), max(ay0, by0), min(ay1, by1)
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def non_max_suppression(boxes: np.ndarray, scores: np.ndarray, max_per_class: int, iou: float, score: float,
                        center: bool) -> np.ndarray:
    """ONNX NonMaxSuppression: the selected [batch, class, box] rows, per batch and class, by score (ties: lower
    box index first), each box kept unless a kept box of its class overlaps it by IoU > iou; scores > score."""
    boxes, scores = boxes.astype(np.float32), scores.astype(np.float32)
    out = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = sorted((i for i in range(len(s)) if s[i] > score), key=lambda i: (-s[i], i))
            kept: list[int] = []
            for i in order:
                if len(kept) >= max_per_class:
                    break
                if not any(_suppresses(boxes[b, k], boxes[b, i], center, iou) for k in kept):
                    kept.append(i)
            out += [(b, c, i) for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


@rule("nms")
def _nms(inst: Instruction, ops: list) -> np.ndarray:
    boxes, scores, max_out, iou, score = ops
    rows = non_max_suppression(boxes, scores, max(int(max_out), 0), float(iou), float(score),
                               bool(inst.attrs["center_point_box"]))
    return _counted(inst, len(rows), _fit(rows.reshape(-1), 3 * inst.attrs["bound"]))


def sort_indices(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Indices that sort x along axis, stable (equal values keep index order), descending when largest: TopK's."""
    key = x.astype(np.float64) if x.dtype.kind in "fc" else x
    if largest:  # stable descending: sort the reversed axis ascending by negated rank
        n = x.shape[axis]
        rev = np.flip(key, axis)
        idx = np.argsort(rev, axis=axis, kind="stable")
        idx = np.flip(n - 1 - idx, axis)  # ties: among equals, reversed order flipped back -> ascending index
        return idx
    return np.argsort(key, axis=axis, kind="stable")


@rule("sort-indices")
def _sort_indices(inst: Instruction, ops: list) -> np.ndarray:
    x, k = ops
    return _counted(inst, int(np.asarray(k).reshape(-1)[0]),
                    sort_indices(x, inst.attrs["dimension"], bool(inst.attrs["largest"])))
