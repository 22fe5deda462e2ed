module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xui32>, %arg1: tensor<2xui64>) -> (tensor<4xui32> {jax.result_info = "result[0][0]"}, tensor<5x7xui32> {jax.result_info = "result[0][1]"}, tensor<4xui32> {jax.result_info = "result[1][0]"}, tensor<3xui8> {jax.result_info = "result[1][1]"}, tensor<2xui64> {jax.result_info = "result[2][0]"}, tensor<2x3xui64> {jax.result_info = "result[2][1]"}, tensor<2xui64> {jax.result_info = "result[3][0]"}, tensor<ui16> {jax.result_info = "result[3][1]"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<4xui32>) -> tensor<2x2xui32>
    %1 = stablehlo.bitcast_convert %0 : (tensor<2x2xui32>) -> tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %1, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<5x7xui32>)
    %2 = stablehlo.bitcast_convert %output_state : (tensor<2xui64>) -> tensor<2x2xui32>
    %3 = stablehlo.reshape %2 : (tensor<2x2xui32>) -> tensor<4xui32>
    %4 = stablehlo.reshape %arg0 : (tensor<4xui32>) -> tensor<2x2xui32>
    %5 = stablehlo.bitcast_convert %4 : (tensor<2x2xui32>) -> tensor<2xui64>
    %output_state_0, %output_1 = stablehlo.rng_bit_generator %5, algorithm = PHILOX : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui8>)
    %6 = stablehlo.bitcast_convert %output_state_0 : (tensor<2xui64>) -> tensor<2x2xui32>
    %7 = stablehlo.reshape %6 : (tensor<2x2xui32>) -> tensor<4xui32>
    %output_state_2, %output_3 = stablehlo.rng_bit_generator %arg1, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2x3xui64>)
    %output_state_4, %output_5 = stablehlo.rng_bit_generator %arg1, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<ui16>)
    return %3, %output, %7, %output_1, %output_state_2, %output_3, %output_state_4, %output_5 : tensor<4xui32>, tensor<5x7xui32>, tensor<4xui32>, tensor<3xui8>, tensor<2xui64>, tensor<2x3xui64>, tensor<2xui64>, tensor<ui16>
  }
}
