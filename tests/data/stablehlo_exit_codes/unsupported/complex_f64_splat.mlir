// expect: stablehlo.constant with element type complex<f64>
func.func @main() -> tensor<2x3xcomplex<f64>> {
  %0 = stablehlo.constant dense<(0x7FF8000000000000,1.0)> : tensor<2x3xcomplex<f64>>
  return %0 : tensor<2x3xcomplex<f64>>
}
