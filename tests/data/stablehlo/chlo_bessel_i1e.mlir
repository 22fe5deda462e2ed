module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32>, %arg1: tensor<8xf64>) -> (tensor<16xf32> {jax.result_info = "result[0]"}, tensor<8xf64> {jax.result_info = "result[1]"}) {
    %0 = chlo.bessel_i1e %arg0 : tensor<16xf32> -> tensor<16xf32>
    %1 = chlo.bessel_i1e %arg1 : tensor<8xf64> -> tensor<8xf64>
    return %0, %1 : tensor<16xf32>, tensor<8xf64>
  }
}
