"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>) -> (tensor<7x11xf32>, tensor<7x21xf32>, tensor<8x10xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg4: tensor<4x8xf32>):
    %4 = "stablehlo.constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
    %5 = "func.call"(%arg4, %4) <{callee = @_pad}> : (tensor<4x8xf32>, tensor<i64>) -> tensor<7x11xf32>
    %6 = "stablehlo.constant"() <{value = dense<-1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %7 = "stablehlo.pad"(%arg4, %6) <{edge_padding_high = array<i64: 0, 1>, edge_padding_low = array<i64: 0, -2>, interior_padding = array<i64: 1, 2>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<7x21xf32>
    %8 = "stablehlo.constant"() <{value = dense<3.500000e+00> : tensor<f64>}> : () -> tensor<f64>
    %9 = "func.call"(%arg4, %8) <{callee = @_pad_0}> : (tensor<4x8xf32>, tensor<f64>) -> tensor<8x10xf32>
    "func.return"(%5, %7, %9) : (tensor<7x11xf32>, tensor<7x21xf32>, tensor<8x10xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<i64>) -> tensor<7x11xf32>, sym_name = "_pad", sym_visibility = "private"}> ({
  ^bb0(%arg2: tensor<4x8xf32>, %arg3: tensor<i64>):
    %2 = "stablehlo.convert"(%arg3) : (tensor<i64>) -> tensor<f32>
    %3 = "stablehlo.pad"(%arg2, %2) <{edge_padding_high = array<i64: 2, 3>, edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<7x11xf32>
    "func.return"(%3) : (tensor<7x11xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<f64>) -> tensor<8x10xf32>, sym_name = "_pad_0", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<f64>):
    %0 = "stablehlo.convert"(%arg1) : (tensor<f64>) -> tensor<f32>
    %1 = "stablehlo.pad"(%arg0, %0) <{edge_padding_high = array<i64: 2, 1>, edge_padding_low = array<i64: 2, 1>, interior_padding = array<i64: 0, 0>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<8x10xf32>
    "func.return"(%1) : (tensor<8x10xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
