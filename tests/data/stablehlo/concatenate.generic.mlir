"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x24xf32>, tensor<8x8xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>):
    %0 = "stablehlo.concatenate"(%arg0, %arg1, %arg0) <{dimension = 1 : i64}> : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x24xf32>
    %1 = "stablehlo.concatenate"(%arg0, %arg1) <{dimension = 0 : i64}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    "func.return"(%0, %1) : (tensor<4x24xf32>, tensor<8x8xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
