// expect: stablehlo.real (line 4)
func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %0 = stablehlo.complex %a, %b : tensor<2xcomplex<f32>>
  %1 = stablehlo.real %0 : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
  %2 = stablehlo.imag %0 : tensor<2xcomplex<f32>>
  return %1, %2 : tensor<2xf32>, tensor<2xf32>
}
