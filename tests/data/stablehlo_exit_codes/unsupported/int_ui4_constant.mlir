// expect: stablehlo.constant with element type ui4
func.func @main() -> tensor<4xui4> {
  %0 = stablehlo.constant dense<[1, 0, 1, 1]> : tensor<4xui4>
  return %0 : tensor<4xui4>
}
