#!/usr/bin/env bash
# NVIDIA's CUDA compiler and libraries from PyPI wheels, for building Pictor's `cuda` feature on a
# machine with no GPU and no CUDA toolkit (CI, the 2-core build machine). Source it:
#
#   . tools/gpu/toolkit.sh            # the compiler and headers: enough for `cargo clippy --features cuda`
#   . tools/gpu/toolkit.sh --libs     # also cuBLAS, cuRAND, NVRTC and a libcuda link stub: a full link
#
# It sets PATH, CUDA_HOME/CUDA_ROOT, CUDA_COMPUTE_CAP (default 80, see below) and, with --libs,
# LIBRARY_PATH. The wheels go to $CUDA_WHEELS (default /tmp/cuda-wheels) and are reused.
#
# Why these choices:
# - Every package is pinned to one CUDA 13.0 release: the GPU machines' driver (580) runs CUDA 13.0
#   code, and a newer nvcc writes PTX that an older driver cannot load.
# - CUDA_COMPUTE_CAP=80: candle-kernels compiles its kernels to PTX for one architecture; PTX for
#   compute_80 is compiled by the driver for any newer GPU (A100 sm_80, RTX 30 sm_86, RTX 40 sm_89,
#   H100/H200 sm_90, Blackwell), where PTX for 90 would not load on an RTX 30/40. The driver caches
#   what it compiles; Pictor loads every kernel module at start so the first job does not wait
#   (see docs/gpu.md).
# - The link stub: candle turns on cudarc's `dynamic-linking`, so the binary links libcuda, which
#   only the NVIDIA driver provides. A stub with the right soname and the driver symbols the crates
#   use stands in at link time only; the real driver's library is loaded at run time.
V=${CUDA_WHEELS:-/tmp/cuda-wheels}
want_libs=0
[ "${1:-}" = "--libs" ] && want_libs=1
# `pip --target`, one folder per set: no virtual environment (python3-venv) needed, and a second
# install does not meet the first's `nvidia/` folder.
# Reused only when it is the pinned release.
if ! "$V/compiler/nvidia/cu13/bin/nvcc" --version 2>/dev/null | grep -q "release 13.0, V13.0.88"; then
  rm -rf "$V/compiler"
  echo "toolkit.sh: installing NVIDIA's CUDA 13.0 compiler wheels into $V/compiler" >&2
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$V/compiler" \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 || { return 1 2>/dev/null || exit 1; }
  chmod +x "$V"/compiler/nvidia/cu13/bin/* "$V"/compiler/nvidia/cu13/nvvm/bin/* 2>/dev/null || true
fi
C=$V/compiler/nvidia/cu13
export PATH=$C/bin:$PATH CUDA_HOME=$C CUDA_ROOT=$C CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-80}
if [ $want_libs = 1 ]; then
  if ! [ -e "$V/libs/nvidia/cu13/lib/libcublas.so.13" ]; then
    echo "toolkit.sh: installing cuBLAS, cuRAND and NVRTC wheels into $V/libs" >&2
    python3 -m pip install -q --disable-pip-version-check --target "$V/libs" \
      nvidia-cuda-nvrtc==13.0.88 nvidia-cublas==13.0.2.14 nvidia-curand==10.4.5.25 \
      || { return 1 2>/dev/null || exit 1; }
  fi
  L=$V/libs/nvidia/cu13/lib
  STUB=$V/link-stubs
  mkdir -p "$STUB"
  for f in "$L/libnvrtc.so.13" "$L/libcurand.so.10" "$L/libcublas.so.13" "$L/libcublasLt.so.13" "$C/lib/libcudart.so.13"; do
    b=$(basename "$f"); ln -sf "$f" "$STUB/${b%%.so*}.so"
  done
  export LIBRARY_PATH=$STUB:$L:$C/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export PICTOR_CUDA_STUBS=$STUB PICTOR_CUDA_LIBS=$L PICTOR_CUDA_RUNTIME=$C/lib
fi
