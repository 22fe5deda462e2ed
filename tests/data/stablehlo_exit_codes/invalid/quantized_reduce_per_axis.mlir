// expect: stablehlo.reduce: %x is per-axis quantized
func.func @main(%x: tensor<2x3x!quant.uniform<i8:f32:0, {0.1:-3, 0.2:4}>>, %init: tensor<!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<2x!quant.uniform<i8:f32, 0.1:-3>> {
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.add across dimensions = [1] : (tensor<2x3x!quant.uniform<i8:f32:0, {0.1:-3, 0.2:4}>>, tensor<!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<2x!quant.uniform<i8:f32, 0.1:-3>>
  return %0 : tensor<2x!quant.uniform<i8:f32, 0.1:-3>>
}
