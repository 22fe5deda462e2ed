module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8xf32>, %arg1: tensor<8xf32>) -> (tensor<8xf32> {jax.result_info = "result[0]"}, tensor<8xf32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.complex %arg0, %arg1 : tensor<8xcomplex<f32>>
    %1 = call @fft(%0) : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
    %2 = stablehlo.real %1 : (tensor<8xcomplex<f32>>) -> tensor<8xf32>
    %3 = stablehlo.complex %arg0, %arg1 : tensor<8xcomplex<f32>>
    %4 = call @fft_0(%3) : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
    %5 = stablehlo.imag %4 : (tensor<8xcomplex<f32>>) -> tensor<8xf32>
    return %2, %5 : tensor<8xf32>, tensor<8xf32>
  }
  func.func private @fft(%arg0: tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>> {
    %0 = stablehlo.fft %arg0, type = FFT, length = [8] : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
    return %0 : tensor<8xcomplex<f32>>
  }
  func.func private @fft_0(%arg0: tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>> {
    %0 = stablehlo.fft %arg0, type = IFFT, length = [8] : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
    return %0 : tensor<8xcomplex<f32>>
  }
}
