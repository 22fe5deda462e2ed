import numpy as np

from mlcc.hlo.passes.cse import CommonSubexpressionElimination
from mlcc.hlo.passes.pass_manager import Pipeline
from mlcc.hlo.passes.recognize.layer_norm import RecognizeLayerNorm
from tests.hlo.passes.pass_numerics import assert_same_values, check_rewrite, load, opcodes

rng = np.random.default_rng(0)
LN_WEIGHTS = {"ln.weight": rng.standard_normal(32).astype(np.float32),
              "ln.bias": rng.standard_normal(32).astype(np.float32)}

# torch.onnx.export(nn.LayerNorm(32), opset_version=16, dynamo=False): ReduceMean, Sub, Pow, ReduceMean, Add,
# Sqrt, Div, Mul, Add, as the ONNX importer gives them
TORCH_LEGACY = """
      ENTRY %main {
        %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
        %reduce = f32[2,8]{1,0} reduce(%arg), dimensions={2}, kind=add, origin={"/ln/ReduceMean"}
        %constant = f32[2,8]{1,0} constant(), splat=32.0, origin={"/ln/ReduceMean"}
        %divide = f32[2,8]{1,0} divide(%reduce, %constant), origin={"/ln/ReduceMean"}
        %reshape = f32[2,8,1]{2,1,0} reshape(%divide), origin={"/ln/ReduceMean"}
        %broadcast = f32[2,8,32]{2,1,0} broadcast(%reshape), dimensions={0,1,2}, origin={"/ln/Sub"}
        %subtract = f32[2,8,32]{2,1,0} subtract(%arg, %broadcast), origin={"/ln/Sub"}
        %constant.1 = f32[2,8,32]{2,1,0} constant(), splat=2.0, origin={"/ln/Pow"}
        %power = f32[2,8,32]{2,1,0} power(%subtract, %constant.1), origin={"/ln/Pow"}
        %reduce.1 = f32[2,8]{1,0} reduce(%power), dimensions={2}, kind=add, origin={"/ln/ReduceMean_1"}
        %constant.2 = f32[2,8]{1,0} constant(), splat=32.0, origin={"/ln/ReduceMean_1"}
        %divide.1 = f32[2,8]{1,0} divide(%reduce.1, %constant.2), origin={"/ln/ReduceMean_1"}
        %reshape.1 = f32[2,8,1]{2,1,0} reshape(%divide.1), origin={"/ln/ReduceMean_1"}
        %constant.3 = f32[2,8,1]{2,1,0} constant(), splat=9.999999747378752e-06, origin={"/ln/Add"}
        %add = f32[2,8,1]{2,1,0} add(%reshape.1, %constant.3), origin={"/ln/Add"}
        %sqrt = f32[2,8,1]{2,1,0} sqrt(%add), origin={"/ln/Sqrt"}
        %broadcast.1 = f32[2,8,32]{2,1,0} broadcast(%sqrt), dimensions={0,1,2}, origin={"/ln/Div"}
        %divide.2 = f32[2,8,32]{2,1,0} divide(%subtract, %broadcast.1), origin={"/ln/Div"}
        %constant.4 = f32[32]{0} constant(), ref=ln.weight
        %broadcast.2 = f32[2,8,32]{2,1,0} broadcast(%constant.4), dimensions={2}, origin={"/ln/Mul"}
        %multiply = f32[2,8,32]{2,1,0} multiply(%divide.2, %broadcast.2), origin={"/ln/Mul"}
        %constant.5 = f32[32]{0} constant(), ref=ln.bias
        %broadcast.3 = f32[2,8,32]{2,1,0} broadcast(%constant.5), dimensions={2}, origin={"/ln/Add_1"}
        %add.1 = f32[2,8,32]{2,1,0} add(%multiply, %broadcast.3), origin={"/ln/Add_1"}
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%add.1)
      }"""


