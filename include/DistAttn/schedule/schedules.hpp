// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file schedules.hpp
/// Umbrella for the communication-free schedule and layout value types (the cost
/// model that prices them is cost/cost_model.hpp, one layer up).

#include <DistAttn/core/mask.hpp>
#include <DistAttn/core/grid_shape.hpp>
#include <DistAttn/schedule/grid2d_layout.hpp>
#include <DistAttn/schedule/grid2d_volume.hpp>
#include <DistAttn/schedule/ring_format.hpp>
#include <DistAttn/schedule/ring_schedule.hpp>
#include <DistAttn/schedule/ring_types.hpp>
#include <DistAttn/schedule/ring_volume.hpp>
#include <DistAttn/schedule/ulysses_volume.hpp>
