"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x3x8xf32>, tensor<5x8xf64>, tensor<2x3xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<8xf32>):
    %0 = "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 0, 2>}> : (tensor<4x8xf32>) -> tensor<4x1x8xf32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<4x1x8xf32>) -> tensor<4x3x8xf32>
    %2 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f64>}> : () -> tensor<f64>
    %3 = "stablehlo.broadcast_in_dim"(%2) <{broadcast_dimensions = array<i64>}> : (tensor<f64>) -> tensor<5x8xf64>
    %4 = "stablehlo.convert"(%arg1) : (tensor<8xf32>) -> tensor<8xf64>
    %5 = "stablehlo.broadcast_in_dim"(%4) <{broadcast_dimensions = array<i64: 1>}> : (tensor<8xf64>) -> tensor<1x8xf64>
    %6 = "stablehlo.broadcast_in_dim"(%5) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<1x8xf64>) -> tensor<5x8xf64>
    %7 = "stablehlo.add"(%6, %3) : (tensor<5x8xf64>, tensor<5x8xf64>) -> tensor<5x8xf64>
    %8 = "stablehlo.constant"() <{value = dense<2.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %9 = "stablehlo.broadcast_in_dim"(%8) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<2x3xf32>
    "func.return"(%1, %7, %9) : (tensor<4x3x8xf32>, tensor<5x8xf64>, tensor<2x3xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
