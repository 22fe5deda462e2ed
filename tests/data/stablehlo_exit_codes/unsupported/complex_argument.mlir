// expect: stablehlo.abs with element type complex<f32>
func.func @main(%a: tensor<4xcomplex<f32>>) -> tensor<4xf32> {
  %0 = stablehlo.abs %a : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
