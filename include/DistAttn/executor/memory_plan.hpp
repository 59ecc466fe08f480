// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// @file executor/memory_plan.hpp
/// What an executor's passes allocate, known before they allocate it.
///
/// An executor lays every buffer a pass uses out in one workspace (Impl::Workspace):
/// a single allocation, carved into Views at 256-byte aligned offsets. The same
/// allocation serves forward and backward (each pass re-initialises what it reads),
/// so an executor holds max(forward, backward) bytes, and a pass of a shape seen
/// before allocates nothing. The MemoryPlan is that layout, so it equals what Kokkos
/// allocates byte for byte (tested through the allocation hook,
/// impl/allocation_counter.hpp).
///
/// Before a pass grows the workspace, every rank compares the growth with the memory
/// it may use (check_fits) inside the entry agreement, so a plan that does not fit
/// fails on every rank together, before anything is allocated.

#include <DistAttn/core/error.hpp>
#include <DistAttn/core/kokkos_compat.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace DistAttn {

/// One pass's workspace: named buffers at their offsets. Buffers of phases that
/// never live at the same time may share memory (mark() / rewind()): the
/// workspace is then the end of the furthest buffer, not the sum.
struct MemoryLayout {
  struct Buffer {
    std::string name;
    std::size_t bytes  = 0;  ///< rounded up to the workspace alignment
    std::size_t offset = 0;
  };
  static constexpr std::size_t kAlign = 256;
  std::vector<Buffer> buffers;

