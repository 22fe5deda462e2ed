module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<i32>) -> (tensor<4x8xf32> {jax.result_info = "result[0]"}, tensor<4x8xf32> {jax.result_info = "result[1]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg2, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %1 = stablehlo.add %arg2, %c_0 : tensor<i32>
    %2 = stablehlo.select %0, %1, %arg2 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<2> : tensor<i32>
    %3 = stablehlo.dynamic_update_slice %arg0, %arg1, %2, %c_1 : (tensor<4x8xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    %c_2 = stablehlo.constant dense<7> : tensor<i32>
    %4 = stablehlo.add %arg2, %c_2 : tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.compare LT, %4, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_4 = stablehlo.constant dense<8> : tensor<i32>
    %6 = stablehlo.add %4, %c_4 : tensor<i32>
    %7 = stablehlo.select %5, %6, %4 : tensor<i1>, tensor<i32>
    %c_5 = stablehlo.constant dense<3> : tensor<i32>
    %8 = stablehlo.dynamic_update_slice %arg0, %arg1, %c_5, %7 : (tensor<4x8xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    return %3, %8 : tensor<4x8xf32>, tensor<4x8xf32>
  }
}