def test_torch_legacy_export():
    check_rewrite(RecognizeLayerNorm(), TORCH_LEGACY, constants=LN_WEIGHTS, expected="""
      ENTRY %main {
        %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
        %constant.4 = f32[32]{0} constant(), ref=ln.weight
        %constant.5 = f32[32]{0} constant(), ref=ln.bias
        %norm-bias = f32[2,8,32]{2,1,0} layer-norm(%arg, %constant.4, %constant.5), dimensions={2}, epsilon=9.999999747378752e-06, origin={"/ln/Add_1","/ln/Mul","/ln/ReduceMean","/ln/Sub","/ln/Pow","/ln/ReduceMean_1","/ln/Add","/ln/Sqrt","/ln/Div"}
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%norm-bias)
      }""")


# /work/shared/models/attention.stablehlo.mlir (JAX): sum / 64, square, sum / 64, + eps, sqrt, 1 / sqrt,
# keepdims by broadcast_in_dim; the mean is subtracted twice (CSE merges the two before recognition)
JAX = """
      ENTRY %main {
        %arg = f32[1,16,64]{2,1,0} parameter(0), name=arg0
        %arg.1 = f32[64]{0} parameter(1), name=arg3
        %arg.2 = f32[64]{0} parameter(2), name=arg4
        %reduce = f32[1,16]{1,0} reduce(%arg), dimensions={2}, kind=add, origin={"main/%0"}
        %broadcast = f32[1,16,1]{2,1,0} broadcast(%reduce), dimensions={0,1}, origin={"main/%1"}
        %constant.1 = f32[] constant(), value={64.0}, origin={"main/%cst_0"}
        %broadcast.1 = f32[1,16,1]{2,1,0} broadcast(%constant.1), dimensions={}, origin={"main/%2"}
        %divide = f32[1,16,1]{2,1,0} divide(%broadcast, %broadcast.1), origin={"main/%3"}
        %broadcast.2 = f32[1,16,64]{2,1,0} broadcast(%divide), dimensions={0,1,2}, origin={"main/%4"}
        %subtract = f32[1,16,64]{2,1,0} subtract(%arg, %broadcast.2), origin={"main/%5"}
        %multiply = f32[1,16,64]{2,1,0} multiply(%subtract, %subtract), origin={"main/%6"}
        %reduce.1 = f32[1,16]{1,0} reduce(%multiply), dimensions={2}, kind=add, origin={"main/%7"}
        %broadcast.3 = f32[1,16,1]{2,1,0} broadcast(%reduce.1), dimensions={0,1}, origin={"main/%8"}
        %constant.3 = f32[] constant(), value={64.0}, origin={"main/%cst_2"}
        %broadcast.4 = f32[1,16,1]{2,1,0} broadcast(%constant.3), dimensions={}, origin={"main/%9"}
        %divide.1 = f32[1,16,1]{2,1,0} divide(%broadcast.3, %broadcast.4), origin={"main/%10"}
        %broadcast.5 = f32[1,16,64]{2,1,0} broadcast(%divide), dimensions={0,1,2}, origin={"main/%11"}
        %subtract.1 = f32[1,16,64]{2,1,0} subtract(%arg, %broadcast.5), origin={"main/%12"}
        %constant.4 = f32[] constant(), value={9.999999747378752e-06}, origin={"main/%cst_3"}
        %broadcast.6 = f32[1,16,1]{2,1,0} broadcast(%constant.4), dimensions={}, origin={"main/%13"}
        %add = f32[1,16,1]{2,1,0} add(%divide.1, %broadcast.6), origin={"main/%14"}
        %sqrt = f32[1,16,1]{2,1,0} sqrt(%add), origin={"main/%15"}
        %constant.5 = f32[] constant(), value={1.0}, origin={"main/%cst_4"}
        %broadcast.7 = f32[1,16,1]{2,1,0} broadcast(%constant.5), dimensions={}, origin={"main/%16"}
        %divide.2 = f32[1,16,1]{2,1,0} divide(%broadcast.7, %sqrt), origin={"main/%17"}
        %broadcast.8 = f32[1,16,64]{2,1,0} broadcast(%divide.2), dimensions={0,1,2}, origin={"main/%18"}
        %multiply.1 = f32[1,16,64]{2,1,0} multiply(%subtract.1, %broadcast.8), origin={"main/%19"}
        %broadcast.9 = f32[1,1,64]{2,1,0} broadcast(%arg.2), dimensions={2}, origin={"main/%20"}
        %broadcast.10 = f32[1,16,64]{2,1,0} broadcast(%broadcast.9), dimensions={0,1,2}, origin={"main/%21"}
        %multiply.2 = f32[1,16,64]{2,1,0} multiply(%multiply.1, %broadcast.10), origin={"main/%22"}
        %broadcast.11 = f32[1,1,64]{2,1,0} broadcast(%arg.1), dimensions={2}, origin={"main/%23"}
        %broadcast.12 = f32[1,16,64]{2,1,0} broadcast(%broadcast.11), dimensions={0,1,2}, origin={"main/%24"}
        %add.1 = f32[1,16,64]{2,1,0} add(%multiply.2, %broadcast.12), origin={"main/%25"}
        ROOT %tuple = (f32[1,16,64]{2,1,0}) tuple(%add.1)
      }"""


