"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg2: tensor<4x8xf32>):
    %2 = "func.call"(%arg2) <{callee = @_flip}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = "func.call"(%arg2) <{callee = @_flip_0}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "func.return"(%2, %3) : (tensor<4x8xf32>, tensor<4x8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>) -> tensor<4x8xf32>, sym_name = "_flip", sym_visibility = "private"}> ({
  ^bb0(%arg1: tensor<4x8xf32>):
    %1 = "stablehlo.reverse"(%arg1) <{dimensions = array<i64: 0>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "func.return"(%1) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>) -> tensor<4x8xf32>, sym_name = "_flip_0", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<4x8xf32>):
    %0 = "stablehlo.reverse"(%arg0) <{dimensions = array<i64: 0, 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "func.return"(%0) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
