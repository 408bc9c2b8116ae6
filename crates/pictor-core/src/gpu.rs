//! What a GPU is, as the engine reports it and the server shows it (`pictor gpu`, `/v1/models`,
//! the models page, `/metrics`).

use serde::{Deserialize, Serialize};

/// One NVIDIA GPU as the driver describes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpuInfo {
    /// The CUDA device number (`cuda:N`).
    pub ordinal: usize,
    /// The product name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    /// Compute capability, "9.0".
    pub compute_capability: String,
    /// Bytes of GPU memory in all.
    pub memory_total: u64,
    /// Bytes of GPU memory in use (by every process) when it was asked.
    pub memory_used: u64,
}

impl GpuInfo {
    /// "NVIDIA H100 80GB HBM3 (GPU 0, compute 9.0)".
    pub fn describe(&self) -> String {
        format!(
            "{} (GPU {}, compute {})",
            self.name, self.ordinal, self.compute_capability
        )
    }
}

/// Where the engine computes: the CPU, or a GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EngineDevice {
    /// "cpu" or "cuda:N".
    pub id: String,
    /// The GPU, when `id` is one.
    pub gpu: Option<GpuInfo>,
}

impl EngineDevice {
    pub fn cpu() -> EngineDevice {
        EngineDevice {
            id: "cpu".to_string(),
            gpu: None,
        }
    }

    /// "the CPU" or the GPU's description.
    pub fn describe(&self) -> String {
        match &self.gpu {
            Some(g) => g.describe(),
            None if self.id == "cpu" => "the CPU".to_string(),
            None => self.id.clone(),
        }
    }
}
