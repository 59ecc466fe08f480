// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Launch order of the tile kernels' CTAs over (work tile, head). CTAs start in linear
// block order, so the order decides which tiles run together and which run last.
// Under a causal mask the tiles differ in work by up to the sequence length over the
// tile: the last query tile of the forward, and the first key tile of the backward,
// see every key (query). Walking one head's tiles heaviest first and the heads one
// after another leaves the heaviest tiles of the last heads to start near the end,
// and the kernel ends on them; walking every head's heaviest tile first scatters
// the CTAs that run together over every head's K/V (or Q/dO), beyond L2 at long
// sequences. Groups of a few heads do both: rank by rank within a group, groups one
// after another (NOTES.md round 12 measured the group size per kernel).

namespace DistAttn::Impl::cuda::detail {

/// The work tile (rank 0 = the first launched, the kernel maps it to its heaviest
/// tile) and the head of CTA `lin` of a grid of n_tiles x heads, in groups of
/// `group` consecutive heads (the last group may be smaller).
struct GroupedTile {
  int rank;
  int head;
};

__device__ __forceinline__ GroupedTile grouped_tile(int lin, int n_tiles, int heads, int group) {
  const int first = lin / (group * n_tiles) * group;  // first head of lin's group
  const int size  = min(group, heads - first);
  const int in    = lin - first * n_tiles;
  return GroupedTile{in / size, first + in % size};
}

}  // namespace DistAttn::Impl::cuda::detail
