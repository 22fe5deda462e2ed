"""mlcc/bundle/memory.py and layout.py: alignment, footprints and memory budgets, layout conversion."""

from __future__ import annotations

import numpy as np
import pytest

from mlcc.bundle.layout import ALIGNMENT, align, from_physical, to_physical
from mlcc.bundle.memory import BudgetSpecError, fixed_bytes, footprint, parse_budget


def _manifest() -> dict:
    spec = {"dtype": "f16", "numpy_dtype": "float16", "layout": [1, 0]}
    return {"symbols": {"n": [1, 100]},
            "inputs": [{"name": "x", "buffer": "p0", "shape": ["n", 8], **spec}],
            "outputs": [{"name": "y", "buffer": "r", "shape": [2, "n"], **spec}],
            "memory_plan": {"arena_bytes": 1024},
            "weights": {"tensors": [{"name": "w", "bytes": 10}, {"name": "v", "bytes": 256}]}}


def test_align_rounds_up_to_the_bundle_alignment():
    assert ALIGNMENT == 256
    assert [align(n) for n in (0, 1, 256, 257)] == [0, 256, 256, 512]
    assert align(5, 4) == 8


def test_footprint_counts_io_at_the_largest_sizes_and_aligned_weights():
    m = _manifest()
    # x: 100*8 halves = 1600 -> 1792; y: 2*100 halves = 400 -> 512; arena 1024
    assert fixed_bytes(m) == 1024 + 1792 + 512
    assert footprint(m) == fixed_bytes(m) + 256 + 256


def test_fixed_bytes_leaves_out_the_buffers_a_session_keeps_as_items():
    assert fixed_bytes(_manifest(), exclude={"p0"}) == 1024 + 512  # x's buffer is a KV cache kept on its own


@pytest.mark.parametrize("spec, want", [(5000, 5000), ("5000", 5000), (" 1e3 ", 1000), ("50%", 500), ("12.5%", 125),
                                        ("8GiB", 8 * 2**30), ("1.5KiB", 1536), ("512MB", 512 * 10**6)])
def test_budgets_are_bytes_or_a_percentage(spec, want):
    assert parse_budget(spec, 1000) == want


@pytest.mark.parametrize("spec", ["lots", "50 %%", "%", "GiB", "8 parsecs"])
def test_a_bad_budget_is_named(spec):
    with pytest.raises(BudgetSpecError, match="bad memory budget"):
        parse_budget(spec, 1000)


def test_layout_round_trip_and_byte_order():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    phys = to_physical(x, [1, 2, 0])  # dim 1 minor, then 2, then 0 major
    assert phys.shape == (2, 4, 3) and phys.flags.c_contiguous
    assert phys.reshape(-1)[:3].tolist() == [0.0, 4.0, 8.0]
    np.testing.assert_array_equal(from_physical(phys.reshape(-1), (2, 3, 4), [1, 2, 0]), x)
    assert from_physical(np.array([7.0]), (), ()).shape == ()
