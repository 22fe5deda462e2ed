// expect: stablehlo.constant with element type i2
func.func @main() -> tensor<4xi2> {
  %0 = stablehlo.constant dense<[1, 0, 1, 1]> : tensor<4xi2>
  return %0 : tensor<4xi2>
}
