// expect: stablehlo.atan2: this op on complex values is not supported
func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.complex %a, %b : tensor<2xcomplex<f32>>
  %1 = stablehlo.atan2 %0, %0 : tensor<2xcomplex<f32>>
  %2 = stablehlo.real %1 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
  return %2 : tensor<2xf32>
}
