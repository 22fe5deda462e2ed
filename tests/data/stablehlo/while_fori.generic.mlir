"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>) -> tensor<4x8xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg2: tensor<4x8xf32>):
    %8 = "stablehlo.constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
    %9 = "stablehlo.constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
    %10:3 = "stablehlo.while"(%9, %8, %arg2) ({
    ^bb0(%arg6: tensor<i64>, %arg7: tensor<i64>, %arg8: tensor<4x8xf32>):
      %14 = "stablehlo.constant"() <{value = dense<3> : tensor<i64>}> : () -> tensor<i64>
      %15 = "stablehlo.compare"(%arg6, %14) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i64>, tensor<i64>) -> tensor<i1>
      "stablehlo.return"(%15) : (tensor<i1>) -> ()
    }, {
    ^bb0(%arg3: tensor<i64>, %arg4: tensor<i64>, %arg5: tensor<4x8xf32>):
      %11:2 = "func.call"(%arg4, %arg5) <{callee = @closed_call}> : (tensor<i64>, tensor<4x8xf32>) -> (tensor<i64>, tensor<4x8xf32>)
      %12 = "stablehlo.constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
      %13 = "stablehlo.add"(%arg3, %12) : (tensor<i64>, tensor<i64>) -> tensor<i64>
      "stablehlo.return"(%13, %11#0, %11#1) : (tensor<i64>, tensor<i64>, tensor<4x8xf32>) -> ()
    }) : (tensor<i64>, tensor<i64>, tensor<4x8xf32>) -> (tensor<i64>, tensor<i64>, tensor<4x8xf32>)
    "func.return"(%10#2) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<i64>, tensor<4x8xf32>) -> (tensor<i64>, tensor<4x8xf32>), sym_name = "closed_call", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<i64>, %arg1: tensor<4x8xf32>):
    %0 = "stablehlo.constant"() <{value = dense<1> : tensor<i64>}> : () -> tensor<i64>
    %1 = "stablehlo.add"(%arg0, %0) : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %2 = "stablehlo.constant"() <{value = dense<1.500000e+00> : tensor<f32>}> : () -> tensor<f32>
    %3 = "stablehlo.broadcast_in_dim"(%2) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x8xf32>
    %4 = "stablehlo.multiply"(%arg1, %3) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %5 = "stablehlo.convert"(%arg0) : (tensor<i64>) -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x8xf32>
    %7 = "stablehlo.add"(%4, %6) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "func.return"(%1, %7) : (tensor<i64>, tensor<4x8xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
