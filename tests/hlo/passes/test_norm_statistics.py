"""The norm-statistics pass (mlcc/hlo/passes/norm_statistics.py): the GEMM whose epilogue computes a long-row
norm's input also returns its rows' statistics (row-stats partials), and the GEMM normalizing its A tiles reads
them as the norm's last operand; IR text in, IR text out, the same values before and after (the numpy
evaluator combines the partials by Chan's formula, the reference computes the norm from its rows), and the
reasons it is refused."""

from __future__ import annotations

import numpy as np

from mlcc.hlo.passes.norm_statistics import NormStatistics
from tests.hlo.passes.pass_numerics import check_rewrite, run


def _block(norm: str = "layer-norm", row: int = 512, residual: str = "gemm") -> str:
    """A residual stream h (a model output) computed by a GEMM's epilogue, or by an add alone, then normalized
    in the A loads of the next GEMM, as fusion leaves them."""
    scale = "%param_1, %param_2" if norm == "layer-norm" else "%param_1"
    more = f"""
        %param_2 = f32[{row}]{{0}} parameter(2)""" if norm == "layer-norm" else ""
    w = 3 if norm == "layer-norm" else 2
    reads = "%h, %g, %b, %wq" if norm == "layer-norm" else "%h, %g, %wq"
    if residual == "gemm":
        producer = f"""
      %fused_output.h {{
        %param_0 = f32[1,16,{row}]{{2,1,0}} parameter(0)
        %param_1 = f32[{row},{row}]{{1,0}} parameter(1)
        %param_2 = f32[1,16,{row}]{{2,1,0}} parameter(2)
        %dot = f32[1,16,{row}]{{2,1,0}} dot(%param_0, %param_1), lhs_batch_dims={{}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
        ROOT %add = f32[1,16,{row}]{{2,1,0}} add(%dot, %param_2)
      }}
"""
        h = f"%h = f32[1,16,{row}]{{2,1,0}} fusion(%x, %w1, %res), calls=%fused_output.h, kind=output"
    else:
        producer = ""
        h = f"%h = f32[1,16,{row}]{{2,1,0}} add(%x, %res)"
    return f"""{producer}
      %fused_output.q {{
        %param_0 = f32[1,16,{row}]{{2,1,0}} parameter(0)
        %param_1 = f32[{row}]{{0}} parameter(1){more}
        %param_{w} = f32[{row},64]{{1,0}} parameter({w})
        %n = f32[1,16,{row}]{{2,1,0}} {norm}(%param_0, {scale}), dimensions={{2}}, epsilon=1e-05
        ROOT %q = f32[1,16,64]{{2,1,0}} dot(%n, %param_{w}), lhs_batch_dims={{}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{}}, rhs_contracting_dims={{0}}
      }}

      ENTRY %main {{
        %x = f32[1,16,{row}]{{2,1,0}} parameter(0), name=x
        %res = f32[1,16,{row}]{{2,1,0}} parameter(1), name=res
        %w1 = f32[{row},{row}]{{1,0}} parameter(2), name=w1
        %g = f32[{row}]{{0}} parameter(3), name=g
        %b = f32[{row}]{{0}} parameter(4), name=b
        %wq = f32[{row},64]{{1,0}} parameter(5), name=wq
        {h}
        %fusion.q = f32[1,16,64]{{2,1,0}} fusion({reads}), calls=%fused_output.q, kind=output
        ROOT %t = (f32[1,16,{row}]{{2,1,0}}, f32[1,16,64]{{2,1,0}}) tuple(%h, %fusion.q)
      }}"""


def _inputs(row: int = 512) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    # rows far from zero mean: the partials' means differ, so Chan's correction term matters
    return {"x": rng.standard_normal((1, 16, row)).astype(np.float32),
            "res": (3 + rng.standard_normal((1, 16, row))).astype(np.float32),
            "w1": (rng.standard_normal((row, row)) / np.sqrt(row)).astype(np.float32),
            "g": rng.standard_normal(row).astype(np.float32), "b": rng.standard_normal(row).astype(np.float32),
            "wq": rng.standard_normal((row, 64)).astype(np.float32)}


