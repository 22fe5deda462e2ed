// expect: stablehlo.constant with element type i4
func.func @main() -> tensor<4xi4> {
  %0 = stablehlo.constant dense<"0x01020304"> : tensor<4xi4>
  %1 = stablehlo.add %0, %0 : tensor<4xi4>
  return %1 : tensor<4xi4>
}
