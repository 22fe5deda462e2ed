import numpy as np

from mlcc.hlo.passes.batchnorm_folding import BatchNormFolding
from tests.hlo.passes.pass_numerics import check_rewrite, opcodes

rng = np.random.default_rng(0)
WEIGHTS = {"w": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
           "fc": rng.standard_normal((5, 3)).astype(np.float32)}

# convnet_noopt.onnx (torch.onnx dynamo, optimizer off): Conv with bias, then BatchNormalization
CONV_BN = """
  ENTRY %main {
    %arg = f32[2,2,6,6]{3,2,1,0} parameter(0), name=x
    %constant = f32[3,2,3,3]{3,2,1,0} constant(), ref=w
    %convolution = f32[2,3,6,6]{3,2,1,0} convolution(%arg, %constant), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}, origin={node_conv2d}
    %constant.1 = f32[3]{0} constant(), value={0.16,0.01,-0.12}
    %broadcast = f32[2,3,6,6]{3,2,1,0} broadcast(%constant.1), dimensions={1}, origin={node_conv2d}
    %add = f32[2,3,6,6]{3,2,1,0} add(%convolution, %broadcast), origin={node_conv2d}
    %constant.2 = f32[3]{0} constant(), value={1.18,0.99,1.01}
    %constant.3 = f32[3]{0} constant(), value={-0.09,0.05,0.006}
    %constant.4 = f32[3]{0} constant(), value={-0.15,-0.07,-0.06}
    %constant.5 = f32[3]{0} constant(), value={1.07,0.99,1.43}
    %batch-norm-inference = f32[2,3,6,6]{3,2,1,0} batch-norm-inference(%add, %constant.2, %constant.3, %constant.4, %constant.5), epsilon=1e-05, feature_index=1, origin={node_bn}
    %relu = f32[2,3,6,6]{3,2,1,0} relu(%batch-norm-inference), origin={node_relu}
    ROOT %r = (f32[2,3,6,6]{3,2,1,0}) tuple(%relu)
  }"""


def _folded_weights(module):
    conv = next(i for i in module.entry.instructions if i.opcode == "convolution")
    return module.constants[conv.operands[1].attrs["ref"]]


def test_batch_norm_folds_into_the_convolution_weights_and_bias():
    module = check_rewrite(BatchNormFolding(), CONV_BN, expected="""
      ENTRY %main {
        %arg = f32[2,2,6,6]{3,2,1,0} parameter(0), name=x
        %bn-folding = f32[3,2,3,3]{3,2,1,0} constant(), ref=bn-folding, origin={node_conv2d,node_bn}
        %bn-folding.1 = f32[3]{0} constant(), value={BIAS}, origin={node_conv2d,node_bn}
        %bn-folding.2 = f32[2,3,6,6]{3,2,1,0} convolution(%arg, %bn-folding), dim_labels=bf01_oi01->bf01, feature_group_count=1, padding_high={1,1}, padding_low={1,1}, rhs_dilation={1,1}, window_strides={1,1}, origin={node_conv2d,node_bn}
        %bn-folding.3 = f32[2,3,6,6]{3,2,1,0} broadcast(%bn-folding.1), dimensions={1}, origin={node_conv2d,node_bn}
        %bn-folding.4 = f32[2,3,6,6]{3,2,1,0} add(%bn-folding.2, %bn-folding.3), origin={node_conv2d,node_bn}
        %relu = f32[2,3,6,6]{3,2,1,0} relu(%bn-folding.4), origin={node_relu}
        ROOT %r = (f32[2,3,6,6]{3,2,1,0}) tuple(%relu)
      }""".replace("BIAS", _expected_bias()), constants=WEIGHTS)
    s = np.array([1.18, 0.99, 1.01]) / np.sqrt(np.array([1.07, 0.99, 1.43]) + 1e-5)
    np.testing.assert_allclose(_folded_weights(module), WEIGHTS["w"] * s[:, None, None, None], rtol=1e-6)


def _expected_bias() -> str:
    scale, offset = np.array([1.18, 0.99, 1.01], np.float32), np.array([-0.09, 0.05, 0.006], np.float32)
    mean, var = np.array([-0.15, -0.07, -0.06], np.float32), np.array([1.07, 0.99, 1.43], np.float32)
    b = np.array([0.16, 0.01, -0.12], np.float32)
    s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
    bias = ((b - mean.astype(np.float64)) * s + offset).astype(np.float32)
    return ",".join(repr(float(v)) for v in bias)


