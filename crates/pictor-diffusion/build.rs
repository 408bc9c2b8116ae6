//! Records, for `pictor gpu` and the start log, the GPU architecture candle's CUDA kernels are
//! compiled for (`CUDA_COMPUTE_CAP` at build time; see tools/gpu/toolkit.sh).
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if let Ok(cap) = std::env::var("CUDA_COMPUTE_CAP") {
        println!("cargo::rustc-env=PICTOR_CUDA_COMPUTE_CAP={cap}");
    }
}
