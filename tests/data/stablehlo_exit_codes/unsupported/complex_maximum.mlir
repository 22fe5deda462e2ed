// expect: stablehlo.maximum: this op on complex values is not supported
func.func @main(%a: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  %0 = stablehlo.maximum %a, %a : tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}
