// expect: stablehlo.add with element type !quant.uniform<i8<-128:127>:f32, 0.1:-3>
func.func @main(%x: tensor<4x!quant.uniform<i8:f32, 0.1:-3>>, %init: tensor<!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<!quant.uniform<i8:f32, 0.1:-3>> {
  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.add across dimensions = [0] : (tensor<4x!quant.uniform<i8:f32, 0.1:-3>>, tensor<!quant.uniform<i8:f32, 0.1:-3>>) -> tensor<!quant.uniform<i8:f32, 0.1:-3>>
  return %0 : tensor<!quant.uniform<i8:f32, 0.1:-3>>
}
