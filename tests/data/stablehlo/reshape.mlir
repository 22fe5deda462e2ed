module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<2x16xf32> {jax.result_info = "result[0]"}, tensor<32xf32> {jax.result_info = "result[1]"}, tensor<4x2x4xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<2x16xf32>
    %1 = stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<32xf32>
    %2 = stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<4x2x4xf32>
    return %0, %1, %2 : tensor<2x16xf32>, tensor<32xf32>, tensor<4x2x4xf32>
  }
}
