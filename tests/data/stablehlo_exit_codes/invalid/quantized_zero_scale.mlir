// expect: 3:68: scale 0.0 of !quant.uniform<i8:f32, 0.0:-3> is not a positive finite number
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.0:-3>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<4x!quant.uniform<i8:f32, 0.0:-3>>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
