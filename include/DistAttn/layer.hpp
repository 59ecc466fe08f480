// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file layer.hpp
/// Umbrella header of the decoder layer (docs/design/decoder_layer.md):
/// DecoderConfig, CheckpointPolicy, LayerWeights, DecoderLayer, DecoderStack and
/// the linear/RMSNorm/RoPE/SwiGLU parts they are built from.

#include <DistAttn/layer/decoder_stack.hpp>