def test_jax_export_after_cse():
    module = load(JAX)
    Pipeline("p", [CommonSubexpressionElimination(), RecognizeLayerNorm()]).run(module)
    assert opcodes(module) == ["parameter", "parameter", "parameter", "layer-norm", "tuple"]
    norm = module.entry.instructions[3]
    assert [o.name for o in norm.operands] == ["arg", "arg.2", "arg.1"]
    assert norm.attrs == {"dimensions": (2,), "epsilon": 9.999999747378752e-06}
    assert_same_values(load(JAX), module)


def test_hand_written_scale_first_form():
    # torch, opset 16: w * (x - u) / torch.sqrt(var + 1e-6) + b  (the scale is applied before the division)
    check_rewrite(RecognizeLayerNorm(), """
      ENTRY %main {
        %x = f32[2,8,32]{2,1,0} parameter(0), name=x
        %w = f32[32]{0} parameter(1), name=w
        %b = f32[32]{0} parameter(2), name=b
        %reduce = f32[2,8]{1,0} reduce(%x), dimensions={2}, kind=add
        %n = f32[2,8]{1,0} constant(), splat=32.0
        %divide = f32[2,8]{1,0} divide(%reduce, %n)
        %reshape = f32[2,8,1]{2,1,0} reshape(%divide)
        %broadcast = f32[2,8,32]{2,1,0} broadcast(%reshape), dimensions={0,1,2}
        %subtract = f32[2,8,32]{2,1,0} subtract(%x, %broadcast)
        %two = f32[2,8,32]{2,1,0} constant(), splat=2.0
        %power = f32[2,8,32]{2,1,0} power(%subtract, %two)
        %reduce.1 = f32[2,8]{1,0} reduce(%power), dimensions={2}, kind=add
        %divide.1 = f32[2,8]{1,0} divide(%reduce.1, %n)
        %reshape.1 = f32[2,8,1]{2,1,0} reshape(%divide.1)
        %broadcast.1 = f32[2,8,32]{2,1,0} broadcast(%w), dimensions={2}
        %multiply = f32[2,8,32]{2,1,0} multiply(%broadcast.1, %subtract)
        %eps = f32[2,8,1]{2,1,0} constant(), splat=9.999999974752427e-07
        %add = f32[2,8,1]{2,1,0} add(%reshape.1, %eps)
        %sqrt = f32[2,8,1]{2,1,0} sqrt(%add)
        %broadcast.2 = f32[2,8,32]{2,1,0} broadcast(%sqrt), dimensions={0,1,2}
        %divide.2 = f32[2,8,32]{2,1,0} divide(%multiply, %broadcast.2)
        %broadcast.3 = f32[2,8,32]{2,1,0} broadcast(%b), dimensions={2}
        %add.1 = f32[2,8,32]{2,1,0} add(%divide.2, %broadcast.3)
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%add.1)
      }""", expected="""
      ENTRY %main {
        %x = f32[2,8,32]{2,1,0} parameter(0), name=x
        %w = f32[32]{0} parameter(1), name=w
        %b = f32[32]{0} parameter(2), name=b
        %norm-bias = f32[2,8,32]{2,1,0} layer-norm(%x, %w, %b), dimensions={2}, epsilon=9.999999974752427e-07
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%norm-bias)
      }""")


