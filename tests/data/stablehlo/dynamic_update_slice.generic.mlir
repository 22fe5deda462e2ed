"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<2x3xf32>, tensor<i32>) -> (tensor<4x8xf32>, tensor<4x8xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<i32>):
    %0 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %1 = "stablehlo.compare"(%arg2, %0) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = "stablehlo.constant"() <{value = dense<4> : tensor<i32>}> : () -> tensor<i32>
    %3 = "stablehlo.add"(%arg2, %2) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %4 = "stablehlo.select"(%1, %3, %arg2) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %5 = "stablehlo.constant"() <{value = dense<2> : tensor<i32>}> : () -> tensor<i32>
    %6 = "stablehlo.dynamic_update_slice"(%arg0, %arg1, %4, %5) : (tensor<4x8xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    %7 = "stablehlo.constant"() <{value = dense<7> : tensor<i32>}> : () -> tensor<i32>
    %8 = "stablehlo.add"(%arg2, %7) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %9 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %10 = "stablehlo.compare"(%8, %9) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %11 = "stablehlo.constant"() <{value = dense<8> : tensor<i32>}> : () -> tensor<i32>
    %12 = "stablehlo.add"(%8, %11) : (tensor<i32>, tensor<i32>) -> tensor<i32>
    %13 = "stablehlo.select"(%10, %12, %8) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
    %14 = "stablehlo.constant"() <{value = dense<3> : tensor<i32>}> : () -> tensor<i32>
    %15 = "stablehlo.dynamic_update_slice"(%arg0, %arg1, %14, %13) : (tensor<4x8xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    "func.return"(%6, %15) : (tensor<4x8xf32>, tensor<4x8xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
