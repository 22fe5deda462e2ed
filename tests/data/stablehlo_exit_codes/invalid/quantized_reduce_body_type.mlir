// expect: a quantized element is read as a quantized type of the same expressed type and no narrower storage (is_promotable)
func.func @main(%x: tensor<4x!quant.uniform<i8:f32, 0.1:-3>>, %init: tensor<!quant.uniform<i8:f64, 0.1:-3>>) -> tensor<!quant.uniform<i8:f64, 0.1:-3>> {
  %0 = "stablehlo.reduce"(%x, %init) ({
  ^bb0(%a: tensor<!quant.uniform<i8:f64, 0.1:-3>>, %b: tensor<!quant.uniform<i8:f64, 0.1:-3>>):
    %r = stablehlo.add %a, %b : tensor<!quant.uniform<i8:f64, 0.1:-3>>
    stablehlo.return %r : tensor<!quant.uniform<i8:f64, 0.1:-3>>
  }) {dimensions = array<i64: 0>} : (tensor<4x!quant.uniform<i8:f32, 0.1:-3>>, tensor<!quant.uniform<i8:f64, 0.1:-3>>) -> tensor<!quant.uniform<i8:f64, 0.1:-3>>
  return %0 : tensor<!quant.uniform<i8:f64, 0.1:-3>>
}