def test_channels_first_layer_norm_over_dim_one():
    # ConvNeXt's LayerNorm(channels_first): mean over dim 1 of NCHW, weight[:, None, None]
    check_rewrite(RecognizeLayerNorm(), """
      ENTRY %main {
        %x = f32[2,8,4,4]{3,2,1,0} parameter(0), name=x
        %reduce = f32[2,4,4]{2,1,0} reduce(%x), dimensions={1}, kind=add
        %n = f32[2,4,4]{2,1,0} constant(), splat=8.0
        %divide = f32[2,4,4]{2,1,0} divide(%reduce, %n)
        %reshape = f32[2,1,4,4]{3,2,1,0} reshape(%divide)
        %broadcast = f32[2,8,4,4]{3,2,1,0} broadcast(%reshape), dimensions={0,1,2,3}
        %subtract = f32[2,8,4,4]{3,2,1,0} subtract(%x, %broadcast)
        %two = f32[2,8,4,4]{3,2,1,0} constant(), splat=2.0
        %power = f32[2,8,4,4]{3,2,1,0} power(%subtract, %two)
        %reduce.1 = f32[2,4,4]{2,1,0} reduce(%power), dimensions={1}, kind=add
        %divide.1 = f32[2,4,4]{2,1,0} divide(%reduce.1, %n)
        %reshape.1 = f32[2,1,4,4]{3,2,1,0} reshape(%divide.1)
        %eps = f32[2,1,4,4]{3,2,1,0} constant(), splat=1e-06
        %add = f32[2,1,4,4]{3,2,1,0} add(%reshape.1, %eps)
        %sqrt = f32[2,1,4,4]{3,2,1,0} sqrt(%add)
        %broadcast.1 = f32[2,8,4,4]{3,2,1,0} broadcast(%sqrt), dimensions={0,1,2,3}
        %divide.2 = f32[2,8,4,4]{3,2,1,0} divide(%subtract, %broadcast.1)
        %w = f32[8,1,1]{2,1,0} constant(), value={-0.86,0.25,-0.81,1.16,0.81,-1.96,-0.28,-0.09}
        %broadcast.2 = f32[2,8,4,4]{3,2,1,0} broadcast(%w), dimensions={1,2,3}
        %multiply = f32[2,8,4,4]{3,2,1,0} multiply(%broadcast.2, %divide.2)
        %b = f32[8,1,1]{2,1,0} constant(), value={-0.73,-0.95,-1.69,0.08,0.81,-0.26,-1.12,-0.43}
        %broadcast.3 = f32[2,8,4,4]{3,2,1,0} broadcast(%b), dimensions={1,2,3}
        %add.1 = f32[2,8,4,4]{3,2,1,0} add(%multiply, %broadcast.3)
        ROOT %tuple = (f32[2,8,4,4]{3,2,1,0}) tuple(%add.1)
      }""", expected="""
      ENTRY %main {
        %x = f32[2,8,4,4]{3,2,1,0} parameter(0), name=x
        %w = f32[8,1,1]{2,1,0} constant(), value={-0.86,0.25,-0.81,1.16,0.81,-1.96,-0.28,-0.09}
        %norm-scale = f32[8]{0} reshape(%w)
        %b = f32[8,1,1]{2,1,0} constant(), value={-0.73,-0.95,-1.69,0.08,0.81,-0.26,-1.12,-0.43}
        %norm-bias = f32[8]{0} reshape(%b)
        %norm-bias.1 = f32[2,8,4,4]{3,2,1,0} layer-norm(%x, %norm-scale, %norm-bias), dimensions={1}, epsilon=1e-06
        ROOT %tuple = (f32[2,8,4,4]{3,2,1,0}) tuple(%norm-bias.1)
      }""")