def test_the_residual_gemm_stores_a_layer_norms_mean_and_m2_partials_for_the_normalizing_gemm():
    check_rewrite(NormStatistics(), _block(), inputs=_inputs(), rtol=1e-4, atol=1e-4, expected="""
      %fused_output.h {
        %param_0 = f32[1,16,512]{2,1,0} parameter(0)
        %param_1 = f32[512,512]{1,0} parameter(1)
        %param_2 = f32[1,16,512]{2,1,0} parameter(2)
        %dot = f32[1,16,512]{2,1,0} dot(%param_0, %param_1), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
        %add = f32[1,16,512]{2,1,0} add(%dot, %param_2)
        %row-stats = f32[1,16,8,2]{3,2,1,0} row-stats(%add), dimensions={2}, moments=mean-m2, part=64
        ROOT %tuple = (f32[1,16,512]{2,1,0}, f32[1,16,8,2]{3,2,1,0}) tuple(%add, %row-stats)
      }

      %fused_output.q {
        %param_0 = f32[1,16,512]{2,1,0} parameter(0)
        %param_1 = f32[512]{0} parameter(1)
        %param_2 = f32[512]{0} parameter(2)
        %param_3 = f32[512,64]{1,0} parameter(3)
        %param_4 = f32[1,16,8,2]{3,2,1,0} parameter(4)
        %n = f32[1,16,512]{2,1,0} layer-norm(%param_0, %param_1, %param_2, %param_4), dimensions={2}, epsilon=1e-05
        ROOT %q = f32[1,16,64]{2,1,0} dot(%n, %param_3), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
      }

      ENTRY %main {
        %x = f32[1,16,512]{2,1,0} parameter(0), name=x
        %res = f32[1,16,512]{2,1,0} parameter(1), name=res
        %w1 = f32[512,512]{1,0} parameter(2), name=w1
        %g = f32[512]{0} parameter(3), name=g
        %b = f32[512]{0} parameter(4), name=b
        %wq = f32[512,64]{1,0} parameter(5), name=wq
        %h = (f32[1,16,512]{2,1,0}, f32[1,16,8,2]{3,2,1,0}) fusion(%x, %w1, %res), calls=%fused_output.h, kind=output
        %add = f32[1,16,512]{2,1,0} get-tuple-element(%h), index=0
        %row-stats = f32[1,16,8,2]{3,2,1,0} get-tuple-element(%h), index=1
        %fusion.q = f32[1,16,64]{2,1,0} fusion(%add, %g, %b, %wq, %row-stats), calls=%fused_output.q, kind=output
        ROOT %t = (f32[1,16,512]{2,1,0}, f32[1,16,64]{2,1,0}) tuple(%add, %fusion.q)
      }""")


def test_an_rms_norm_reads_sums_of_squares():
    _, module = run(NormStatistics(), _block("rms-norm"))
    fused = {c.name: c for c in module.computations}
    stats = next(i for i in fused["fused_output.h"].instructions if i.opcode == "row-stats")
    assert str(stats.shape) == "f32[1,16,8]{2,1,0}" and stats.attrs["moments"] == "squares"
    norm = next(i for i in fused["fused_output.q"].instructions if i.opcode == "rms-norm")
    assert [o.opcode for o in norm.operands] == ["parameter"] * 3


def test_rows_that_fit_a_k_tile_are_left_to_the_gemm():
    # 256 elements: the GEMM's one K tile holds the row and its statistics come from it (nothing to store)
    changed, _ = run(NormStatistics(), _block(row=256))
    assert not changed


def test_a_residual_no_gemm_computes_is_explained():
    changed, module = run(NormStatistics(), _block(residual="add"))
    assert not changed
    assert "%h -> %fusion.q: row statistics not computed by the producer: the norm's input comes from a kernel " \
           "of its own (add), not a GEMM's epilogue" in module.analyses.fusion_explanations


def test_rows_not_a_multiple_of_the_partials_width_are_explained():
    changed, module = run(NormStatistics(), _block(row=520))
    assert not changed
    assert "%h -> %fusion.q: row statistics not computed by the producer: its rows of 520 elements are not a " \
           "multiple of 64 (the partials' width)" in module.analyses.fusion_explanations


# LLaMA's MLP down projection, split along K (split_k.py): a GEMM of the 4 K slices' partials, then their sum
# plus the residual in a reduction kernel (an input fusion), whose result the next layer's attention norm reads
SPLIT_K = """
      %fused_input.h {
        %param_0 = f32[1,16,512]{2,1,0} parameter(0)
        %param_1 = f32[4,1,16,512]{3,2,1,0} parameter(1)
        %sum = f32[1,16,512]{2,1,0} reduce(%param_1), dimensions={0}, kind=add
        ROOT %add = f32[1,16,512]{2,1,0} add(%param_0, %sum)
      }

      %fused_output.q {
        %param_0 = f32[1,16,512]{2,1,0} parameter(0)
        %param_1 = f32[512]{0} parameter(1)
        %param_2 = f32[512,64]{1,0} parameter(2)
        %n = f32[1,16,512]{2,1,0} rms-norm(%param_0, %param_1), dimensions={2}, epsilon=1e-05
        ROOT %q = f32[1,16,64]{2,1,0} dot(%n, %param_2), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
      }

      ENTRY %main {
        %partials = f32[4,1,16,512]{3,2,1,0} parameter(0), name=partials
        %res = f32[1,16,512]{2,1,0} parameter(1), name=res
        %g = f32[512]{0} parameter(2), name=g
        %wq = f32[512,64]{1,0} parameter(3), name=wq
        %h = f32[1,16,512]{2,1,0} fusion(%res, %partials), calls=%fused_input.h, kind=input
        %fusion.q = f32[1,16,64]{2,1,0} fusion(%h, %g, %wq), calls=%fused_output.q, kind=output
        ROOT %t = (f32[1,16,512]{2,1,0}, f32[1,16,64]{2,1,0}) tuple(%h, %fusion.q)
      }"""


