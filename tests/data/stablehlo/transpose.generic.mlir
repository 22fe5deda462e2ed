"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<8x2x2xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>):
    %0 = "stablehlo.transpose"(%arg0) <{permutation = array<i64: 1, 0>}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %1 = "stablehlo.reshape"(%arg0) : (tensor<4x8xf32>) -> tensor<2x2x8xf32>
    %2 = "stablehlo.transpose"(%1) <{permutation = array<i64: 2, 0, 1>}> : (tensor<2x2x8xf32>) -> tensor<8x2x2xf32>
    "func.return"(%0, %2) : (tensor<8x4xf32>, tensor<8x2x2xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
