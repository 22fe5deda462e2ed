module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<8xi32>) -> (tensor<4x8xi32> {jax.result_info = "result[0]"}, tensor<8xf32> {jax.result_info = "result[1]"}, tensor<4x8xui32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.bitcast_convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xi32>
    %1 = stablehlo.bitcast_convert %arg1 : (tensor<8xi32>) -> tensor<8xf32>
    %2 = stablehlo.bitcast_convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xui32>
    return %0, %1, %2 : tensor<4x8xi32>, tensor<8xf32>, tensor<4x8xui32>
  }
}
