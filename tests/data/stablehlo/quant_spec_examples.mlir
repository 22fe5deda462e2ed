func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>, tensor<2xf32>, tensor<2x!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>>) {

  %0 = "stablehlo.uniform_quantize"(%arg0) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>
  %1 = "stablehlo.uniform_dequantize"(%arg1) : (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> tensor<2xf32>
  %2 = "stablehlo.uniform_quantize"(%arg1) : (tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>>
  return %0, %1, %2 : tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>, tensor<2xf32>, tensor<2x!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>>
}
