module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<20xf32>, %arg1: tensor<16xf32>, %arg2: tensor<8xf32>, %arg3: tensor<8xf32>) -> (tensor<20xf32> {jax.result_info = "result[0]"}, tensor<20xf32> {jax.result_info = "result[1]"}, tensor<16xf32> {jax.result_info = "result[2]"}, tensor<8xf32> {jax.result_info = "result[3]"}, tensor<20xf64> {jax.result_info = "result[4]"}, tensor<16xf64> {jax.result_info = "result[5]"}, tensor<20xbf16> {jax.result_info = "result[6]"}) {
    %0 = chlo.lgamma %arg0 : tensor<20xf32> -> tensor<20xf32>
    %1 = chlo.digamma %arg0 : tensor<20xf32> -> tensor<20xf32>
    %2 = chlo.erf_inv %arg1 : tensor<16xf32> -> tensor<16xf32>
    %3 = chlo.next_after %arg2, %arg3 : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    %4 = stablehlo.convert %arg0 : (tensor<20xf32>) -> tensor<20xf64>
    %5 = chlo.lgamma %4 : tensor<20xf64> -> tensor<20xf64>
    %6 = stablehlo.convert %arg1 : (tensor<16xf32>) -> tensor<16xf64>
    %7 = chlo.erf_inv %6 : tensor<16xf64> -> tensor<16xf64>
    %8 = stablehlo.convert %arg0 : (tensor<20xf32>) -> tensor<20xbf16>
    %9 = chlo.digamma %8 : tensor<20xbf16> -> tensor<20xbf16>
    return %0, %1, %2, %3, %5, %7, %9 : tensor<20xf32>, tensor<20xf32>, tensor<16xf32>, tensor<8xf32>, tensor<20xf64>, tensor<16xf64>, tensor<20xbf16>
  }
}
