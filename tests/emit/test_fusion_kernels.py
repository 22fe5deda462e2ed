"""Kernels of output, input and attention fusions: the heavy op's template with the fusion's loop ops
computed as its prologue or epilogue (mlcc/emit/codegen/fused.py), run under Triton's interpreter and compared
with the reference evaluator's value of the fusion, i.e. of the unfused computation it replaced."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mlcc.emit.codegen.attention  # noqa: F401  (registers fusion:attention)
import mlcc.emit.codegen.contraction  # noqa: F401  (registers fusion:output)
import mlcc.emit.codegen.reduction  # noqa: F401  (registers fusion:input)
from mlcc.emit.check_numerics import check_numerics
from mlcc.emit.codegen.body import Assign, ElementOp
from mlcc.emit.codegen.kernel import Kernel, LaunchConfig, cdiv, lower
from mlcc.errors import InternalError, UnsupportedError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.evaluator import evaluate_instruction
from mlcc.hlo.ir import Instruction
from mlcc.hlo.parser import parse_module
from mlcc.hlo.verifier import verify_module
from tests.emit.harness import run_kernel

# The interpreter runs numpy on masked-off lanes too (exp of garbage, 0 / 0 in a fully masked row).
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

TOLERANCE = {"f64": (1e-9, 1e-12), "f32": (2e-5, 2e-5), "f16": (2e-3, 2e-3), "bf16": (1.6e-2, 1.6e-2)}


def fusion(text: str) -> Instruction:
    """The ENTRY root of IR text (a fusion calling a computation defined before it), verified."""
    module = parse_module(text)
    verify_module(module)
    return module.entry.root


def random_inputs(inst: Instruction, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for op in inst.operands:
        dtype, dims = op.shape.dtype, tuple(int(d) for d in op.shape.dims)
        if dtype == "pred":
            out.append(rng.random(dims) < 0.5)
        elif dtype.startswith(("s", "u")):
            out.append(rng.integers(0 if dtype.startswith("u") else -4, 5, dims).astype(numpy_dtype(dtype)))
        else:
            out.append(rng.standard_normal(dims).astype(numpy_dtype(dtype)))
    return out


def check(inst: Instruction, inputs: list[np.ndarray] | None = None, config: LaunchConfig | None = None,
          template: str | None = None, precision: str | None = None) -> Kernel:
    """The fusion's kernel gives the evaluator's value of the fusion (with the interpreter config or config),
    within the tolerance of the result's dtype (or of `precision`, the dtype it was computed in)."""
    inputs = random_inputs(inst) if inputs is None else inputs
    kernel = lower(inst, "fused_kernel_under_test")
    if template is not None:
        assert kernel.template == template
    (got,) = run_kernel(kernel, inst, inputs, config)
    want = np.asarray(evaluate_instruction(inst, inputs, {}))
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    precision = precision or inst.shape.dtype
    if precision in TOLERANCE:
        rtol, atol = TOLERANCE[precision]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
    return kernel


def tiles(kernel: Kernel, rows: int, **constexprs: int) -> LaunchConfig:
    """The interpreter config with some tile sizes changed; the grid recomputed over `rows` (axis 0)."""
    sizes = {**kernel.interpreter.constexprs, **constexprs}
    block = sizes.get("BLOCK_ROWS", sizes.get("BLOCK_O"))
    grid = (cdiv(rows, block),) + tuple(kernel.interpreter.grid[1:])
    return dataclasses.replace(kernel.interpreter, constexprs=sizes, grid=grid)


# ---- output fusions: dot -----------------------------------------------------------

DOT_BIAS_RELU = """
%fused {
  %p0 = f32[17,33]{1,0} parameter(0)
  %p1 = f32[33,19]{0,1} parameter(1)
  %p2 = f32[19]{0} parameter(2)
  %d = f32[17,19]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %b = f32[17,19]{1,0} broadcast(%p2), dimensions={1}
  %a = f32[17,19]{1,0} add(%d, %b)
  ROOT %r = f32[17,19]{1,0} relu(%a)
}
ENTRY %main {
  %x = f32[17,33]{1,0} parameter(0)
  %w = f32[33,19]{0,1} parameter(1)
  %bias = f32[19]{0} parameter(2)
  ROOT %f = f32[17,19]{0,1} fusion(%x, %w, %bias), kind=output, calls=%fused, origin={Gemm_0,Relu_1}
}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_dot_bias_relu(gpu_tiles):
    inst = fusion(DOT_BIAS_RELU)
    kernel = lower(inst, "k")
    check(inst, config=kernel.gpu if gpu_tiles else None, template="matmul.py.jinja")


def test_batched_dot_bias_gelu_residual_through_bitcast():
    # the weights arrive as [3, 627] and are bitcast to [3, 33, 19]; the residual has its own layout
    check(fusion("""
