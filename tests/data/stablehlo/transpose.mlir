module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<8x4xf32> {jax.result_info = "result[0]"}, tensor<8x2x2xf32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
    %2 = stablehlo.transpose %1, dims = [2, 0, 1] : (tensor<2x2x8xf32>) -> tensor<8x2x2xf32>
    return %0, %2 : tensor<8x4xf32>, tensor<8x2x2xf32>
  }
}
