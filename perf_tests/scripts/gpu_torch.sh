#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The PyTorch binding on one host with >= 2 GPUs, one call:
#   gpu_torch.sh KOKKOS_ROOT BUILD_DIR OUT_DIR [SEQS...]
# 0. if KOKKOS_ROOT does not exist and KOKKOS_SRC / KK_SRC name Kokkos and Kokkos
#    Kernels source trees, installs them there built with -fPIC (a shared library
#    cannot hold a default static Kokkos, docs/design/c_abi.md; nvcc_wrapper's
#    default_arch is set to sm_90 in KOKKOS_SRC, as the README says);
# 1. builds libdistattn.so (CUDA, NCCL, tuned kernels) in BUILD_DIR unless there;
# 2. the binding's test against torch SDPA on 2 GPUs (test_distattn_torch.py);
# 3. the training-step comparison (train_compare.py): DistAttn vs PyTorch context
#    parallel with cuDNN and flash, at SEQS (default 65536 131072).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u
KROOT=$(realpath -m "$1"); B=$2; OUT=$3; shift 3
SEQS=${*:-65536 131072}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# cmake configure + build + install of one source tree, appended to $OUT/kokkos.log.
build_install() {
  local src=$1 bld=$2; shift 2
  cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$KROOT" \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON "$@" >>"$OUT/kokkos.log" 2>&1 &&
    cmake --build "$bld" -j "$(nproc)" >>"$OUT/kokkos.log" 2>&1 && cmake --install "$bld" >>"$OUT/kokkos.log" 2>&1
}
if [ ! -d "$KROOT" ] && [ -n "${KOKKOS_SRC:-}" ] && [ -n "${KK_SRC:-}" ]; then
  echo "== building Kokkos and Kokkos Kernels with -fPIC into $KROOT" | tee "$OUT/kokkos.log"
  sed -i 's/default_arch="sm_70"/default_arch="sm_90"/' "$KOKKOS_SRC/bin/nvcc_wrapper"
  build_install "$KOKKOS_SRC" "$OUT/build-kokkos" -DCMAKE_CXX_COMPILER="$KOKKOS_SRC/bin/nvcc_wrapper" \
    -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON \
    -DKokkos_ARCH_HOPPER90=ON &&
  build_install "$KK_SRC" "$OUT/build-kk" -DCMAKE_CXX_COMPILER="$KROOT/bin/nvcc_wrapper" -DKokkos_ROOT="$KROOT" \
    -DKokkosKernels_ENABLE_TPL_CUBLAS=ON || { tail -20 "$OUT/kokkos.log"; exit 1; }
fi
if [ ! -e "$B/src/libdistattn.so" ]; then
  echo "== building libdistattn.so in $B" | tee "$OUT/build.log"
  export NVCC_WRAPPER_DEFAULT_ARCH=${NVCC_WRAPPER_DEFAULT_ARCH:-sm_90}
  cmake -S "$SRC" -B "$B" -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$KROOT" -DKokkosKernels_ROOT="$KROOT" \
    -DCMAKE_PREFIX_PATH="$KROOT" -DCMAKE_CXX_COMPILER="$KROOT/bin/nvcc_wrapper" -DBUILD_SHARED_LIBS=ON \
    -DDistAttn_ENABLE_NCCL=ON -DDistAttn_ENABLE_CUDA_KERNELS=ON -DDistAttn_ENABLE_TESTS=OFF \
    -DDistAttn_ENABLE_PERFTESTS=OFF -DDistAttn_ENABLE_DRIVER=OFF >>"$OUT/build.log" 2>&1
  cmake --build "$B" -j "$(nproc)" --target distattn >>"$OUT/build.log" 2>&1
  if [ ! -e "$B/src/libdistattn.so" ]; then
    grep -m3 -E "recompile with -fPIC|TPOFF32|error" "$OUT/build.log"
    echo "libdistattn.so did not build (log: $OUT/build.log); a relocation error means Kokkos was not built with -fPIC"
    exit 1
  fi
fi
export DISTATTN_LIB=$(cd "$B/src" && pwd)/libdistattn.so

echo "== binding test vs torch SDPA (2 GPUs)" | tee "$OUT/torch_test.log"
python3 "$SRC/perf_tests/torch/test_distattn_torch.py" 2>&1 | grep -vE "^W[0-9]" | tee -a "$OUT/torch_test.log"
test_rc=${PIPESTATUS[0]}

echo "== training steps: DistAttn vs PyTorch CP (cuDNN, flash), 2 GPUs" | tee "$OUT/train_compare.log"
torchrun --standalone --nproc_per_node 2 "$SRC/perf_tests/torch/train_compare.py" --seqs $SEQS 2>&1 \
  | grep -vE "^W[0-9]" | tee -a "$OUT/train_compare.log"
train_rc=${PIPESTATUS[0]}
echo "== binding test exit $test_rc, train_compare exit $train_rc" | tee -a "$OUT/train_compare.log"
[ "$test_rc" -eq 0 ] && [ "$train_rc" -eq 0 ]
