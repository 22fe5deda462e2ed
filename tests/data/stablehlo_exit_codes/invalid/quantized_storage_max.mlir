// expect: storage_max 16 of !quant.uniform<u4<0:16>:f32, 0.5:1> is outside u4's range 0..15
func.func @main(%x: tensor<4xf32>) -> tensor<4x!quant.uniform<u4<0:16>:f32, 0.5:1>> {
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x!quant.uniform<u4<0:16>:f32, 0.5:1>>
  return %0 : tensor<4x!quant.uniform<u4<0:16>:f32, 0.5:1>>
}
