// expect: zero point 9 of !quant.uniform<i8<-8:8>:f32:0, {0.1:-3, 0.2:9}> is outside the storage range -8..8
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3x!quant.uniform<i8<-8:8>:f32:0, {0.1:-3, 0.2:9}>> {
  %0 = stablehlo.uniform_quantize %x : (tensor<2x3xf32>) -> tensor<2x3x!quant.uniform<i8<-8:8>:f32:0, {0.1:-3, 0.2:9}>>
  return %0 : tensor<2x3x!quant.uniform<i8<-8:8>:f32:0, {0.1:-3, 0.2:9}>>
}