# flax.linen.LayerNorm (use_fast_variance=True): var = max(0, mean(x*x) - mean(x)^2),
# y = (x - mean) * (rsqrt(var + eps) * scale) + bias
FLAX = """
      ENTRY %main {
        %x = f32[2,8,32]{2,1,0} parameter(0)
        %g = f32[32]{0} parameter(1)
        %b = f32[32]{0} parameter(2)
        %s = f32[2,8]{1,0} reduce(%x), dimensions={2}, kind=add
        %n = f32[] constant(), value={32.0}
        %nb = f32[2,8]{1,0} broadcast(%n), dimensions={}
        %mean = f32[2,8]{1,0} divide(%s, %nb)
        %xx = f32[2,8,32]{2,1,0} multiply(%x, %x)
        %s2 = f32[2,8]{1,0} reduce(%xx), dimensions={2}, kind=add
        %mean2 = f32[2,8]{1,0} divide(%s2, %nb)
        %msq = f32[2,8]{1,0} multiply(%mean, %mean)
        %var0 = f32[2,8]{1,0} subtract(%mean2, %msq)
        %zero = f32[] constant(), value={0.0}
        %zb = f32[2,8]{1,0} broadcast(%zero), dimensions={}
        %var = f32[2,8]{1,0} maximum(%zb, %var0)
        %eps = f32[] constant(), value={1e-06}
        %eb = f32[2,8]{1,0} broadcast(%eps), dimensions={}
        %ve = f32[2,8]{1,0} add(%var, %eb)
        %r = f32[2,8]{1,0} rsqrt(%ve)
        %rb = f32[2,8,32]{2,1,0} broadcast(%r), dimensions={0,1}
        %gb = f32[2,8,32]{2,1,0} broadcast(%g), dimensions={2}
        %mul = f32[2,8,32]{2,1,0} multiply(%rb, %gb)
        %meanb = f32[2,8,32]{2,1,0} broadcast(%mean), dimensions={0,1}
        %d = f32[2,8,32]{2,1,0} subtract(%x, %meanb)
        %y = f32[2,8,32]{2,1,0} multiply(%d, %mul)
        %bb = f32[2,8,32]{2,1,0} broadcast(%b), dimensions={2}
        %out = f32[2,8,32]{2,1,0} add(%y, %bb)
        ROOT %r0 = (f32[2,8,32]{2,1,0}) tuple(%out)
      }"""


def test_flax_fast_variance_form():
    check_rewrite(RecognizeLayerNorm(), FLAX, expected="""
      ENTRY %main {
        %x = f32[2,8,32]{2,1,0} parameter(0)
        %g = f32[32]{0} parameter(1)
        %b = f32[32]{0} parameter(2)
        %norm-bias = f32[2,8,32]{2,1,0} layer-norm(%x, %g, %b), dimensions={2}, epsilon=1e-06
        ROOT %r0 = (f32[2,8,32]{2,1,0}) tuple(%norm-bias)
      }""", rtol=1e-4, atol=1e-5)


