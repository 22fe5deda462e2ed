// expect: stablehlo.reduce: a reduce of quantized elements whose body does more than add, take maxima or minima
func.func @main(%x: tensor<4x!quant.uniform<i8:f32, 0.1:-3>>, %init: tensor<!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<!quant.uniform<i8:f32, 0.1:-3>> {
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.multiply across dimensions = [0] : (tensor<4x!quant.uniform<i8:f32, 0.1:-3>>, tensor<!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<!quant.uniform<i8:f32, 0.1:-3>>
  return %0 : tensor<!quant.uniform<i8:f32, 0.1:-3>>
}
