module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<4x8xi1>) -> (tensor<4xf32> {jax.result_info = "result[0]"}, tensor<8xf32> {jax.result_info = "result[1]"}, tensor<f32> {jax.result_info = "result[2]"}, tensor<4xf32> {jax.result_info = "result[3]"}, tensor<4xi1> {jax.result_info = "result[4]"}, tensor<8xi1> {jax.result_info = "result[5]"}, tensor<8xi64> {jax.result_info = "result[6]"}, tensor<4xf32> {jax.result_info = "result[7]"}, tensor<8xf32> {jax.result_info = "result[8]"}, tensor<4xf32> {jax.result_info = "result[9]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.reduce(%arg0 init: %cst_0) applies stablehlo.maximum across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    %cst_1 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %2 = stablehlo.reduce(%arg0 init: %cst_1) applies stablehlo.minimum across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %3 = stablehlo.reduce(%arg0 init: %cst_2) applies stablehlo.multiply across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %c = stablehlo.constant dense<true> : tensor<i1>
    %4 = stablehlo.reduce(%arg2 init: %c) applies stablehlo.and across dimensions = [1] : (tensor<4x8xi1>, tensor<i1>) -> tensor<4xi1>
    %c_3 = stablehlo.constant dense<false> : tensor<i1>
    %5 = stablehlo.reduce(%arg2 init: %c_3) applies stablehlo.or across dimensions = [0] : (tensor<4x8xi1>, tensor<i1>) -> tensor<8xi1>
    %6 = stablehlo.convert %arg1 : (tensor<4x8xi32>) -> tensor<4x8xi64>
    %c_4 = stablehlo.constant dense<0> : tensor<i64>
    %7 = stablehlo.reduce(%6 init: %c_4) applies stablehlo.add across dimensions = [0] : (tensor<4x8xi64>, tensor<i64>) -> tensor<8xi64>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.reduce(%arg0 init: %cst_5) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %cst_6 = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %10 = stablehlo.divide %8, %9 : tensor<4xf32>
    %cst_7 = stablehlo.constant dense<1.500000e+00> : tensor<f32>
    %11 = stablehlo.reduce(%arg0 init: %cst_7) applies stablehlo.add across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    %cst_8 = stablehlo.constant dense<2.500000e-01> : tensor<f32>
    %12 = stablehlo.reduce(%arg0 init: %cst_8) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    return %0, %1, %2, %3, %4, %5, %7, %10, %11, %12 : tensor<4xf32>, tensor<8xf32>, tensor<f32>, tensor<4xf32>, tensor<4xi1>, tensor<8xi1>, tensor<8xi64>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>
  }
}