  static std::size_t round_up(std::size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
  /// Adds a buffer of `count` elements of `element_bytes` at the cursor; returns its offset.
  std::size_t add(std::string name, std::size_t count, std::size_t element_bytes) {
    const std::size_t off = cursor_;
    if (count > 0) {
      buffers.push_back({std::move(name), round_up(count * element_bytes), off});
      cursor_ += buffers.back().bytes;
      end_ = std::max(end_, cursor_);
    }
    return off;
  }
  /// Where the next buffer goes; rewind(mark()) lets a later phase reuse what
  /// the buffers added since the mark occupied.
  std::size_t mark() const { return cursor_; }
  void rewind(std::size_t offset) { cursor_ = offset; }
  /// Moves the cursor past every buffer (after a rewound phase).
  void to_end() { cursor_ = end_; }
  /// `other`'s buffers after all of ours (a separate allocation listed with this one).
  void append(const MemoryLayout& other) {
    for (const auto& b : other.buffers) buffers.push_back({b.name, b.bytes, end_ + b.offset});
    end_ += other.end_;
    cursor_ = end_;
  }
  std::size_t total() const { return end_; }

 private:
  std::size_t cursor_ = 0, end_ = 0;
};

/// The workspace of an executor for given extents: forward's and backward's
/// layouts; the executor holds the larger.
struct MemoryPlan {
  MemoryLayout forward, backward;
  std::size_t forward_bytes() const { return forward.total(); }
  std::size_t backward_bytes() const { return backward.total(); }
  std::size_t peak_bytes() const { return std::max(forward_bytes(), backward_bytes()); }
};

namespace Impl {

/// A memory size in bytes as written in DISTATTN_MEMORY_LIMIT (`name`): an integer
/// ("4096"), a decimal number ("1e9", "2.5e3"), or either with a unit: K, M, G, T,
/// alone or as KiB ... TiB, are powers of 1024; KB, MB, GB, TB powers of 1000; B is
/// one byte (GNU coreutils' convention; case-insensitive). A fraction of a byte is
/// dropped. Anything else, less than one byte or more than size_t holds throws
/// InvalidArgument naming the variable and the value.
inline std::size_t parse_memory_size(const std::string& text, const char* name) {
  auto fail = [&](const char* why) {
    std::ostringstream os;
    os << "environment variable " << name << "='" << text << "' " << why
       << ": give bytes as an integer or decimal number (4096, 1e9) with an optional unit K, M, G, T or "
          "KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g. 512MiB or 1G; "
          "unset it for no limit";
    throw_invalid_argument("DistAttn::memory_limit", os.str());
  };
  auto digit = [&](std::size_t i) { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  std::size_t i = 0;
  while (digit(i)) ++i;
  const std::size_t int_end = i;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (digit(i)) ++i;
  }
  if (i == 0 || (i == 1 && text[0] == '.')) fail("is not a memory size");
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    if (!digit(j)) fail("is not a memory size");
    while (digit(j)) ++j;
    i = j;
  }
  std::string unit = text.substr(i);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  const std::string prefixes = "KMGT";
  std::uint64_t base = 1, power = 0;
  if (!unit.empty() && unit != "B") {
    const auto p = prefixes.find(unit[0]);
    const std::string rest = unit.substr(1);
    if (p == std::string::npos || !(rest.empty() || rest == "B" || rest == "IB")) fail("has an unknown unit");
    base  = rest == "B" ? 1000 : 1024;
    power = p + 1;
  }
  const std::string number = text.substr(0, i);
  if (int_end == i) {  // an integer: exact
    errno = 0;
    const unsigned long long n = std::strtoull(number.c_str(), nullptr, 10);
    if (errno == ERANGE) fail("is too large");
    std::uint64_t v = n;
    for (std::uint64_t k = 0; k < power; ++k) {
      if (v > std::numeric_limits<std::uint64_t>::max() / base) fail("is too large");
      v *= base;
    }
    if (v == 0) fail("is less than one byte");
    if (v > std::numeric_limits<std::size_t>::max()) fail("is too large");
    return std::size_t(v);
  }
  long double bytes = std::strtold(number.c_str(), nullptr);
  for (std::uint64_t k = 0; k < power; ++k) bytes *= (long double)(base);
  if (!(bytes < (long double)(std::numeric_limits<std::size_t>::max()))) fail("is too large");
  if (bytes < 1) fail("is less than one byte");
  return std::size_t(bytes);
}

/// `limit` when non-zero, else DISTATTN_MEMORY_LIMIT (parse_memory_size) when set
/// and not empty, else 0 (none).
inline std::size_t memory_limit(std::size_t limit) {
  if (limit == 0)
    if (const char* env = std::getenv("DISTATTN_MEMORY_LIMIT"); env != nullptr && *env != 0)
      limit = parse_memory_size(env, "DISTATTN_MEMORY_LIMIT");
  return limit;
}

/// The bytes an executor's workspace may occupy on this rank: the device's free
/// memory plus what the workspace already holds (it is released before it
/// grows), capped by `limit` when non-zero, else by the environment variable
/// DISTATTN_MEMORY_LIMIT (bytes) when set. Host backends have no free-memory
/// query: without a limit they are unbounded.
template <class Mem>
std::size_t usable_bytes(std::size_t held, std::size_t limit) {
  std::size_t usable = compat::free_memory_bytes<Mem>();
  if (usable != compat::kUnknownFreeMemory) usable += held;
  limit = memory_limit(limit);
  if (limit != 0) usable = std::min(usable, limit);
  return usable;
}

inline std::string gib(std::size_t b) {
  std::ostringstream os;
  os.precision(3);
  os << double(b) / double(std::size_t(1) << 30) << " GiB (" << b << " bytes)";
  return os.str();
}

/// Throws InvalidArgument (inside EntryAgreement, so on every rank) when a pass
/// needing `need` bytes of workspace does not fit in `usable`. `bytes_per_token`
/// and `granule` (tokens per rank must be a multiple of it) give the largest
/// per-rank chunk that fits; `ranks` turns it into a global sequence length.
inline void check_fits(const char* where, const char* pass, std::size_t need, std::size_t usable,
                       double bytes_per_token, std::int64_t granule, std::int64_t ranks, const MemoryLayout& layout) {
  if (need <= usable) return;
  std::int64_t fit = bytes_per_token > 0 ? std::int64_t(double(usable) / bytes_per_token) : 0;
  fit              = fit / granule * granule;
  std::ostringstream os;
  os << "not enough memory for the " << pass << " workspace: it needs " << gib(need) << ", " << gib(usable)
     << " is usable on this rank (free device memory or DISTATTN_MEMORY_LIMIT / ExecutorOptions::memory_limit_bytes);"
     << " the largest sequence that fits is about " << fit * ranks << " tokens (" << fit << " per rank). Largest buffers:";
  std::vector<MemoryLayout::Buffer> sorted = layout.buffers;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  for (std::size_t i = 0; i < sorted.size() && i < 3; ++i) os << (i ? ", " : " ") << sorted[i].name << " " << gib(sorted[i].bytes);
  throw_invalid_argument(where, os.str());
}

/// check_fits for a pass whose workspace layout is `layout` while the executor
/// holds `held` bytes: only growth is checked. The plan is linear in the
/// `tokens` each rank holds; `granule` and `ranks` as for check_fits.
template <class Mem>
void check_growth_fits(const char* where, const char* pass, const MemoryLayout& layout, std::size_t held,
                       std::size_t limit, std::int64_t tokens, std::int64_t granule, std::int64_t ranks) {
  if (layout.total() <= held) return;
  check_fits(where, pass, layout.total(), usable_bytes<Mem>(held, limit), double(layout.total()) / double(tokens),
             granule, ranks, layout);
}

/// The kv heads per pass, of those head chunking may choose (the divisors of
/// `kv_heads`; `requested` alone when > 0), whose plan `plan_for(g)` has the least
/// peak, and that plan. Not always one head: a chunked pass copies its heads'
/// slices, which all heads at once read in place.
template <class PlanFor>
std::pair<int, MemoryPlan> leanest_head_group(int kv_heads, int requested, PlanFor&& plan_for) {
  if (requested > 0) return {requested, plan_for(requested)};
  std::pair<int, MemoryPlan> least{kv_heads, plan_for(kv_heads)};
  for (int g = 1; g < kv_heads; ++g)
    if (kv_heads % g == 0) {
      MemoryPlan p = plan_for(g);
      if (p.peak_bytes() < least.second.peak_bytes()) least = {g, std::move(p)};
    }
  return least;
}

/// Head chunking (ExecutorOptions::head_group), inside an entry agreement: the
/// most kv heads per pass (a divisor of `kv_heads`; `requested` alone when > 0)
/// whose layout, `layout_for(g)`, this rank can hold: `held_after(g)`, what the
/// executor would hold after laying it out, within what it holds now (`held`) or
/// may use. When not even the smallest group fits, fails every rank (check_fits;
/// the plan is linear in the `tokens` each rank holds, `granule` and `ranks` as there).
template <class Mem, class LayoutFor, class HeldAfter>
int choose_head_group(const char* where, const char* pass, int kv_heads, int requested, std::size_t held,
                      std::size_t limit, std::int64_t tokens, std::int64_t granule, std::int64_t ranks,
                      LayoutFor&& layout_for, HeldAfter&& held_after) {
  std::vector<int> groups;
  if (requested > 0) groups.push_back(requested);
  for (int g = kv_heads; g >= 1 && requested == 0; --g)
    if (kv_heads % g == 0) groups.push_back(g);
  std::size_t usable = 0;
  bool asked         = false;
  for (int g : groups) {
    const std::size_t after = held_after(g);
    if (after <= held) return g;
    if (!asked) usable = usable_bytes<Mem>(held, limit), asked = true;
    if (after <= usable) return g;
  }
  const MemoryLayout smallest = layout_for(groups.back());
  check_fits(where, pass, held_after(groups.back()), usable, double(smallest.total()) / double(tokens), granule,
             ranks, smallest);
  return groups.back();
}

/// A stand-in element of N bytes: a buffer table instantiated with these plans
/// from sizes alone (its Views are never allocated), as the cost model does.
template <int N>
struct ElementBytes {
  unsigned char bytes[N];
};

/// f(T, Acc) with stand-ins of the element and accumulation sizes of a problem:
/// 16-bit elements accumulate in fp32, fp32 in fp32, fp64 in fp64 (accum_t).
template <class F>
decltype(auto) with_element_sizes(int io_bytes, F&& f) {
  if (io_bytes == 2) return f(ElementBytes<2>{}, ElementBytes<4>{});
  if (io_bytes == 4) return f(ElementBytes<4>{}, ElementBytes<4>{});
  DISTATTN_REQUIRE(io_bytes == 8, "DistAttn::with_element_sizes", "element size " << io_bytes << " is not 2, 4 or 8 bytes");
  return f(ElementBytes<8>{}, ElementBytes<8>{});
}

template <class Mem>
class Carver;

/// One allocation carved into Views by a MemoryLayout. Grows (releasing the old
/// allocation first, so the peak is the new size) only when a layout needs more
/// than it holds; never shrinks.
template <class Mem>
class Workspace {
 public:
  std::size_t held() const { return bytes_.extent(0); }
  void reserve(std::size_t bytes, const char* label) {
    if (bytes <= held()) return;
    bytes_ = Kokkos::View<char*, Mem>();
    bytes_ = Kokkos::View<char*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), bytes);
  }
  /// Lays buffers out with `lay_out(Carver&)` twice: to plan them, then (after
  /// growing to the plan) to point them into this workspace.
  template <class F>
  void carve(const char* label, F&& lay_out) {
    MemoryLayout planned, carved;
    Carver<Mem> plan(planned);
    lay_out(plan);
    reserve(planned.total(), label);
    Carver<Mem> c(carved, this);
    lay_out(c);
  }
  /// A View of type V with the given extents at `offset` bytes (a MemoryLayout offset).
  template <class V, class... Extents>
  V view(std::size_t offset, Extents... extents) const {
    using P = typename V::pointer_type;
    return V(reinterpret_cast<P>(bytes_.data() + offset), extents...);
  }

 private:
  Kokkos::View<char*, Mem> bytes_;
};