# tf.nn.batch_normalization as keras' LayerNormalization uses it, via tf2onnx (Rsqrt is Sqrt + Reciprocal):
# inv = rsqrt(var + eps) * gamma;  x * inv + (beta - mean * inv)
TENSORFLOW = """
      ENTRY %main {
        %x = f32[2,8,32]{2,1,0} parameter(0)
        %gamma = f32[32]{0} parameter(1)
        %beta = f32[32]{0} parameter(2)
        %s = f32[2,8]{1,0} reduce(%x), dimensions={2}, kind=add
        %n = f32[2,8]{1,0} constant(), splat=32.0
        %m = f32[2,8]{1,0} divide(%s, %n)
        %mean = f32[2,8,1]{2,1,0} reshape(%m)
        %meanb = f32[2,8,32]{2,1,0} broadcast(%mean), dimensions={0,1,2}
        %d = f32[2,8,32]{2,1,0} subtract(%x, %meanb)
        %sq = f32[2,8,32]{2,1,0} multiply(%d, %d)
        %s2 = f32[2,8]{1,0} reduce(%sq), dimensions={2}, kind=add
        %v = f32[2,8]{1,0} divide(%s2, %n)
        %var = f32[2,8,1]{2,1,0} reshape(%v)
        %eps = f32[2,8,1]{2,1,0} constant(), splat=0.001
        %ve = f32[2,8,1]{2,1,0} add(%var, %eps)
        %sqrt = f32[2,8,1]{2,1,0} sqrt(%ve)
        %rs = f32[2,8,1]{2,1,0} reciprocal(%sqrt)
        %rsb = f32[2,8,32]{2,1,0} broadcast(%rs), dimensions={0,1,2}
        %gb = f32[2,8,32]{2,1,0} broadcast(%gamma), dimensions={2}
        %inv = f32[2,8,32]{2,1,0} multiply(%rsb, %gb)
        %xs = f32[2,8,32]{2,1,0} multiply(%x, %inv)
        %ms = f32[2,8,32]{2,1,0} multiply(%meanb, %inv)
        %bb = f32[2,8,32]{2,1,0} broadcast(%beta), dimensions={2}
        %shift = f32[2,8,32]{2,1,0} subtract(%bb, %ms)
        %out = f32[2,8,32]{2,1,0} add(%xs, %shift)
        ROOT %r0 = (f32[2,8,32]{2,1,0}) tuple(%out)
      }"""


def test_tensorflow_form():
    check_rewrite(RecognizeLayerNorm(), TENSORFLOW, expected="""
      ENTRY %main {
        %x = f32[2,8,32]{2,1,0} parameter(0)
        %gamma = f32[32]{0} parameter(1)
        %beta = f32[32]{0} parameter(2)
        %layer-norm-tf = f32[2,8,32]{2,1,0} layer-norm(%x, %gamma, %beta), dimensions={2}, epsilon=0.001
        ROOT %r0 = (f32[2,8,32]{2,1,0}) tuple(%layer-norm-tf)
      }""", rtol=1e-4, atol=1e-5)


# LLaMA's RMSNorm exported by torch.onnx (opset 16): x.pow(2).mean(-1, keepdim) -> rsqrt as 1/sqrt -> * weight
RMS = """
      ENTRY %main {
        %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
        %constant = f32[2,8,32]{2,1,0} constant(), splat=2.0, origin={"/Pow"}
        %power = f32[2,8,32]{2,1,0} power(%arg, %constant), origin={"/Pow"}
        %reduce = f32[2,8]{1,0} reduce(%power), dimensions={2}, kind=add, origin={"/ReduceMean"}
        %constant.1 = f32[2,8]{1,0} constant(), splat=32.0, origin={"/ReduceMean"}
        %divide = f32[2,8]{1,0} divide(%reduce, %constant.1), origin={"/ReduceMean"}
        %reshape = f32[2,8,1]{2,1,0} reshape(%divide), origin={"/ReduceMean"}
        %constant.2 = f32[2,8,1]{2,1,0} constant(), splat=9.999999974752427e-07, origin={"/Add"}
        %add = f32[2,8,1]{2,1,0} add(%reshape, %constant.2), origin={"/Add"}
        %sqrt = f32[2,8,1]{2,1,0} sqrt(%add), origin={"/Sqrt"}
        %constant.3 = f32[2,8,1]{2,1,0} constant(), splat=1.0, origin={"/Div"}
        %divide.1 = f32[2,8,1]{2,1,0} divide(%constant.3, %sqrt), origin={"/Div"}
        %broadcast = f32[2,8,32]{2,1,0} broadcast(%divide.1), dimensions={0,1,2}, origin={"/Mul"}
        %multiply = f32[2,8,32]{2,1,0} multiply(%arg, %broadcast), origin={"/Mul"}
        %constant.4 = f32[32]{0} constant(), ref=weight
        %broadcast.1 = f32[2,8,32]{2,1,0} broadcast(%constant.4), dimensions={2}, origin={"/Mul_1"}
        %multiply.1 = f32[2,8,32]{2,1,0} multiply(%broadcast.1, %multiply), origin={"/Mul_1"}
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%multiply.1)
      }"""


