// expect: stablehlo.constant with element type ui2
func.func @main() -> tensor<4xui2> {
  %0 = stablehlo.constant dense<[1, 0, 1, 1]> : tensor<4xui2>
  return %0 : tensor<4xui2>
}
