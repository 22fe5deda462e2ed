"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<2x2xf32>, tensor<8xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>):
    %0 = "stablehlo.slice"(%arg0) <{limit_indices = array<i64: 3, 8>, start_indices = array<i64: 1, 0>, strides = array<i64: 1, 1>}> : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %1 = "stablehlo.slice"(%arg0) <{limit_indices = array<i64: 4, 7>, start_indices = array<i64: 0, 1>, strides = array<i64: 2, 3>}> : (tensor<4x8xf32>) -> tensor<2x2xf32>
    %2 = "stablehlo.slice"(%arg0) <{limit_indices = array<i64: 4, 8>, start_indices = array<i64: 3, 0>, strides = array<i64: 1, 1>}> : (tensor<4x8xf32>) -> tensor<1x8xf32>
    %3 = "stablehlo.reshape"(%2) : (tensor<1x8xf32>) -> tensor<8xf32>
    "func.return"(%0, %1, %3) : (tensor<2x8xf32>, tensor<2x2xf32>, tensor<8xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
