module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xbf16>, %arg1: tensor<4x8xf16>) -> (tensor<4x8xbf16> {jax.result_info = "result[0]"}, tensor<4x8xf16> {jax.result_info = "result[1]"}, tensor<4x8xbf16> {jax.result_info = "result[2]"}, tensor<4x8xf16> {jax.result_info = "result[3]"}) {
    %0 = stablehlo.tanh %arg0 : tensor<4x8xbf16>
    %1 = stablehlo.exponential %arg1 : tensor<4x8xf16>
    %2 = stablehlo.multiply %arg0, %arg0 : tensor<4x8xbf16>
    %3 = stablehlo.add %arg1, %arg1 : tensor<4x8xf16>
    return %0, %1, %2, %3 : tensor<4x8xbf16>, tensor<4x8xf16>, tensor<4x8xbf16>, tensor<4x8xf16>
  }
}
