"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<1x200xf32>) -> (tensor<1x200xf32>, tensor<1x200xf32>, tensor<1x200xf32>, tensor<1x200xf32>, tensor<2x2xui8>, tensor<3xi1>, tensor<2xf16>, tensor<2xbf16>, tensor<2xi64>, tensor<1xui64>, tensor<2xf64>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}, {jax.result_info = "result[4]"}, {jax.result_info = "result[5]"}, {jax.result_info = "result[6]"}, {jax.result_info = "result[7]"}, {jax.result_info = "result[8]"}, {jax.result_info = "result[9]"}, {jax.result_info = "result[10]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg3: tensor<1x200xf32>):
    %4 = "stablehlo.constant"() <{value = dense<"0x000000002549123E2549923EB76DDB3E2549123F6EDB363FB76D5B3F0000803F2549923F4992A43F6EDBB63F9224C93FB76DDB3FDBB6ED3F000000409224094025491240B76D1B4049922440DBB62D406EDB3640000040409224494025495240B76D5B4049926440DBB66D406EDB7640000080404992844092248940DBB68D40254992406EDB9640B76D9B400000A0404992A4409224A940DBB6AD402549B2406EDBB640B76DBB400000C0404992C4409224C940DBB6CD402549D2406EDBD640B76DDB400000E0404992E4409224E940DBB6ED402549F2406EDBF640B76DFB400000004125490241499204416EDB064192240941B76D0B41DBB60D410000104125491241499214416EDB164192241941B76D1B41DBB61D410000204125492241499224416EDB264192242941B76D2B41DBB62D410000304125493241499234416EDB364192243941B76D3B41DBB63D410000404125494241499244416EDB464192244941B76D4B41DBB64D410000504125495241499254416EDB564192245941B76D5B41DBB65D410000604125496241499264416EDB664192246941B76D6B41DBB66D410000704125497241499274416EDB764192247941B76D7B41DBB67D41000080419224814125498241B76D834149928441DBB685416EDB8641000088419224894125498A41B76D8B4149928C41DBB68D416EDB8E41000090419224914125499241B76D934149929441DBB695416EDB9641000098419224994125499A41B76D9B4149929C41DBB69D416EDB9E410000A0419224A1412549A241B76DA3414992A441DBB6A5416EDBA6410000A8419224A9412549AA41B76DAB414992AC41DBB6AD416EDBAE410000B0419224B1412549B241B76DB3414992B441DBB6B5416EDBB6410000B8419224B9412549BA41B76DBB414992BC41DBB6BD416EDBBE410000C0419224C1412549C241B76DC3414992C441DBB6C5416EDBC6410000C8419224C9412549CA41B76DCB414992CC41DBB6CD416EDBCE410000D0419224D1412549D241B76DD3414992D441DBB6D5416EDBD6410000D8419224D9412549DA41B76DDB414992DC41DBB6DD416EDBDE410000E0419224E1412549E241B76DE341"> : tensor<200xf32>}> : () -> tensor<200xf32>
    %5 = "stablehlo.constant"() <{value = dense<"0x0100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100000100"> : tensor<200xi1>}> : () -> tensor<200xi1>
    %6 = "stablehlo.constant"() <{value = dense<[[1, 2], [3, 250]]> : tensor<2x2xui8>}> : () -> tensor<2x2xui8>
    %7 = "stablehlo.constant"() <{value = dense<[true, false, true]> : tensor<3xi1>}> : () -> tensor<3xi1>
    %8 = "stablehlo.constant"() <{value = dense<[-1.500000e+00, 2.250000e+00]> : tensor<2xf16>}> : () -> tensor<2xf16>
    %9 = "stablehlo.constant"() <{value = dense<[1.500000e+00, -3.000000e+00]> : tensor<2xbf16>}> : () -> tensor<2xbf16>
    %10 = "stablehlo.constant"() <{value = dense<[1099511627776, -7]> : tensor<2xi64>}> : () -> tensor<2xi64>
    %11 = "stablehlo.constant"() <{value = dense<9223372036854775813> : tensor<1xui64>}> : () -> tensor<1xui64>
    %12 = "stablehlo.constant"() <{value = dense<[1.000000e-01, 1.000000e+300]> : tensor<2xf64>}> : () -> tensor<2xf64>
    %13 = "stablehlo.reshape"(%4) : (tensor<200xf32>) -> tensor<1x200xf32>
    %14 = "stablehlo.add"(%arg3, %13) : (tensor<1x200xf32>, tensor<1x200xf32>) -> tensor<1x200xf32>
    %15 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f64>}> : () -> tensor<f64>
    %16 = "func.call"(%5, %arg3, %15) <{callee = @_where}> : (tensor<200xi1>, tensor<1x200xf32>, tensor<f64>) -> tensor<1x200xf32>
    %17 = "stablehlo.constant"() <{value = dense<0x7FC00000> : tensor<f32>}> : () -> tensor<f32>
    %18 = "stablehlo.broadcast_in_dim"(%17) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x200xf32>
    %19 = "stablehlo.add"(%arg3, %18) : (tensor<1x200xf32>, tensor<1x200xf32>) -> tensor<1x200xf32>
    %20 = "stablehlo.constant"() <{value = dense<0x7F800000> : tensor<f32>}> : () -> tensor<f32>
    %21 = "stablehlo.broadcast_in_dim"(%20) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x200xf32>
    %22 = "stablehlo.multiply"(%arg3, %21) : (tensor<1x200xf32>, tensor<1x200xf32>) -> tensor<1x200xf32>
    "func.return"(%14, %16, %19, %22, %6, %7, %8, %9, %10, %11, %12) : (tensor<1x200xf32>, tensor<1x200xf32>, tensor<1x200xf32>, tensor<1x200xf32>, tensor<2x2xui8>, tensor<3xi1>, tensor<2xf16>, tensor<2xbf16>, tensor<2xi64>, tensor<1xui64>, tensor<2xf64>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<200xi1>, tensor<1x200xf32>, tensor<f64>) -> tensor<1x200xf32>, sym_name = "_where", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<200xi1>, %arg1: tensor<1x200xf32>, %arg2: tensor<f64>):
    %0 = "stablehlo.convert"(%arg2) : (tensor<f64>) -> tensor<f32>
    %1 = "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 1>}> : (tensor<200xi1>) -> tensor<1x200xi1>
    %2 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x200xf32>
    %3 = "stablehlo.select"(%1, %arg1, %2) : (tensor<1x200xi1>, tensor<1x200xf32>, tensor<1x200xf32>) -> tensor<1x200xf32>
    "func.return"(%3) : (tensor<1x200xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
