// expect: 3 unsupported ops: stablehlo.cholesky
func.func @main(%x: tensor<4x4xf32>, %c: tensor<2xui64>) -> (tensor<4x4xf32>, tensor<4xui32>) {
  %0 = stablehlo.cholesky %x, lower = true : tensor<4x4xf32>
  %1 = stablehlo.custom_call @my_solver(%0, %x) {backend_config = ""} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s, %2 = "stablehlo.rng_bit_generator"(%c) {rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)
  return %1, %2 : tensor<4x4xf32>, tensor<4xui32>
}
