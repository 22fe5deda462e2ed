"""f64 power through the generated kernels, to 1 ulp of numpy's (glibc's) pow over a grid of bases and
exponents. exp2(y * log2|x|) in double lost up to ~16 ulp (the rounding of log2|x|, scaled by y);
mlcc now carries y*ln|x| as a double-double."""

from __future__ import annotations

import numpy as np
from shlo_programs import module_text, run_kernels, tensor


def ulps_f64(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    def ordinal(a):
        b = a.view(np.int64)
        return np.where(b < 0, -(b & 0x7FFFFFFFFFFFFFFF), b).astype(object)
    return np.abs(ordinal(got) - ordinal(want))


def grid() -> tuple[np.ndarray, np.ndarray]:
    bases = np.concatenate([np.geomspace(1e-300, 1e300, 23), [0.5, 0.7071, 0.99999, 1.0000001, 1.4142, 1.5, 2.0,
                                                              3.0, 10.0, 123.456, 1e-310, 7.1e-320]])
    bases = np.concatenate([bases, -bases[[8, 13, 20, 25, 30, 31]]])
    exps = np.array([-3.0, -2.5, -1.0, -0.5, 0.3333333333333333, 0.5, 1.5, 2.0, 3.0, 7.0, 17.25, 64.0, 100.5,
                     -137.75, 400.1, 1023.0, 1023.9999, 1024.0, -1000.0, -1074.5, 1e-3, 2.2e-16])
    x, y = np.meshgrid(bases, exps)
    return x.ravel(), y.ravel()


def test_power_f64_is_within_one_ulp_of_numpy(tmp_path):
    x, y = grid()
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    t = tensor(x.shape, x.dtype)
    text = module_text([x, y], [(x.shape, x.dtype)],
                       f"    %0 = stablehlo.power %arg0, %arg1 : {t}\n    return %0 : {t}")
    (got,) = run_kernels(text, [x, y], tmp_path)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want) & np.isfinite(got)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    d = ulps_f64(got[fin], want[fin])
    worst = int(np.argmax(d))
    assert d.max() <= 1, (f"{int((d > 1).sum())} of {d.size} results over 1 ulp, up to {d.max()}: "
                          f"{x[fin][worst]!r} ** {y[fin][worst]!r} = {got[fin][worst]!r}, numpy {want[fin][worst]!r}")
    assert np.count_nonzero(fin) > 0.6 * x.size  # most of the grid is finite and compared to the ulp
