module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<40xf16>, %arg1: tensor<60xbf16>) -> (tensor<40xf16> {jax.result_info = "result[0]"}, tensor<60xbf16> {jax.result_info = "result[1]"}) {
    %0 = chlo.erfc %arg0 : tensor<40xf16> -> tensor<40xf16>
    %1 = chlo.erfc %arg1 : tensor<60xbf16> -> tensor<60xbf16>
    return %0, %1 : tensor<40xf16>, tensor<60xbf16>
  }
}
