"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xi1>) -> (tensor<4xf32>, tensor<8xf32>, tensor<f32>, tensor<4xf32>, tensor<4xi1>, tensor<8xi1>, tensor<8xi64>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}, {jax.result_info = "result[4]"}, {jax.result_info = "result[5]"}, {jax.result_info = "result[6]"}, {jax.result_info = "result[7]"}, {jax.result_info = "result[8]"}, {jax.result_info = "result[9]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<4x8xi1>):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.reduce"(%arg0, %0) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg21: tensor<f32>, %arg22: tensor<f32>):
      %33 = "stablehlo.add"(%arg21, %arg22) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%33) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %2 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %3 = "stablehlo.reduce"(%arg0, %2) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg19: tensor<f32>, %arg20: tensor<f32>):
      %32 = "stablehlo.maximum"(%arg19, %arg20) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%32) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    %4 = "stablehlo.constant"() <{value = dense<0x7F800000> : tensor<f32>}> : () -> tensor<f32>
    %5 = "stablehlo.reduce"(%arg0, %4) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%arg17: tensor<f32>, %arg18: tensor<f32>):
      %31 = "stablehlo.minimum"(%arg17, %arg18) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%31) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
    %6 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %7 = "stablehlo.reduce"(%arg0, %6) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg15: tensor<f32>, %arg16: tensor<f32>):
      %30 = "stablehlo.multiply"(%arg15, %arg16) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%30) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %8 = "stablehlo.constant"() <{value = dense<true> : tensor<i1>}> : () -> tensor<i1>
    %9 = "stablehlo.reduce"(%arg2, %8) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg13: tensor<i1>, %arg14: tensor<i1>):
      %29 = "stablehlo.and"(%arg13, %arg14) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      "stablehlo.return"(%29) : (tensor<i1>) -> ()
    }) : (tensor<4x8xi1>, tensor<i1>) -> tensor<4xi1>
    %10 = "stablehlo.constant"() <{value = dense<false> : tensor<i1>}> : () -> tensor<i1>
    %11 = "stablehlo.reduce"(%arg2, %10) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg11: tensor<i1>, %arg12: tensor<i1>):
      %28 = "stablehlo.or"(%arg11, %arg12) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      "stablehlo.return"(%28) : (tensor<i1>) -> ()
    }) : (tensor<4x8xi1>, tensor<i1>) -> tensor<8xi1>
    %12 = "stablehlo.convert"(%arg1) : (tensor<4x8xi32>) -> tensor<4x8xi64>
    %13 = "stablehlo.constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
    %14 = "stablehlo.reduce"(%12, %13) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg9: tensor<i64>, %arg10: tensor<i64>):
      %27 = "stablehlo.add"(%arg9, %arg10) : (tensor<i64>, tensor<i64>) -> tensor<i64>
      "stablehlo.return"(%27) : (tensor<i64>) -> ()
    }) : (tensor<4x8xi64>, tensor<i64>) -> tensor<8xi64>
    %15 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %16 = "stablehlo.reduce"(%arg0, %15) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg7: tensor<f32>, %arg8: tensor<f32>):
      %26 = "stablehlo.add"(%arg7, %arg8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%26) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %17 = "stablehlo.constant"() <{value = dense<8.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %18 = "stablehlo.broadcast_in_dim"(%17) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4xf32>
    %19 = "stablehlo.divide"(%16, %18) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %20 = "stablehlo.constant"() <{value = dense<1.500000e+00> : tensor<f32>}> : () -> tensor<f32>
    %21 = "stablehlo.reduce"(%arg0, %20) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %25 = "stablehlo.add"(%arg5, %arg6) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%25) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    %22 = "stablehlo.constant"() <{value = dense<2.500000e-01> : tensor<f32>}> : () -> tensor<f32>
    %23 = "stablehlo.reduce"(%arg0, %22) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
      %24 = "stablehlo.maximum"(%arg3, %arg4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%24) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    "func.return"(%1, %3, %5, %7, %9, %11, %14, %19, %21, %23) : (tensor<4xf32>, tensor<8xf32>, tensor<f32>, tensor<4xf32>, tensor<4xi1>, tensor<8xi1>, tensor<8xi64>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