%fused {
  %p0 = f32[3,17,33]{2,1,0} parameter(0)
  %p1 = f32[3,627]{1,0} parameter(1)
  %p2 = f32[19]{0} parameter(2)
  %p3 = f32[3,17,19]{1,2,0} parameter(3)
  %w = f32[3,33,19]{2,1,0} bitcast(%p1)
  %d = f32[3,17,19]{2,1,0} dot(%p0, %w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %b = f32[3,17,19]{2,1,0} broadcast(%p2), dimensions={2}
  %a = f32[3,17,19]{2,1,0} add(%d, %b)
  %g = f32[3,17,19]{2,1,0} gelu(%a), approximate=tanh
  ROOT %r = f32[3,17,19]{2,1,0} add(%g, %p3)
}
ENTRY %main {
  %x = f32[3,17,33]{2,1,0} parameter(0)
  %w = f32[3,627]{1,0} parameter(1)
  %bias = f32[19]{0} parameter(2)
  %res = f32[3,17,19]{1,2,0} parameter(3)
  ROOT %f = f32[3,17,19]{0,2,1} fusion(%x, %w, %bias, %res), kind=output, calls=%fused
}
"""), template="matmul.py.jinja")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_dot_scale_bias_convert_with_a_size_one_dim(dtype):
    # one row; the dot rounds to the half type before the epilogue, which computes in it and widens at the end
    check(fusion("""
%fused {
  %p0 = f16[1,33]{1,0} parameter(0)
  %p1 = f16[17,33]{1,0} parameter(1)
  %p2 = f16[17]{0} parameter(2)
  %d = f16[1,17]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
  %half = f16[1,17]{1,0} constant(), splat=0.5
  %s = f16[1,17]{1,0} multiply(%d, %half)
  %b = f16[1,17]{1,0} broadcast(%p2), dimensions={1}
  %a = f16[1,17]{1,0} add(%s, %b)
  ROOT %r = f32[1,17]{1,0} convert(%a)
}
ENTRY %main {
  %x = f16[1,33]{1,0} parameter(0)
  %w = f16[17,33]{1,0} parameter(1)
  %bias = f16[17]{0} parameter(2)
  ROOT %f = f32[1,17]{1,0} fusion(%x, %w, %bias), kind=output, calls=%fused
}
""".replace("f16", dtype)), precision=dtype)


def test_integer_dot_bias_maximum():
    check(fusion("""
%fused {
  %p0 = s32[5,7]{1,0} parameter(0)
  %p1 = s32[7,9]{1,0} parameter(1)
  %p2 = s32[5]{0} parameter(2)
  %d = s32[5,9]{1,0} dot(%p0, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
  %b = s32[5,9]{1,0} broadcast(%p2), dimensions={0}
  %a = s32[5,9]{1,0} add(%d, %b)
  %z = s32[5,9]{1,0} constant(), splat=-3
  ROOT %r = s32[5,9]{1,0} maximum(%a, %z)
}
ENTRY %main {
  %x = s32[5,7]{1,0} parameter(0)
  %w = s32[7,9]{1,0} parameter(1)
  %bias = s32[5]{0} parameter(2)
  ROOT %f = s32[5,9]{1,0} fusion(%x, %w, %bias), kind=output, calls=%fused
}
"""))


# ---- output fusions: convolution ----------------------------------------------------

def conv_fusion(x: str, w: str, out: str, labels: str, feature_dim: int, groups: int, stride: str, pad: str,
                residual: str | None = None, activation: str = "relu(%a)") -> str:
    """A convolution (in x's dtype) with a bias broadcast along feature_dim, an activation, maybe a residual
    add, and a convert when out's dtype differs."""
    dtype, dims = x.split("[")[0], out.split("[")[1].split("]")[0]
    features = dims.split(",")[feature_dim]
    layout = ",".join(str(i) for i in reversed(range(len(dims.split(",")))))
    plain = f"{dtype}[{dims}]{{{layout}}}"
    steps = [f"%g = {plain} {activation}"]
    if residual:
        steps.append(f"%s = {plain} add(%g, %p3)")
    if out.split("[")[0] != dtype:
        steps.append(f"%t = {out.split('{')[0]}{{{layout}}} convert(%{steps[-1][1]})")
    steps[-1] = "ROOT " + steps[-1]
    res_param = f"\n  %p3 = {residual} parameter(3)" if residual else ""
    entry_res = f"\n  %res = {residual} parameter(3)" if residual else ""
    epilogue = "\n".join("  " + step for step in steps)
    return f"""
%fused {{
  %p0 = {x} parameter(0)
  %p1 = {w} parameter(1)
  %p2 = {dtype}[{features}]{{0}} parameter(2){res_param}
  %c = {plain} convolution(%p0, %p1), window_strides={{{stride}}}, padding_low={{{pad}}}, padding_high={{{pad}}}, rhs_dilation={{1,1}}, feature_group_count={groups}, dim_labels={labels}
  %b = {plain} broadcast(%p2), dimensions={{{feature_dim}}}
  %a = {plain} add(%c, %b)
{epilogue}
}}
ENTRY %main {{
  %x = {x} parameter(0)
  %w = {w} parameter(1)
  %bias = {dtype}[{features}]{{0}} parameter(2){entry_res}
  ROOT %f = {out} fusion(%x, %w, %bias{", %res" if residual else ""}), kind=output, calls=%fused
}}
"""


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_conv_nchw_bias_relu_stored_channels_last(gpu_tiles):
    inst = fusion(conv_fusion("f32[2,3,9,11]{3,2,1,0}", "f32[8,3,3,3]{3,2,1,0}", "f32[2,8,5,11]{1,3,2,0}",
                              "bf01_oi01->bf01", 1, 1, "2,1", "1,1"))
    kernel = lower(inst, "k")
    check(inst, config=kernel.gpu if gpu_tiles else None, template="conv.py.jinja")


def test_conv_nhwc_bias_gelu_residual():
    check(fusion(conv_fusion("f32[2,9,8,3]{3,2,1,0}", "f32[3,3,3,5]{3,2,1,0}", "f32[2,9,8,5]{3,2,1,0}",
                             "b01f_01io->b01f", 3, 1, "1,1", "1,1", residual="f32[2,9,8,5]{2,1,3,0}",
                             activation="gelu(%a), approximate=none")), template="conv.py.jinja")


def test_grouped_conv_one_matmul_per_group_bias_relu():
    # 2 groups of 16 output features: a tl.dot per group on grid axis 1, features = group * 16 + column
    check(fusion(conv_fusion("f32[1,4,6,7]{3,2,1,0}", "f32[32,2,3,3]{3,2,1,0}", "f32[1,32,6,7]{3,2,1,0}",
                             "bf01_oi01->bf01", 1, 2, "1,1", "1,1")), template="conv.py.jinja")


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_depthwise_conv_bias_gelu_residual(gpu_tiles):
    inst = fusion(conv_fusion("f32[2,6,7,9]{3,2,1,0}", "f32[6,1,3,3]{3,2,1,0}", "f32[2,6,7,9]{3,2,1,0}",
                              "bf01_oi01->bf01", 1, 6, "1,1", "1,1", residual="f32[2,6,7,9]{1,3,2,0}",
                              activation="gelu(%a), approximate=tanh"))
    kernel = lower(inst, "k")
    check(inst, config=kernel.gpu if gpu_tiles else None, template="grouped_conv.py.jinja")


# ---- output fusions: two convolutions in one tile, a dot normalizing whole rows ------------

def two_convs(a: str, wa: str, x: str, wb: str, out: str, stride_a: str, pad_a: str, stride_b: str, pad_b: str,
              combine: str, labels: str = "bf01_oi01->bf01", root: str | None = None) -> str:
    """Two convolutions at the same output coordinates (the main path and the shortcut of a ResNet block),
    each its own K loop and accumulator in one kernel: a bias on the first, ``combine`` (%ca, %cb) -> %s,
    then ``root`` (relu by default)."""
    dtype, dims = a.split("[")[0], out.split("[")[1].split("]")[0]
    plain = f"{dtype}[{dims}]{{{out.split('{')[1].split('}')[0]}}}"
    features = dims.split(",")[1]
    root = root or f"ROOT %r = {plain} relu(%s)"
    conv = "rhs_dilation={{1,1}}, feature_group_count=1, dim_labels={labels}"
    return f"""
%fused {{
  %p0 = {a} parameter(0)
  %p1 = {wa} parameter(1)
  %p2 = {dtype}[{features}]{{0}} parameter(2)
  %p3 = {x} parameter(3)
  %p4 = {wb} parameter(4)
  %ca = {plain} convolution(%p0, %p1), window_strides={{{stride_a}}}, padding_low={{{pad_a}}}, padding_high={{{pad_a}}}, {conv.format(labels=labels)}
  %b = {plain} broadcast(%p2), dimensions={{1}}
  %a = {plain} add(%ca, %b)
  %cb = {plain} convolution(%p3, %p4), window_strides={{{stride_b}}}, padding_low={{{pad_b}}}, padding_high={{{pad_b}}}, {conv.format(labels=labels)}
  %s = {plain} {combine}
  {root}
}}
ENTRY %main {{
  %in0 = {a} parameter(0)
  %in1 = {wa} parameter(1)
  %in2 = {dtype}[{features}]{{0}} parameter(2)
  %in3 = {x} parameter(3)
  %in4 = {wb} parameter(4)
  ROOT %f = {out} fusion(%in0, %in1, %in2, %in3, %in4), kind=output, calls=%fused
}}
"""


# ResNet's downsampling block in NHWC: a 1x1 convolution of the main path plus a 1x1, stride-2 shortcut of the
# block's input; 19 output features and 2 x 4 x 7 = 56 positions, neither a multiple of any tile
DOWNSAMPLE = two_convs("f32[2,5,4,7]{1,3,2,0}", "f32[19,5,1,1]{3,2,1,0}", "f32[2,6,7,13]{1,3,2,0}",
                       "f32[19,6,1,1]{1,0,3,2}", "f32[2,19,4,7]{1,3,2,0}", "1,1", "0,0", "2,2", "0,0",
                       "add(%a, %cb)")


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_resnet_shortcut_and_main_path_convolutions_share_one_tile(gpu_tiles):
    inst = fusion(DOWNSAMPLE)
    kernel = lower(inst, "k")
    assert kernel.source.count("tl.dot(") == 2 and "acc_1 = tl.full" in kernel.source
    assert kernel.flops >= 2 * 56 * 19 * (5 + 6)
    check(inst, config=kernel.gpu if gpu_tiles else None, template="conv.py.jinja")


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_two_padded_3x3_convolutions_of_different_strides_multiplied(gpu_tiles):
    # NCHW, batch 1: 3x3 pad 1 on a 5x7 map, and 3x3 stride 2 pad 1 on a 9x13 map, both to 5x7
    inst = fusion(two_convs("f32[1,3,5,7]{3,2,1,0}", "f32[8,3,3,3]{3,2,1,0}", "f32[1,4,9,13]{3,2,1,0}",
                            "f32[8,4,3,3]{3,2,1,0}", "f32[1,8,5,7]{3,2,1,0}", "1,1", "1,1", "2,2", "1,1",
                            "multiply(%a, %cb)", root="ROOT %r = f32[1,8,5,7]{3,2,1,0} tanh(%s)"))
    kernel = lower(inst, "k")
    check(inst, config=kernel.gpu if gpu_tiles else None, template="conv.py.jinja")


def test_two_half_convolutions_to_a_single_position_widened_at_the_end():
    # every output dim but the features is 1: a 1x1 convolution of a 1x1 map and a valid 3x3 of a 3x3 map
    text = two_convs("f16[1,3,1,1]{1,3,2,0}", "f16[17,3,1,1]{3,2,1,0}", "f16[1,2,3,3]{1,3,2,0}",
                     "f16[17,2,3,3]{3,2,1,0}", "f16[1,17,1,1]{1,3,2,0}", "1,1", "0,0", "1,1", "0,0",
                     "subtract(%a, %cb)", root="ROOT %r = f32[1,17,1,1]{1,3,2,0} convert(%s)")
    check(fusion(text.replace("ROOT %f = f16[1,17,1,1]", "ROOT %f = f32[1,17,1,1]")), precision="f16")


def dot_norm(lhs: str, rhs: str, out: str, dot_dims: str, norm: str, after: tuple[str, ...] = (),
             final: str | None = None) -> str:
    """A dot, a residual add (the residual in another layout), then ``norm`` (%n, a row norm of %x over the
    dot's columns, scale %g and bias %bb computed from parameters), then the lines ``after`` it, the last
    one the root; the fusion's result is ``final`` (default: the dot's shape)."""
    dtype, dims = out.split("[")[0], out.split("[")[1].split("]")[0]
    cols = dims.split(",")[-1]
    res_layout = ",".join(str(i) for i in range(len(dims.split(","))))
    lines = [f"%n = {norm}", *after]
    lines[-1] = "ROOT " + lines[-1]
    body = "\n  ".join(lines)
    return f"""
%fused {{
  %p0 = {lhs} parameter(0)
  %p1 = {rhs} parameter(1)
  %p2 = {dtype}[{dims}]{{{res_layout}}} parameter(2)
  %p3 = {dtype}[{cols}]{{0}} parameter(3)
  %p4 = {dtype}[{cols}]{{0}} parameter(4)
  %d = {out} dot(%p0, %p1), {dot_dims}
  %x = {out} add(%d, %p2)
  %g = {dtype}[{cols}]{{0}} negate(%p3)
  %bb = {dtype}[{cols}]{{0}} copy(%p4)
  {body}
}}
ENTRY %main {{
  %in0 = {lhs} parameter(0)
  %in1 = {rhs} parameter(1)
  %in2 = {dtype}[{dims}]{{{res_layout}}} parameter(2)
  %in3 = {dtype}[{cols}]{{0}} parameter(3)
  %in4 = {dtype}[{cols}]{{0}} parameter(4)
  ROOT %f = {final or out} fusion(%in0, %in1, %in2, %in3, %in4), kind=output, calls=%fused
}}
"""


PROJECTION_LAYER_NORM = dot_norm(
    "f32[17,33]{1,0}", "f32[33,19]{0,1}", "f32[17,19]{1,0}",
    "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}",
    "f32[17,19]{1,0} layer-norm(%x, %g, %bb), dimensions={1}, epsilon=1e-5")


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_projection_residual_layer_norm_in_the_dot_epilogue(gpu_tiles):
    # BERT's attention output: dot, residual add, LayerNorm over the 19 columns (computed scale and bias)
    inst = fusion(PROJECTION_LAYER_NORM)
    kernel = lower(inst, "k")
    for config in (kernel.gpu, kernel.interpreter):  # one tile spans every column
        assert config.constexprs["BLOCK_N"] >= 19
        assert config.grid[0] == cdiv(17, config.constexprs["BLOCK_M"])
    check(inst, config=kernel.gpu if gpu_tiles else None, template="matmul.py.jinja")


@pytest.mark.parametrize("gpu_tiles", [False, True])
def test_batched_dot_rms_norm_then_an_epilogue_over_several_row_dims(gpu_tiles):
    # rows over a batch dim (grid axis 1) and two lhs free dims; 40 columns; tanh(scale * norm) after it
    inst = fusion(dot_norm(
        "f32[3,2,5,24]{3,2,1,0}", "f32[3,24,40]{2,1,0}", "f32[3,2,5,40]{3,2,1,0}",
        "lhs_batch_dims={0}, lhs_contracting_dims={3}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
        "f32[3,2,5,40]{3,2,1,0} rms-norm(%x, %g), dimensions={3}, epsilon=1e-6",
        after=("%k = f32[3,2,5,40]{3,2,1,0} constant(), splat=0.75",
               "%m = f32[3,2,5,40]{3,2,1,0} multiply(%n, %k)",
               "%r = f32[3,2,5,40]{3,2,1,0} tanh(%m)")))
    kernel = lower(inst, "k")
    check(inst, config=kernel.gpu if gpu_tiles else None, template="matmul.py.jinja")


def test_layer_norm_of_one_column_rows_gives_the_bias():
    # a row of one element is its own mean: the output is the bias exactly
    inst = fusion(dot_norm(
        "f32[4,7]{1,0}", "f32[7,1]{1,0}", "f32[4,1]{1,0}",
        "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}",
        "f32[4,1]{1,0} layer-norm(%x, %g, %bb), dimensions={1}, epsilon=1e-5"))
    inputs = random_inputs(inst)
    check(inst, inputs, template="matmul.py.jinja")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_dot_layer_norm_widened_to_f32(dtype):
    inst = fusion(dot_norm(
        "f16[9,16]{1,0}", "f16[16,24]{1,0}", "f16[9,24]{1,0}",
        "lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}",
        "f16[9,24]{1,0} layer-norm(%x, %g, %bb), dimensions={1}, epsilon=1e-5",
        after=("%r = f32[9,24]{1,0} convert(%n)",), final="f32[9,24]{1,0}").replace("f16", dtype))
    check(inst, precision=dtype, template="matmul.py.jinja")


def test_an_output_fusion_normalizes_rows_only_after_a_dot():
    inst = fusion("""
%fused {
  %p0 = f32[1,3,5,5]{3,2,1,0} parameter(0)
  %p1 = f32[4,3,1,1]{3,2,1,0} parameter(1)
  %p2 = f32[5]{0} parameter(2)
  %c = f32[1,4,5,5]{3,2,1,0} convolution(%p0, %p1), window_strides={1,1}, padding_low={0,0}, padding_high={0,0}, rhs_dilation={1,1}, feature_group_count=1, dim_labels=bf01_oi01->bf01
  ROOT %n = f32[1,4,5,5]{3,2,1,0} rms-norm(%c, %p2), dimensions={3}, epsilon=1e-6
}
ENTRY %main {
  %x = f32[1,3,5,5]{3,2,1,0} parameter(0)
  %w = f32[4,3,1,1]{3,2,1,0} parameter(1)
  %g = f32[5]{0} parameter(2)
  ROOT %f = f32[1,4,5,5]{3,2,1,0} fusion(%x, %w, %g), kind=output, calls=%fused
}
""")
    with pytest.raises(UnsupportedError, match="normalizes rows only after a dot"):
        lower(inst, "k")


# ---- input fusions -----------------------------------------------------------------

LAYER_NORM_RESIDUAL = """
%fused {
  %p0 = f32[2,17,33]{2,1,0} parameter(0)
  %p1 = f32[2,17,33]{1,2,0} parameter(1)
  %p2 = f32[33]{0} parameter(2)
  %p3 = f32[33]{0} parameter(3)
  %p4 = f32[33]{0} parameter(4)
  %b = f32[2,17,33]{2,1,0} broadcast(%p4), dimensions={2}
  %s = f32[2,17,33]{2,1,0} add(%p0, %p1)
  %a = f32[2,17,33]{2,1,0} add(%s, %b)
  %ln = f32[2,17,33]{2,1,0} layer-norm(%a, %p2, %p3), dimensions={2}, epsilon=1e-5
  ROOT %r = f16[2,17,33]{2,1,0} convert(%ln)
}
ENTRY %main {
  %x = f32[2,17,33]{2,1,0} parameter(0)
  %y = f32[2,17,33]{1,2,0} parameter(1)
  %g = f32[33]{0} parameter(2)
  %bb = f32[33]{0} parameter(3)
  %bias = f32[33]{0} parameter(4)
  ROOT %f = f16[2,17,33]{1,2,0} fusion(%x, %y, %g, %bb, %bias), kind=input, calls=%fused
}
"""


@pytest.mark.parametrize("chunks", [False, True])
def test_layer_norm_residual_prologue_convert_epilogue(chunks):
    inst = fusion(LAYER_NORM_RESIDUAL)
    kernel = lower(inst, "k")
    # chunks: rows of 33 walked 8 columns at a time (a pass for the mean, the variance, the output)
    check(inst, config=tiles(kernel, 34, BLOCK_ROWS=4, BLOCK_C=8) if chunks else None, template="row_norm.py.jinja")


@pytest.mark.parametrize("chunks", [False, True])
def test_softmax_with_broadcast_mask_prologue_and_isnan_epilogue(chunks):
    inst = fusion("""
%fused {
  %p0 = f32[2,3,17,33]{3,2,1,0} parameter(0)
  %p1 = f32[2,33]{1,0} parameter(1)
  %m = f32[2,3,17,33]{3,2,1,0} broadcast(%p1), dimensions={0,3}
  %s = f32[2,3,17,33]{3,2,1,0} add(%p0, %m)
  %sm = f32[2,3,17,33]{3,2,1,0} softmax(%s), dimension=3
  %nan = pred[2,3,17,33]{3,2,1,0} is-nan(%sm)
  %z = f32[2,3,17,33]{3,2,1,0} constant(), splat=0
  ROOT %r = f32[2,3,17,33]{3,2,1,0} select(%nan, %z, %sm)
}
ENTRY %main {
  %x = f32[2,3,17,33]{3,2,1,0} parameter(0)
  %mask = f32[2,33]{1,0} parameter(1)
  ROOT %f = f32[2,3,17,33]{3,2,1,0} fusion(%x, %mask), kind=input, calls=%fused
}
""")
    x, mask = random_inputs(inst, seed=3)
    mask[0, ::3] = -np.inf
    mask[1, :] = -np.inf  # every row of batch 1 is fully masked: NaN, which the epilogue turns into 0
    kernel = check(inst, [x, mask], config=tiles(lower(inst, "k"), 102, BLOCK_ROWS=8, BLOCK_C=16) if chunks else None,
                   template="row_norm.py.jinja")
    assert kernel.arg_types == ["*fp32", "*fp32", "*fp32"]


def test_log_softmax_over_a_middle_dim_of_a_converted_half_input():
    check(fusion("""
%fused {
  %p0 = f16[5,17,3]{1,2,0} parameter(0)
  %c = f32[5,17,3]{2,1,0} convert(%p0)
  %k = f32[5,17,3]{2,1,0} constant(), splat=0.125
  %s = f32[5,17,3]{2,1,0} multiply(%c, %k)
  ROOT %sm = f32[5,17,3]{2,1,0} softmax(%s), dimension=1, log=true
}
ENTRY %main {
  %x = f16[5,17,3]{1,2,0} parameter(0)
  ROOT %f = f32[5,17,3]{0,2,1} fusion(%x), kind=input, calls=%fused
}
"""))


@pytest.mark.parametrize("chunks", [False, True])
def test_rms_norm_with_computed_scale_and_half_output(chunks):
    inst = fusion("""
%fused {
  %p0 = f16[6,1,40]{2,1,0} parameter(0)
  %p1 = f16[40]{0} parameter(1)
  %p2 = f32[6]{0} parameter(2)
  %x = f32[6,1,40]{2,1,0} convert(%p0)
  %g = f32[40]{0} convert(%p1)
  %n = f32[6,1,40]{2,1,0} rms-norm(%x, %g), dimensions={2}, epsilon=1e-6
  %t = f32[6,1,40]{2,1,0} broadcast(%p2), dimensions={0}
  %m = f32[6,1,40]{2,1,0} multiply(%n, %t)
  ROOT %r = f16[6,1,40]{2,1,0} convert(%m)
}
ENTRY %main {
  %x = f16[6,1,40]{2,1,0} parameter(0)
  %g = f16[40]{0} parameter(1)
  %t = f32[6]{0} parameter(2)
  ROOT %f = f16[6,1,40]{2,1,0} fusion(%x, %g, %t), kind=input, calls=%fused
}
""")
    check(inst, config=tiles(lower(inst, "k"), 6, BLOCK_ROWS=2, BLOCK_C=16) if chunks else None)


@pytest.mark.parametrize("chunks", [False, True])
def test_reduce_max_over_outer_and_inner_dims_with_prologue_and_epilogue(chunks):
    inst = fusion("""
%fused {
  %p0 = f32[5,17,33]{0,2,1} parameter(0)
  %p1 = f32[5,33]{0,1} parameter(1)
  %b = f32[5,17,33]{2,1,0} broadcast(%p1), dimensions={0,2}
  %m = f32[5,17,33]{2,1,0} multiply(%p0, %b)
  %r = f32[17]{0} reduce(%m), dimensions={0,2}, kind=maximum
  %one = f32[17]{0} constant(), splat=1
  ROOT %e = f32[17]{0} add(%r, %one)
}
ENTRY %main {
  %x = f32[5,17,33]{0,2,1} parameter(0)
  %y = f32[5,33]{0,1} parameter(1)
  ROOT %f = f32[17]{0} fusion(%x, %y), kind=input, calls=%fused
}
""")
    check(inst, config=tiles(lower(inst, "k"), 17, BLOCK_O=4, BLOCK_R=16) if chunks else None,
          template="reduce.py.jinja")


def test_reduce_or_of_a_comparison_with_a_size_one_dim():
    check(fusion("""
%fused {
  %p0 = s32[4,1,9]{2,1,0} parameter(0)
  %p1 = s32[9]{0} parameter(1)
  %b = s32[4,1,9]{2,1,0} broadcast(%p1), dimensions={2}
  %c = pred[4,1,9]{2,1,0} compare(%p0, %b), direction=GT
  %r = pred[4,1]{1,0} reduce(%c), dimensions={2}, kind=or
  ROOT %n = pred[4,1]{1,0} not(%r)
}
ENTRY %main {
  %x = s32[4,1,9]{2,1,0} parameter(0)
  %t = s32[9]{0} parameter(1)
  ROOT %f = pred[4,1]{1,0} fusion(%x, %t), kind=input, calls=%fused
}
"""))


def test_sum_of_a_transposed_slice():
    # a prologue made of index maps: the reduce reads p0[2:19, :] transposed, through the operand's layout
    check(fusion("""
%fused {
  %p0 = f32[21,6]{0,1} parameter(0)
  %s = f32[17,6]{1,0} slice(%p0), start_indices={2,0}, limit_indices={19,6}, strides={1,1}
  %t = f32[6,17]{1,0} transpose(%s), dimensions={1,0}
  ROOT %r = f32[6]{0} reduce(%t), dimensions={1}, kind=add
}
ENTRY %main {
  %x = f32[21,6]{0,1} parameter(0)
  ROOT %f = f32[6]{0} fusion(%x), kind=input, calls=%fused
}
"""))


# ---- attention fusions -------------------------------------------------------------

def attention_fusion(dtype: str, causal: bool, mask_ops: str, root: str | None = None, out: str | None = None) -> str:
    """Grouped-query attention (4 query heads, 2 kv heads, 17 queries, 33 keys) with its mask computed in the
    kernel from a pred parameter p3 [2,33] by mask_ops, whose last instruction is %mask; maybe an epilogue
    (root, whose shape is out)."""
    result = f"{dtype}[2,4,17,8]{{3,2,1,0}}"
    out = out or result
    attention = f"attention(%q, %k, %v, %mask), scale=0.25, causal={'true' if causal else 'false'}"
    body = f"  ROOT %a = {result} {attention}" if root is None else f"  %a = {result} {attention}\n{root}"
    return f"""
%fused {{
  %q = {dtype}[2,4,17,16]{{3,2,1,0}} parameter(0)
  %k = {dtype}[2,2,33,16]{{3,1,2,0}} parameter(1)
  %v = {dtype}[2,2,33,8]{{3,2,1,0}} parameter(2)
  %p3 = pred[2,33]{{1,0}} parameter(3)
{mask_ops}
{body}
}}
ENTRY %main {{
  %q = {dtype}[2,4,17,16]{{3,2,1,0}} parameter(0)
  %k = {dtype}[2,2,33,16]{{3,1,2,0}} parameter(1)
  %v = {dtype}[2,2,33,8]{{3,2,1,0}} parameter(2)
  %m = pred[2,33]{{1,0}} parameter(3)
  ROOT %f = {out} fusion(%q, %k, %v, %m), kind=attention, calls=%fused
}}
"""


ADDITIVE_MASK = """  %mb = pred[2,1,17,33]{3,2,1,0} broadcast(%p3), dimensions={0,3}
  %z = {t}[2,1,17,33]{3,2,1,0} constant(), splat=0
  %ninf = {t}[2,1,17,33]{3,2,1,0} constant(), splat=-10000
  %mask = {t}[2,1,17,33]{3,2,1,0} select(%mb, %z, %ninf)"""


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_attention_with_an_additive_mask_selected_from_a_bool_parameter(dtype):
    check(fusion(attention_fusion(dtype, False, ADDITIVE_MASK.replace("{t}", dtype))),
          template="attention.py.jinja")


def test_causal_attention_with_a_pred_mask_and_an_epilogue():
    # the mask keeps keys where p3 is false; rows whose visible keys are all masked yield zeros
    inst = fusion(attention_fusion("f32", True, """  %np = pred[2,33]{1,0} not(%p3)
  %mask = pred[2,1,1,33]{3,2,1,0} broadcast(%np), dimensions={0,3}""",
                                   root="""  %two = f32[2,4,17,8]{3,2,1,0} constant(), splat=2
  ROOT %r = f32[2,4,17,8]{3,2,1,0} multiply(%a, %two)""", out="f32[2,4,17,8]{1,3,2,0}"))
    q, k, v, m = random_inputs(inst, seed=5)
    m[0, :20] = True  # batch 0: the first keys masked, so the first queries see none
    check(inst, [q, k, v, m])


# ---- lowering checks, numerics checker, AOT compile -------------------------------

def test_a_contraction_operand_must_be_read_as_it_is():
    inst = fusion("""
%fused {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,4]{1,0} parameter(1)
  %n = f32[4,8]{1,0} negate(%p0)
  ROOT %d = f32[4,4]{1,0} dot(%n, %p1), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}
}
ENTRY %main {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,4]{1,0} parameter(1)
  ROOT %f = f32[4,4]{1,0} fusion(%x, %w), kind=output, calls=%fused
}
""")
    with pytest.raises(UnsupportedError, match="read from memory as they are"):
        lower(inst, "k")


def test_check_numerics_catches_an_epilogue_that_drops_its_bias(monkeypatch):
    module = parse_module(DOT_BIAS_RELU)
    verify_module(module)
    inst = module.entry.root

    def without_bias(template, **context):
        # the epilogue's add of the bias becomes a copy of the accumulator
        body = [Assign(out=s.out, depth=s.depth, x=s.args[0]) if isinstance(s, ElementOp) and s.op == "add" else s
                for s in context["epilogue"].body]
        context["epilogue"] = dataclasses.replace(context["epilogue"], body=body)
        return real_render(template, **context)

    real_render = mlcc.emit.codegen.contraction.render
    assert check_numerics(module, {"fused_output_k": lower(inst, "fused_output_k")},
                          [(inst, "fused_output_k")]).kernels_checked == 1
    monkeypatch.setattr(mlcc.emit.codegen.contraction, "render", without_bias)
    broken = lower(inst, "fused_output_k")
    with pytest.raises(InternalError, match=r"kernel fused_output_k \(%f, fusion, output\).*source nodes: Gemm_0, Relu_1"):
        check_numerics(module, {"fused_output_k": broken}, [(inst, "fused_output_k")])


AOT_CASES = {
    "dot": DOT_BIAS_RELU,
    "conv": conv_fusion("f16[2,8,9,11]{3,2,1,0}", "f16[16,8,3,3]{3,2,1,0}", "f32[2,16,9,11]{1,3,2,0}",
                        "bf01_oi01->bf01", 1, 1, "1,1", "1,1"),
    "depthwise": conv_fusion("f32[2,6,7,9]{3,2,1,0}", "f32[6,1,3,3]{3,2,1,0}", "f32[2,6,7,9]{3,2,1,0}",
                             "bf01_oi01->bf01", 1, 6, "1,1", "1,1", residual="f32[2,6,7,9]{1,3,2,0}"),
    "layer_norm": LAYER_NORM_RESIDUAL,
    "two_convs": DOWNSAMPLE,
    "dot_layer_norm": PROJECTION_LAYER_NORM,
    "reduce": """
%fused {
  %p0 = f32[5,17,33]{2,1,0} parameter(0)
  %p1 = f32[33]{0} parameter(1)
  %b = f32[5,17,33]{2,1,0} broadcast(%p1), dimensions={2}
  %m = f32[5,17,33]{2,1,0} multiply(%p0, %b)
  %r = f32[5,17]{1,0} reduce(%m), dimensions={2}, kind=add
  ROOT %e = f32[5,17]{1,0} exp(%r)
}
ENTRY %main {
  %x = f32[5,17,33]{2,1,0} parameter(0)
  %y = f32[33]{0} parameter(1)
  ROOT %f = f32[5,17]{0,1} fusion(%x, %y), kind=input, calls=%fused
}
""",
    "attention": attention_fusion("f16", True, ADDITIVE_MASK.replace("{t}", "f16"),
                                  root="""  %c = f32[2,4,17,8]{3,2,1,0} convert(%a)
  ROOT %r = f32[2,4,17,8]{3,2,1,0} tanh(%c)""", out="f32[2,4,17,8]{3,2,1,0}"),
}


def _compile(name: str, target: str) -> bytes:
    from mlcc.emit.target.aot import compile_kernel
    from mlcc.emit.target.targets import parse_target
    kernel = lower(fusion(AOT_CASES[name]), f"aot_fused_{name}")
    return compile_kernel(kernel, parse_target(target)).data


def test_aot_compile_for_sm90():
    for name in AOT_CASES:
        assert _compile(name, "sm_90")[:4] == b"\x7fELF", name


@pytest.mark.slow
@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_aot_compile_other_targets(target):
    for name in AOT_CASES:
        assert _compile(name, target)[:4] == b"\x7fELF", name
