func.func @main(%arg0: tensor<6x4xf32>) -> (tensor<6x4x!quant.uniform<i8:f32, 0.125:-3>>, tensor<6x4x!quant.uniform<i8<-127:127>:f32:1, {0.25:0, 0.5:3, 0.125:-2, 1.0:1}>>, tensor<6x4x!quant.uniform<u8<16:240>:f32, 0.0625:128>>, tensor<6x4xf32>, tensor<6x4x!quant.uniform<i8:f32, 0.5:1>>) {

  %0 = stablehlo.uniform_quantize %arg0 : (tensor<6x4xf32>) -> tensor<6x4x!quant.uniform<i8:f32, 0.125:-3>>
  %1 = stablehlo.uniform_quantize %arg0 : (tensor<6x4xf32>) -> tensor<6x4x!quant.uniform<i8<-127:127>:f32:1, {0.25:0, 0.5:3, 0.125:-2, 1.0:1}>>
  %2 = stablehlo.uniform_quantize %arg0 : (tensor<6x4xf32>) -> tensor<6x4x!quant.uniform<u8<16:240>:f32, 0.0625:128>>
  %3 = stablehlo.uniform_dequantize %0 : (tensor<6x4x!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<6x4xf32>
  %4 = stablehlo.uniform_quantize %1 : (tensor<6x4x!quant.uniform<i8<-127:127>:f32:1, {0.25:0, 0.5:3, 0.125:-2, 1.0:1}>>) -> tensor<6x4x!quant.uniform<i8:f32, 0.5:1>>
  return %0, %1, %2, %3, %4 : tensor<6x4x!quant.uniform<i8:f32, 0.125:-3>>, tensor<6x4x!quant.uniform<i8<-127:127>:f32:1, {0.25:0, 0.5:3, 0.125:-2, 1.0:1}>>, tensor<6x4x!quant.uniform<u8<16:240>:f32, 0.0625:128>>, tensor<6x4xf32>, tensor<6x4x!quant.uniform<i8:f32, 0.5:1>>
}
