// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file comm.hpp
/// Umbrella header of the communication layer (docs/design/communication.md):
/// Communicator<CommSpace, Exec>, Request<CommSpace>, isend / irecv / sendrecv,
/// all_gather / reduce_scatter_sum / all_reduce_sum / all_to_all / barrier, ProcessGrid2D.

#include <DistAttn/core/config.hpp>

#include <DistAttn/comm/communicator.hpp>
#include <DistAttn/comm/counters.hpp>
#include <DistAttn/core/grid_shape.hpp>
#include <DistAttn/comm/request.hpp>
#include <DistAttn/comm/spaces.hpp>
#include <DistAttn/comm/timeout.hpp>

#include <DistAttn/comm/mpi/collectives.hpp>
#include <DistAttn/comm/mpi/communicator.hpp>
#include <DistAttn/comm/mpi/p2p.hpp>
#include <DistAttn/comm/mpi/request.hpp>

#if DISTATTN_ENABLE_NCCL
#include <DistAttn/comm/nccl/collectives.hpp>
#include <DistAttn/comm/nccl/communicator.hpp>
#include <DistAttn/comm/nccl/p2p.hpp>
#include <DistAttn/comm/nccl/request.hpp>
#endif

#include <DistAttn/comm/process_grid.hpp>