def test_batch_norm_after_gemm_folds_into_the_dot_weights():
    check_rewrite(BatchNormFolding(), """
      ENTRY %main {
        %x = f32[4,3]{1,0} parameter(0)
        %w = f32[5,3]{1,0} constant(), ref=fc
        %d = f32[4,5]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
        %g = f32[5]{0} constant(), value={1.0,2.0,0.5,1.5,0.25}
        %o = f32[5]{0} constant(), value={0.0,1.0,-1.0,0.5,2.0}
        %m = f32[5]{0} constant(), value={0.1,0.2,0.3,0.4,0.5}
        %v = f32[5]{0} constant(), value={1.0,0.5,2.0,4.0,0.25}
        %bn = f32[4,5]{1,0} batch-norm-inference(%d, %g, %o, %m, %v), epsilon=0.001, feature_index=1
        ROOT %r = (f32[4,5]{1,0}) tuple(%bn)
      }""", expected="""
      ENTRY %main {
        %x = f32[4,3]{1,0} parameter(0)
        %bn-folding = f32[5,3]{1,0} constant(), value={VALUES}
        %bn-folding.1 = f32[5]{0} constant(), value={BIAS}
        %bn-folding.2 = f32[4,5]{1,0} dot(%x, %bn-folding), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={1}
        %bn-folding.3 = f32[4,5]{1,0} broadcast(%bn-folding.1), dimensions={1}
        %bn-folding.4 = f32[4,5]{1,0} add(%bn-folding.2, %bn-folding.3)
        ROOT %r = (f32[4,5]{1,0}) tuple(%bn-folding.4)
      }""".replace("VALUES", _gemm_weights()).replace("BIAS", _gemm_bias()), constants=WEIGHTS)


def _gemm_scale() -> np.ndarray:
    g = np.array([1.0, 2.0, 0.5, 1.5, 0.25], np.float32).astype(np.float64)
    v = np.array([1.0, 0.5, 2.0, 4.0, 0.25], np.float32).astype(np.float64)
    return g / np.sqrt(v + 0.001)


def _gemm_weights() -> str:
    w = (WEIGHTS["fc"].astype(np.float64) * _gemm_scale()[:, None]).astype(np.float32)
    return ",".join(repr(float(v)) for v in w.reshape(-1))


def _gemm_bias() -> str:
    o = np.array([0.0, 1.0, -1.0, 0.5, 2.0], np.float32).astype(np.float64)
    m = np.array([0.1, 0.2, 0.3, 0.4, 0.5], np.float32).astype(np.float64)
    return ",".join(repr(float(v)) for v in ((0 - m) * _gemm_scale() + o).astype(np.float32))


def test_no_folding_when_the_convolution_has_another_user_or_weights_are_inputs():
    shared = CONV_BN.replace("ROOT %r = (f32[2,3,6,6]{3,2,1,0}) tuple(%relu)",
                             "ROOT %r = (f32[2,3,6,6]{3,2,1,0}, f32[2,3,6,6]{3,2,1,0}) tuple(%relu, %convolution)")
    check_rewrite(BatchNormFolding(), shared, expected=None, constants=WEIGHTS)
    dynamic = CONV_BN.replace("%constant = f32[3,2,3,3]{3,2,1,0} constant(), ref=w",
                              "%constant = f32[3,2,3,3]{3,2,1,0} parameter(1), name=w")
    check_rewrite(BatchNormFolding(), dynamic, expected=None)


def test_a_batch_norm_alone_stays():
    module = check_rewrite(BatchNormFolding(), """
      ENTRY %main {
        %x = f32[2,3,4]{2,1,0} parameter(0)
        %g = f32[3]{0} constant(), splat=1.0
        %o = f32[3]{0} constant(), splat=0.0
        %bn = f32[2,3,4]{2,1,0} batch-norm-inference(%x, %g, %o, %o, %g), epsilon=0.001, feature_index=1
        ROOT %r = (f32[2,3,4]{2,1,0}) tuple(%bn)
      }""", expected=None)
    assert "batch-norm-inference" in opcodes(module)
