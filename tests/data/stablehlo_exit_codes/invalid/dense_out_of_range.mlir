// expect: does not fit in s8
func.func @main() -> tensor<i8> {
  %0 = stablehlo.constant dense<300> : tensor<i8>
  return %0 : tensor<i8>
}
