//! The NVIDIA build (`--features cuda`) finds the CUDA libraries it links (cuBLAS, cuRAND, NVRTC,
//! the runtime) in `cuda/` beside itself, where the NVIDIA package puts them
//! (`lib/pictor/cuda`, see tools/gpu/build.sh); `LD_LIBRARY_PATH` and the system's library path
//! still come first. Nothing for the CPU build.
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo::rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/cuda");
    }
}
