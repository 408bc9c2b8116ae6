#!/usr/bin/env bash
# Builds Pictor for NVIDIA machines on a machine with no GPU (the CUDA compiler and libraries come
# from PyPI wheels: toolkit.sh) and packs it.
#
#   tools/gpu/build.sh            # from the project root
#
# Writes, in target/nvidia/:
#   pictor-VERSION-linux-x86_64-nvidia.tar.xz   the package (layout below)
#   gpu/                                        what tools/gpu/check.sh needs on a GPU machine
#                                               (the CUDA build and the parity test binary, xz-packed;
#                                               copy it to .gpu/ in the checkout there)
#
# The package:
#   bin/pictor                     the CPU build: starts everywhere, hands over to pictor-cuda
#                                  when that can use a GPU (src/gpu.rs, docs/gpu.md)
#   lib/pictor/pictor-cuda         the CUDA build (kernels as PTX for compute 8.0, compiled by
#                                  the driver for the GPU it finds and cached; loaded at start)
#   lib/pictor/cuda/               cuBLAS, cuBLASLt, cuRAND, NVRTC and the CUDA runtime (13.0) it
#                                  links, found through its RUNPATH; only the driver (libcuda,
#                                  NVIDIA driver 580 or newer) comes from the machine
#   README.md, docs/
# Set PICTOR_NO_CUDA_LIBS=1 to leave lib/pictor/cuda/ out (about 700 MB unpacked): the machine's
# CUDA 13 libraries are then used.
#
# Measured on the 2-core build machine (2026-11-27): 12.5 min for the CUDA build from scratch in
# its own target folder, 20 s for a relink.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tools/gpu/toolkit.sh --libs
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
out=target/nvidia
cuda_target=${CUDA_TARGET_DIR:-target/cuda}
mkdir -p "$out/gpu"

# 1. The CPU build (the default features, as `cargo run --release` builds it), in target/.
CARGO_TARGET_DIR=target cargo build --release --locked -p pictor

# 2. The CUDA build: the libraries first, then a libcuda stub with the driver symbols they use
#    (link time only), then the binary with a RUNPATH to lib/pictor/cuda beside it.
export CARGO_TARGET_DIR=$cuda_target
cargo build --release --locked -p pictor --features cuda --lib
nm -u "$cuda_target"/release/deps/libcudarc-*.rlib "$cuda_target"/release/deps/libcandle_core-*.rlib \
      "$cuda_target"/release/deps/libpictor_diffusion-*.rlib 2>/dev/null \
  | awk '{print $2}' | grep -E '^cu[A-Z]' | sort -u | awk '{print "void "$1"(void){}"}' > "$PICTOR_CUDA_STUBS/libcuda.c"
cc -shared -fPIC -o "$PICTOR_CUDA_STUBS/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$PICTOR_CUDA_STUBS/libcuda.c"
ln -sf libcuda.so.1 "$PICTOR_CUDA_STUBS/libcuda.so"
cargo build --release --locked -p pictor --features cuda   # build.rs adds the RUNPATH
# The parity checks, for tools/gpu/check.sh (PICTOR_TEST_DEVICE=cuda).
parity=$( (cargo test --release --locked -p pictor-diffusion --features cuda --test diffusion_parity --no-run \
           --message-format=json 2>/dev/null || echo "parity test build failed" >&2) \
         | sed -n 's/.*"executable":"\([^"]*diffusion_parity[^"]*\)".*/\1/p' | tail -1)
[ -n "$parity" ] || echo "build.sh: no parity test binary (the GPU check will skip parity)" >&2
unset CARGO_TARGET_DIR

# 3. The package.
stage=$(mktemp -d)
root=$stage/pictor-$version-linux-x86_64-nvidia
mkdir -p "$root/bin" "$root/lib/pictor" "$root/docs"
strip -o "$root/bin/pictor" target/release/pictor
strip -o "$root/lib/pictor/pictor-cuda" "$cuda_target/release/pictor"
if [ "${PICTOR_NO_CUDA_LIBS:-}" != 1 ]; then
  mkdir -p "$root/lib/pictor/cuda"
  for f in libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
    cp -L "$PICTOR_CUDA_LIBS/$f" "$root/lib/pictor/cuda/"
  done
  cp -L "$PICTOR_CUDA_RUNTIME/libcudart.so.13" "$root/lib/pictor/cuda/"
  # NVRTC loads its builtins library by soname at run time.
  cp -L "$PICTOR_CUDA_LIBS"/libnvrtc-builtins.so.13* "$root/lib/pictor/cuda/" 2>/dev/null || true
fi
cp README.md "$root/"
cp docs/*.md "$root/docs/"
tar -C "$stage" -cJf "$out/pictor-$version-linux-x86_64-nvidia.tar.xz" "pictor-$version-linux-x86_64-nvidia"

# 4. What the GPU check carries (xz keeps it inside the device tool's 64 MiB).
xz -T2 -6 -c "$root/lib/pictor/pictor-cuda" > "$out/gpu/pictor-cuda.xz"
if [ -n "$parity" ]; then strip -o "$stage/parity" "$parity" && xz -T2 -6 -c "$stage/parity" > "$out/gpu/parity.xz"; fi
cp tools/gpu/check.sh tools/gpu/diffusers_sd15.py tools/bench/sd_architectures.json assets/clip/merges.txt "$out/gpu/"
rm -rf "$stage"
ls -la "$out" "$out/gpu"
