module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<2x8xf32> {jax.result_info = "result[0]"}, tensor<2x2xf32> {jax.result_info = "result[1]"}, tensor<8xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.slice %arg0 [1:3, 0:8] : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %1 = stablehlo.slice %arg0 [0:4:2, 1:7:3] : (tensor<4x8xf32>) -> tensor<2x2xf32>
    %2 = stablehlo.slice %arg0 [3:4, 0:8] : (tensor<4x8xf32>) -> tensor<1x8xf32>
    %3 = stablehlo.reshape %2 : (tensor<1x8xf32>) -> tensor<8xf32>
    return %0, %1, %3 : tensor<2x8xf32>, tensor<2x2xf32>, tensor<8xf32>
  }
}
