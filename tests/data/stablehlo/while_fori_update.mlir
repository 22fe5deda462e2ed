module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<1x8xf32>) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
    %c = stablehlo.constant dense<1> : tensor<i64>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %0:4 = stablehlo.while(%iterArg = %arg1, %iterArg_1 = %c_0, %iterArg_2 = %c, %iterArg_3 = %arg0) : tensor<1x8xf32>, tensor<i64>, tensor<i64>, tensor<4x8xf32>
    cond {
      %c_4 = stablehlo.constant dense<3> : tensor<i64>
      %1 = stablehlo.compare LT, %iterArg_1, %c_4, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1:2 = func.call @closed_call(%iterArg, %iterArg_2, %iterArg_3) : (tensor<1x8xf32>, tensor<i64>, tensor<4x8xf32>) -> (tensor<i64>, tensor<4x8xf32>)
      %c_4 = stablehlo.constant dense<1> : tensor<i64>
      %2 = stablehlo.add %iterArg_1, %c_4 : tensor<i64>
      stablehlo.return %iterArg, %2, %1#0, %1#1 : tensor<1x8xf32>, tensor<i64>, tensor<i64>, tensor<4x8xf32>
    }
    return %0#3 : tensor<4x8xf32>
  }
  func.func private @closed_call(%arg0: tensor<1x8xf32>, %arg1: tensor<i64>, %arg2: tensor<4x8xf32>) -> (tensor<i64>, tensor<4x8xf32>) {
    %c = stablehlo.constant dense<1> : tensor<i64>
    %0 = stablehlo.add %arg1, %c : tensor<i64>
    %1 = stablehlo.convert %arg1 : (tensor<i64>) -> tensor<f32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<1x8xf32>
    %3 = stablehlo.multiply %arg0, %2 : tensor<1x8xf32>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %4 = stablehlo.compare LT, %arg1, %c_0, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %5 = stablehlo.convert %arg1 : tensor<i64>
    %c_1 = stablehlo.constant dense<4> : tensor<i64>
    %6 = stablehlo.add %5, %c_1 : tensor<i64>
    %7 = stablehlo.select %4, %6, %arg1 : tensor<i1>, tensor<i64>
    %c_2 = stablehlo.constant dense<0> : tensor<i64>
    %8 = stablehlo.dynamic_update_slice %arg2, %3, %7, %c_2 : (tensor<4x8xf32>, tensor<1x8xf32>, tensor<i64>, tensor<i64>) -> tensor<4x8xf32>
    return %0, %8 : tensor<i64>, tensor<4x8xf32>
  }
}
