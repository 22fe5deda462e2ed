module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xi32>, %arg1: tensor<4x8xi32>) -> (tensor<4x8xi32> {jax.result_info = "result[0]"}, tensor<4x8xi32> {jax.result_info = "result[1]"}, tensor<4x8xi32> {jax.result_info = "result[2]"}, tensor<4x8xi32> {jax.result_info = "result[3]"}, tensor<4x8xi32> {jax.result_info = "result[4]"}, tensor<4x8xi32> {jax.result_info = "result[5]"}, tensor<4x8xi32> {jax.result_info = "result[6]"}, tensor<4x8xi32> {jax.result_info = "result[7]"}, tensor<4x8xi32> {jax.result_info = "result[8]"}, tensor<4x8xi32> {jax.result_info = "result[9]"}) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4x8xi32>
    %1 = stablehlo.subtract %arg0, %arg1 : tensor<4x8xi32>
    %2 = stablehlo.multiply %arg0, %arg1 : tensor<4x8xi32>
    %3 = stablehlo.divide %arg0, %arg1 : tensor<4x8xi32>
    %4 = stablehlo.remainder %arg0, %arg1 : tensor<4x8xi32>
    %5 = stablehlo.maximum %arg0, %arg1 : tensor<4x8xi32>
    %6 = stablehlo.minimum %arg0, %arg1 : tensor<4x8xi32>
    %7 = stablehlo.and %arg0, %arg1 : tensor<4x8xi32>
    %8 = stablehlo.or %arg0, %arg1 : tensor<4x8xi32>
    %9 = stablehlo.xor %arg0, %arg1 : tensor<4x8xi32>
    return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>, tensor<4x8xi32>
  }
}
