module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> (tensor<3x4xi32> {jax.result_info = "result[0]"}, tensor<3x4xf32> {jax.result_info = "result[1]"}, tensor<2x3x2xi64> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.iota dim = 0 : tensor<12xi32>
    %1 = stablehlo.reshape %0 : (tensor<12xi32>) -> tensor<3x4xi32>
    %2 = stablehlo.iota dim = 1 : tensor<3x4xf32>
    %3 = stablehlo.iota dim = 2 : tensor<2x3x2xi64>
    return %1, %2, %3 : tensor<3x4xi32>, tensor<3x4xf32>, tensor<2x3x2xi64>
  }
}
