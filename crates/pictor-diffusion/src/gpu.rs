//! The GPU the engine runs on (feature `cuda`): what it is, what this build's kernels target, its
//! memory, and loading every kernel module before the first job.
//!
//! candle's kernels ship as PTX for one architecture (`CUDA_COMPUTE_CAP` at build time; the
//! package builds for 8.0, which the driver compiles for every newer GPU). The driver compiles a
//! module the first time it is loaded — 20–25 s for all of them on an H100, cached afterwards in
//! the user's CUDA compute cache — so [`warm`] loads them all at start, before the server says it
//! is ready, instead of inside the first job.

use candle::Device;
pub use pictor_core::gpu::{EngineDevice, GpuInfo};

static CPU_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Keeps the engine on the CPU even where a GPU could be used (`pictor --device cpu`); call it
/// before any renderer is made.
pub fn use_cpu_only(yes: bool) {
    CPU_ONLY.store(yes, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`use_cpu_only`] was asked for.
pub fn cpu_only() -> bool {
    CPU_ONLY.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether this build has the CUDA engine (feature `cuda`).
pub const CUDA_BUILT: bool = cfg!(feature = "cuda");

/// The architecture this build's kernels were compiled for ("80": PTX for compute 8.0 and
/// newer), when the build said (`CUDA_COMPUTE_CAP`); `None` in a CPU build or when candle asked
/// the build machine's GPU.
pub fn kernels_built_for() -> Option<&'static str> {
    if CUDA_BUILT {
        option_env!("PICTOR_CUDA_COMPUTE_CAP")
    } else {
        None
    }
}

/// "cpu" or "cuda:N": where a device computes, as the API names it.
pub fn device_id(device: &Device) -> String {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => format!("cuda:{}", d.cuda_stream().context().ordinal()),
        _ => "cpu".to_string(),
    }
}

/// The GPU behind `device`, or `None` for the CPU (or when the driver does not answer).
pub fn info(device: &Device) -> Option<GpuInfo> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => cuda::describe(d.cuda_stream().context()).ok(),
        _ => None,
    }
}

/// `device` as the server shows it, its memory read now.
pub fn engine_device(device: &Device) -> EngineDevice {
    EngineDevice {
        id: device_id(device),
        gpu: info(device),
    }
}

/// Every GPU the driver sees, each described (`pictor gpu`): an error says why there are none
/// usable (a CPU build, no driver, no device).
pub fn probe() -> Result<Vec<GpuInfo>, String> {
    #[cfg(feature = "cuda")]
    {
        cuda::probe()
    }
    #[cfg(not(feature = "cuda"))]
    Err("this pictor was built without CUDA (the cargo feature `cuda`)".to_string())
}

/// Loads every kernel module of candle's onto `device` (the driver compiles the PTX for this GPU
/// the first time, then reads its cache); returns how many modules were loaded. Nothing to do on
/// the CPU.
pub fn warm(device: &Device) -> Result<usize, String> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(d) => cuda::warm(d),
        _ => Ok(0),
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::GpuInfo;
    use candle::cuda_backend::CudaDevice;
    use candle::cuda_backend::cudarc::driver::CudaContext;
    use std::sync::Arc;

    pub(super) fn describe(ctx: &Arc<CudaContext>) -> Result<GpuInfo, String> {
        let e = |e: candle::cuda_backend::cudarc::driver::DriverError| e.to_string();
        let (major, minor) = ctx.compute_capability().map_err(e)?;
        let (free, total) = ctx.mem_get_info().map_err(e)?;
        Ok(GpuInfo {
            ordinal: ctx.ordinal(),
            name: ctx.name().map_err(e)?,
            compute_capability: format!("{major}.{minor}"),
            memory_total: total as u64,
            memory_used: total.saturating_sub(free) as u64,
        })
    }

    pub(super) fn probe() -> Result<Vec<GpuInfo>, String> {
        let count = CudaContext::device_count().map_err(|e| format!("the NVIDIA driver: {e}"))?;
        if count < 1 {
            return Err("the NVIDIA driver sees no GPU".to_string());
        }
        // Every GPU that answers; one that does not (busy in exclusive mode, a MIG parent)
        // does not hide the others.
        let mut gpus = Vec::new();
        let mut errors = Vec::new();
        for i in 0..count as usize {
            match CudaContext::new(i)
                .map_err(|e| e.to_string())
                .and_then(|ctx| describe(&ctx))
            {
                Ok(g) => gpus.push(g),
                Err(e) => errors.push(format!("GPU {i}: {e}")),
            }
        }
        if gpus.is_empty() {
            return Err(errors.join("; "));
        }
        Ok(gpus)
    }

    /// One kernel of each module: loading a function loads (and on first use compiles) its
    /// whole module, which candle keeps for the device's lifetime.
    const KERNELS: [(&str, candle_kernels::Module); 11] = [
        ("affine_f32", candle_kernels::AFFINE),
        ("badd_f32", candle_kernels::BINARY),
        ("cast_f32_f16", candle_kernels::CAST),
        ("conv2d_f32", candle_kernels::CONV),
        ("fill_f32", candle_kernels::FILL),
        ("is_u32_f32", candle_kernels::INDEXING),
        ("get_rows_q4_0", candle_kernels::QUANTIZED),
        ("sum_f32", candle_kernels::REDUCE),
        ("asort_asc_f32", candle_kernels::SORT),
        ("where_u32_f32", candle_kernels::TERNARY),
        ("uneg_f32", candle_kernels::UNARY),
    ];

    pub(super) fn warm(d: &CudaDevice) -> Result<usize, String> {
        for (name, module) in &KERNELS {
            d.get_or_load_func(name, module)
                .map_err(|e| format!("loading the GPU kernel {name}: {e}"))?;
        }
        Ok(KERNELS.len())
    }
}