def test_the_split_k_reduction_stores_the_sums_of_squares_for_the_normalizing_gemm():
    rng = np.random.default_rng(8)
    inputs = {"partials": rng.standard_normal((4, 1, 16, 512)).astype(np.float32),
              "res": (3 + rng.standard_normal((1, 16, 512))).astype(np.float32),
              "g": rng.standard_normal(512).astype(np.float32),
              "wq": (rng.standard_normal((512, 64)) / np.sqrt(512)).astype(np.float32)}
    check_rewrite(NormStatistics(), SPLIT_K, inputs=inputs, rtol=1e-4, atol=1e-4, expected="""
      %fused_input.h {
        %param_0 = f32[1,16,512]{2,1,0} parameter(0)
        %param_1 = f32[4,1,16,512]{3,2,1,0} parameter(1)
        %sum = f32[1,16,512]{2,1,0} reduce(%param_1), dimensions={0}, kind=add
        %add = f32[1,16,512]{2,1,0} add(%param_0, %sum)
        %row-stats = f32[1,16,8]{2,1,0} row-stats(%add), dimensions={2}, moments=squares, part=64
        ROOT %tuple = (f32[1,16,512]{2,1,0}, f32[1,16,8]{2,1,0}) tuple(%add, %row-stats)
      }

      %fused_output.q {
        %param_0 = f32[1,16,512]{2,1,0} parameter(0)
        %param_1 = f32[512]{0} parameter(1)
        %param_2 = f32[512,64]{1,0} parameter(2)
        %param_3 = f32[1,16,8]{2,1,0} parameter(3)
        %n = f32[1,16,512]{2,1,0} rms-norm(%param_0, %param_1, %param_3), dimensions={2}, epsilon=1e-05
        ROOT %q = f32[1,16,64]{2,1,0} dot(%n, %param_2), lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}
      }

      ENTRY %main {
        %partials = f32[4,1,16,512]{3,2,1,0} parameter(0), name=partials
        %res = f32[1,16,512]{2,1,0} parameter(1), name=res
        %g = f32[512]{0} parameter(2), name=g
        %wq = f32[512,64]{1,0} parameter(3), name=wq
        %h = (f32[1,16,512]{2,1,0}, f32[1,16,8]{2,1,0}) fusion(%res, %partials), calls=%fused_input.h, kind=input
        %add = f32[1,16,512]{2,1,0} get-tuple-element(%h), index=0
        %row-stats = f32[1,16,8]{2,1,0} get-tuple-element(%h), index=1
        %fusion.q = f32[1,16,64]{2,1,0} fusion(%add, %g, %wq, %row-stats), calls=%fused_output.q, kind=output
        ROOT %t = (f32[1,16,512]{2,1,0}, f32[1,16,64]{2,1,0}) tuple(%add, %fusion.q)
      }""")


def test_a_reduction_whose_outputs_are_not_numbered_by_rows_is_explained():
    # the partials laid out with the 16 rows innermost ({2,3,0,1}): the kernel numbers its outputs in the
    # operand's order (a column's 16 rows consecutive), so 64 consecutive outputs are no row's partial
    text = SPLIT_K.replace("f32[4,1,16,512]{3,2,1,0}", "f32[4,1,16,512]{2,3,0,1}")
    changed, module = run(NormStatistics(), text)
    assert not changed
    assert "%h -> %fusion.q: row statistics not computed by the producer: the reduction's operand or result is " \
           "not row-major (its outputs are not numbered by rows)" in module.analyses.fusion_explanations


def test_a_reduction_over_a_middle_dim_is_explained():
    # the K slices between the rows and the columns ([1,16,4,512] summed over dim 2): the kept dims are not one
    # run of strides, so the kernel's consecutive outputs are not a row's
    text = SPLIT_K.replace("f32[4,1,16,512]", "f32[1,16,4,512]").replace("dimensions={0}, kind=add",
                                                                       "dimensions={2}, kind=add")
    changed, module = run(NormStatistics(), text)
    assert not changed
    assert "%h -> %fusion.q: row statistics not computed by the producer: the reduction's operand or result is " \
           "not row-major (its outputs are not numbered by rows)" in module.analyses.fusion_explanations