/// Lays buffers out one after the other: with only a MemoryLayout it plans, with a
/// Workspace (holding at least the planned bytes) it also points the Views into it.
/// Planning and carving run the same code, so the plan is what is carved.
template <class Mem>
class Carver {
 public:
  explicit Carver(MemoryLayout& layout, const Workspace<Mem>* ws = nullptr) : layout_(layout), ws_(ws) {}
  /// True when Views are pointed into a workspace (false: planning only).
  bool carving() const { return ws_ != nullptr; }
  /// Phases that never live together: mark before the first, rewind(mark) before
  /// each later one, to_end() after the last.
  std::size_t mark() const { return layout_.mark(); }
  void rewind(std::size_t m) { layout_.rewind(m); }
  void to_end() { layout_.to_end(); }
  template <class V, class... E>
  void take(V& v, const char* name, E... extents) {
    const std::size_t count = (std::size_t(1) * ... * std::size_t(extents));
    const std::size_t off   = layout_.add(name, count, sizeof(typename V::value_type));
    if (ws_ != nullptr) v = ws_->template view<V>(off, extents...);
  }
  /// An attention state: acc [B, S, H, D], m and l [B, H, S].
  template <class St>
  void state(St& st, const std::string& name, int B, int S, int H, int D) {
    take(st.acc, (name + ".acc").c_str(), B, S, H, D);
    take(st.m, (name + ".m").c_str(), B, H, S);
    take(st.l, (name + ".l").c_str(), B, H, S);
  }

