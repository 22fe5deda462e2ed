"""Names of the ops that exist in the dialects a StableHLO program uses.

An op named here that has no import rule is reported as unsupported (all of them
at once); any other name is a parse error, as MLIR reports an unregistered op.
"""

from __future__ import annotations

_STABLEHLO = """
abs add after_all all_gather all_reduce all_to_all and atan2 batch_norm_grad batch_norm_inference
batch_norm_training bitcast_convert broadcast broadcast_in_dim case cbrt ceil cholesky clamp
collective_broadcast collective_permute compare complex composite concatenate constant convert
convolution cosine count_leading_zeros create_token cross-replica-sum custom_call divide dot
dot_general dynamic_broadcast_in_dim dynamic_conv dynamic_gather dynamic_iota dynamic_pad
dynamic_reshape dynamic_slice dynamic_update_slice einsum exponential exponential_minus_one fft
floor gather get_dimension_size get_tuple_element if imag infeed iota is_finite log log_plus_one
logistic map maximum minimum multiply negate not optimization_barrier or outfeed pad partition_id
popcnt power real real_dynamic_slice recv reduce reduce_precision reduce_scatter reduce_window
remainder replica_id reshape return reverse rng rng_bit_generator round_nearest_afz
round_nearest_even rsqrt scatter select select_and_scatter send set_dimension_size shift_left
shift_right_arithmetic shift_right_logical sign sine slice sort sqrt subtract tan tanh
torch_index_select transpose triangular_solve tuple unary_einsum uniform_dequantize
uniform_quantize while xor
"""

_CHLO = """
acos acosh asin asinh atan atanh bessel_i1e broadcast_add broadcast_and broadcast_atan2
broadcast_compare broadcast_complex broadcast_divide broadcast_maximum broadcast_minimum
broadcast_multiply broadcast_next_after broadcast_or broadcast_polygamma broadcast_power
broadcast_remainder broadcast_select broadcast_shift_left broadcast_shift_right_arithmetic
broadcast_shift_right_logical broadcast_subtract broadcast_xor broadcast_zeta conj constant
constant_like cosh digamma erf erf_inv erfc is_inf is_neg_inf is_pos_inf lgamma next_after
polygamma ragged_dot sinh square tan top_k zeta mulhi scan minimum_broadcast_shapes _asin_acos_kernel
"""

KNOWN_OPS = frozenset(
    [f"stablehlo.{n}" for n in _STABLEHLO.split()]
    + [f"chlo.{n}" for n in _CHLO.split()]
    + ["func.func", "func.call", "func.return", "func.call_indirect", "func.constant", "builtin.module",
       "builtin.unrealized_conversion_cast", "sdy.mesh", "sdy.sharding_constraint"]
)
