// expect: 3 unsupported ops: stablehlo.cholesky
func.func @main(%x: tensor<4x4xf32>, %c: tensor<8xcomplex<f32>>) -> (tensor<4x4xf32>, tensor<8xcomplex<f32>>) {
  %0 = stablehlo.cholesky %x, lower = true : tensor<4x4xf32>
  %1 = "stablehlo.triangular_solve"(%0, %x) <{left_side = true, lower = true, transpose_a = #stablehlo<transpose NO_TRANSPOSE>, unit_diagonal = false}> : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = stablehlo.fft %c, type = FFT, length = [8] : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
  return %1, %2 : tensor<4x4xf32>, tensor<8xcomplex<f32>>
}
