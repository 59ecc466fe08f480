#pragma once
/// @file DistAttn.hpp
/// Umbrella header: everything a user of the library needs.

#include <DistAttn/config.hpp>
#include <DistAttn/core/configuration.hpp>
#include <DistAttn/core/error.hpp>
#include <DistAttn/core/types.hpp>
#include <DistAttn/attention.hpp>
#include <DistAttn/attention_bwd_prepare.hpp>
#if DISTATTN_ENABLE_MPI
#include <DistAttn/comm.hpp>
#endif