def test_rms_norm_from_torch_export():
    check_rewrite(RecognizeLayerNorm(), RMS, constants={"weight": LN_WEIGHTS["ln.weight"]}, expected="""
      ENTRY %main {
        %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
        %constant.4 = f32[32]{0} constant(), ref=weight
        %norm-scale = f32[2,8,32]{2,1,0} rms-norm(%arg, %constant.4), dimensions={2}, epsilon=9.999999974752427e-07, origin={"/Mul_1","/Pow","/ReduceMean","/Add","/Sqrt","/Div","/Mul"}
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%norm-scale)
      }""")


def test_near_misses_are_left_alone():
    wrong_count = TORCH_LEGACY.replace("%constant.2 = f32[2,8]{1,0} constant(), splat=32.0",
                                       "%constant.2 = f32[2,8]{1,0} constant(), splat=31.0")
    check_rewrite(RecognizeLayerNorm(), wrong_count, expected=None, constants=LN_WEIGHTS)
    tensor_eps = TORCH_LEGACY.replace("%constant.3 = f32[2,8,1]{2,1,0} constant(), splat=9.999999747378752e-06",
                                      "%constant.3 = f32[2,8,1]{2,1,0} parameter(1), name=eps")
    check_rewrite(RecognizeLayerNorm(), tensor_eps, expected=None, constants=LN_WEIGHTS)
    wrong_square = FLAX.replace("%msq = f32[2,8]{1,0} multiply(%mean, %mean)",
                                "%msq = f32[2,8]{1,0} multiply(%mean, %mean2)")
    check_rewrite(RecognizeLayerNorm(), wrong_square, expected=None)


def test_a_scale_that_varies_per_row_is_not_folded():
    per_row = TORCH_LEGACY.replace(
        "%broadcast.2 = f32[2,8,32]{2,1,0} broadcast(%constant.4), dimensions={2}",
        "%broadcast.2 = f32[2,8,32]{2,1,0} broadcast(%constant.4), dimensions={1}").replace(
        "%constant.4 = f32[32]{0} constant(), ref=ln.weight", "%constant.4 = f32[8]{0} parameter(1), name=w")
    module = check_rewrite(RecognizeLayerNorm(), per_row, constants={"ln.bias": LN_WEIGHTS["ln.bias"]}, expected="""
      ENTRY %main {
        %arg = f32[2,8,32]{2,1,0} parameter(0), name=x
        %norm = f32[32]{0} constant(), splat=1.0, origin={"/ln/Div"}
        %norm.1 = f32[32]{0} constant(), splat=0.0, origin={"/ln/Div"}
        %norm.2 = f32[2,8,32]{2,1,0} layer-norm(%arg, %norm, %norm.1), dimensions={2}, epsilon=9.999999747378752e-06, origin={"/ln/ReduceMean","/ln/Sub","/ln/Pow","/ln/ReduceMean_1","/ln/Add","/ln/Sqrt","/ln/Div"}
        %constant.4 = f32[8]{0} parameter(1), name=w
        %broadcast.2 = f32[2,8,32]{2,1,0} broadcast(%constant.4), dimensions={1}, origin={"/ln/Mul"}
        %multiply = f32[2,8,32]{2,1,0} multiply(%norm.2, %broadcast.2), origin={"/ln/Mul"}
        %constant.5 = f32[32]{0} constant(), ref=ln.bias
        %broadcast.3 = f32[2,8,32]{2,1,0} broadcast(%constant.5), dimensions={2}, origin={"/ln/Add_1"}
        %add.1 = f32[2,8,32]{2,1,0} add(%multiply, %broadcast.3), origin={"/ln/Add_1"}
        ROOT %tuple = (f32[2,8,32]{2,1,0}) tuple(%add.1)
      }""")
    assert opcodes(module).count("layer-norm") == 1
