// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file DistAttn.hpp
/// Umbrella header: everything a user of the library needs (docs/api.md). The
/// distributed executors and the decoder layer need a communication backend, so
/// they come with builds that have MPI (NCCL adds Communicator<NcclSpace, Kokkos::Cuda>).

#include <DistAttn/core/config.hpp>
#include <DistAttn/core/configuration.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/attention.hpp>
#include <DistAttn/attention_bwd_prepare.hpp>
#include <DistAttn/instances.hpp>
#include <DistAttn/schedule/padding.hpp>
#if DISTATTN_ENABLE_MPI
#include <DistAttn/comm.hpp>
#include <DistAttn/registry/any_attention.hpp>
#include <DistAttn/grid2d/cyclic_layout.hpp>
#include <DistAttn/grid2d/grid2d_attention.hpp>
#include <DistAttn/hybrid/hybrid_attention.hpp>
#include <DistAttn/layer.hpp>
#include <DistAttn/ring/ring_attention.hpp>
#include <DistAttn/ulysses/ulysses_attention.hpp>
#endif
