// expect: stablehlo.constant with element type complex<f32>
func.func @main() -> tensor<2xcomplex<f32>> {
  %0 = stablehlo.constant dense<[(1.000000e+00,2.000000e+00), (3.0,-4.5)]> : tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}