 private:
  MemoryLayout& layout_;
  const Workspace<Mem>* ws_;
};

/// An executor whose passes share one workspace and which also keeps tensors
/// from forward for backward in an allocation of their own, so that they survive
/// the workspace's growth. Layouts are functions of a Carver.
template <class Mem>
class KeptAndPassWorkspace {
 public:
  KeptAndPassWorkspace(const char* kept_label, const char* pass_label) : kept_label_(kept_label), pass_label_(pass_label) {}
  std::size_t held() const { return kept_.held() + pass_.held(); }
  /// What it would hold after laying out `kept` and `pass` bytes (each allocation only grows).
  std::size_t held_after(std::size_t kept, std::size_t pass) const {
    return std::max(kept_.held(), kept) + std::max(pass_.held(), pass);
  }
  /// The next use() lays the Views out again (the extents changed: another head group).
  void relayout() { carved_ = -1; }
  /// Points the Views at the kept allocation and at the workspace in the layout
  /// of `backward`'s pass (growing either if needed), unless they already are.
  template <class Kept, class Fwd, class Bwd>
  void use(bool backward, Kept&& kept, Fwd&& fwd, Bwd&& bwd) {
    if (carved_ == int(backward)) return;
    kept_.carve(kept_label_, kept);
    backward ? pass_.carve(pass_label_, bwd) : pass_.carve(pass_label_, fwd);
    carved_ = int(backward);
  }
  /// The plan: each pass lists the kept buffers, then its workspace's.
  template <class Kept, class Fwd, class Bwd>
  static MemoryPlan plan(Kept&& kept, Fwd&& fwd, Bwd&& bwd) {
    MemoryPlan plan;
    for (const bool backward : {false, true}) {
      MemoryLayout& l = backward ? plan.backward : plan.forward;
      Carver<Mem> k(l);
      kept(k);
      MemoryLayout pass;
      Carver<Mem> c(pass);
      backward ? bwd(c) : fwd(c);
      l.append(pass);
    }
    return plan;
  }

 private:
  const char *kept_label_, *pass_label_;
  Workspace<Mem> kept_, pass_;
  int carved_ = -1;  // whose layout the Views hold: 0 forward, 1 backward
};

}  // namespace Impl
}  // namespace DistAttn
