// expect: stablehlo.constant with element type i4
func.func @main() -> tensor<4xi4> {
  %0 = stablehlo.constant dense<[1, 0, 1, 1]> : tensor<4xi4>
  return %0 : tensor<4xi4>
}
