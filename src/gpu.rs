//! NVIDIA GPUs from the server's side: the `pictor gpu` report, where the engine computes, and
//! the hand-off from the CPU build to the NVIDIA build installed beside it.
//!
//! Why two binaries (docs/gpu.md): the CUDA build (`--features cuda`) links the NVIDIA driver's
//! `libcuda.so.1` and the CUDA libraries (cuBLAS, cuRAND, NVRTC), and the dynamic loader refuses
//! to start it on a machine without them — before any of Pictor's code could fall back. So the
//! NVIDIA package ships `pictor` (this CPU build, which starts everywhere) and `pictor-cuda`
//! beside it. When `pictor` is asked to serve or render, it runs `pictor-cuda gpu --json`: if
//! that starts and sees a GPU, `pictor` replaces itself with `pictor-cuda` (same arguments, same
//! process id: systemd and the tray see one process); if not, it stays on the CPU and logs why.
//! `--device cpu` (or `PICTOR_DEVICE=cpu`) skips the hand-off; `--device cuda` makes a failed
//! one an error. Loading the CUDA path at run time instead (cudarc's `dynamic-loading`) would
//! need a patched candle, which forces `dynamic-linking`, and would make every CPU-only
//! download carry the CUDA kernels.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::ValueEnum;
use serde_json::{Value, json};

pub use pictor_core::gpu::{EngineDevice, GpuInfo};

/// The NVIDIA build's file name, beside `pictor`.
pub const CUDA_BINARY: &str = "pictor-cuda";
/// Set by the hand-off in the NVIDIA build's environment: its log says it was started so.
pub const HANDED_OFF: &str = "PICTOR_HANDED_OFF";

/// Set by [`probe_binary`] in the probed build's environment.
pub const PROBING: &str = "PICTOR_GPU_PROBE";

/// `--device`: where the built-in engine computes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The first NVIDIA GPU when one can be used (the NVIDIA build, or the one beside this
    /// build), else the CPU.
    #[default]
    Auto,
    /// The CPU, even with a GPU.
    Cpu,
    /// An NVIDIA GPU, or an error saying why not.
    Cuda,
}

/// What `pictor gpu --json` prints: this build, its kernels, the GPUs it can use (or why none).
pub fn report() -> Value {
    #[cfg(feature = "diffusion")]
    let (built, arch, probe) = (
        pictor_diffusion::gpu::CUDA_BUILT,
        pictor_diffusion::gpu::kernels_built_for(),
        pictor_diffusion::gpu::probe(),
    );
    #[cfg(not(feature = "diffusion"))]
    let (built, arch, probe): (bool, Option<&str>, Result<Vec<GpuInfo>, String>) = (
        false,
        None,
        Err("this pictor was built without the diffusion engine".to_string()),
    );
    let (gpus, error) = match probe {
        Ok(g) => (g, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    json!({
        "cuda_built": built,
        "kernels_built_for": arch.map(|a| format!("compute {} (PTX, compiled by the driver for this GPU and newer ones)", arch_text(a))),
        "gpus": gpus,
        "error": error,
    })
}

/// "80" → "8.0", "90a" → "9.0a".
fn arch_text(a: &str) -> String {
    let digits: String = a.chars().take_while(char::is_ascii_digit).collect();
    let rest = &a[digits.len()..];
    match digits.len() {
        2 | 3 => format!(
            "{}.{}{rest}",
            &digits[..digits.len() - 1],
            &digits[digits.len() - 1..]
        ),
        _ => a.to_string(),
    }
}

/// The NVIDIA build to hand off to: `PICTOR_CUDA_BINARY` (empty: none), else `pictor-cuda` beside
/// this binary, else in `../lib/pictor/` (the layout of the Debian package and the archive).
pub fn cuda_binary() -> Option<PathBuf> {
    if std::env::var_os(PROBING).is_some() {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let found = match std::env::var_os("PICTOR_CUDA_BINARY") {
        Some(p) if p.is_empty() => None,
        Some(p) => Some(PathBuf::from(p)),
        None => {
            let dir = exe.parent()?;
            [
                dir.join(CUDA_BINARY),
                dir.join("../lib/pictor").join(CUDA_BINARY),
            ]
            .into_iter()
            .find(|p| p.is_file())
        }
    }?;
    let found = std::fs::canonicalize(&found).unwrap_or(found);
    // Never this very binary (a copy named pictor-cuda running as itself).
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    (!same(&found, &exe)).then_some(found)
}

/// Runs `bin gpu --json`: the GPUs it can use, or why it cannot (the dynamic loader's refusal
/// when the driver or the CUDA libraries are missing, or its own report).
pub fn probe_binary(bin: &Path) -> Result<Vec<GpuInfo>, String> {
    let mut child = Command::new(bin)
        .args(["gpu", "--json"])
        .env("PICTOR_LOG", "error")
        // It reports on itself only (a CPU build would otherwise look for its own NVIDIA build).
        .env(PROBING, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    // The driver's first initialisation can take seconds; a hung one must not hold the start.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} gpu did not answer within 60 s", bin.display()));
            }
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot read {}: {e}", bin.display()))?;
    let v: Option<Value> = serde_json::from_slice(&out.stdout).ok();
    match v {
        Some(v) => {
            let gpus: Vec<GpuInfo> = serde_json::from_value(v["gpus"].clone()).unwrap_or_default();
            if gpus.is_empty() {
                Err(v["error"].as_str().unwrap_or("it sees no GPU").to_string())
            } else {
                Ok(gpus)
            }
        }
        // It did not start: the loader's message ("error while loading shared libraries:
        // libcuda.so.1: cannot open shared object file…") says what is missing.
        None => {
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!(
                "it does not start ({}){}",
                out.status,
                if line.is_empty() {
                    String::new()
                } else {
                    format!(": {}", line.trim())
                }
            ))
        }
    }
}

/// Whether this build computes on NVIDIA GPUs itself.
pub fn cuda_built() -> bool {
    #[cfg(feature = "diffusion")]
    {
        pictor_diffusion::gpu::CUDA_BUILT
    }
    #[cfg(not(feature = "diffusion"))]
    false
}

/// The hand-off (see the module documentation). Returns only when this process goes on: on the
/// CPU (with the reason to log, if there is one worth saying), or with an error when
/// `--device cuda` cannot be met. On success the process image is replaced.
pub fn hand_off(choice: DeviceChoice) -> Result<Option<String>, String> {
    if cuda_built() || choice == DeviceChoice::Cpu || std::env::var_os(HANDED_OFF).is_some() {
        return Ok(None);
    }
    let Some(bin) = cuda_binary() else {
        return match choice {
            DeviceChoice::Cuda => Err(format!(
                "--device cuda: this pictor runs on the CPU and there is no {CUDA_BINARY} beside it (install the NVIDIA package, or set PICTOR_CUDA_BINARY)"
            )),
            _ => Ok(None),
        };
    };
    let why = match probe_binary(&bin) {
        Ok(gpus) => {
            let first = gpus.first().map(GpuInfo::describe).unwrap_or_default();
            tracing::info!(
                "handing over to the NVIDIA build {} ({first})",
                bin.display()
            );
            exec(&bin)
        }
        Err(e) => e,
    };
    let reason = format!("{} cannot use a GPU: {why}", bin.display());
    match choice {
        DeviceChoice::Cuda => Err(format!("--device cuda: {reason}")),
        _ => Ok(Some(reason)),
    }
}

/// Applies `--device` to the engine of this process: the CPU only, or (in the NVIDIA build) a GPU
/// that must answer.
pub fn apply(choice: DeviceChoice) -> Result<(), String> {
    #[cfg(feature = "diffusion")]
    {
        pictor_diffusion::gpu::use_cpu_only(choice == DeviceChoice::Cpu);
        if choice == DeviceChoice::Cuda && cuda_built() {
            pictor_diffusion::gpu::probe().map_err(|e| format!("--device cuda: {e}"))?;
        }
    }
    let _ = choice;
    Ok(())
}

/// The start report's line: "the CPU", or the GPU, its memory and this build's kernels.
pub fn describe_engine(d: &EngineDevice) -> String {
    match &d.gpu {
        Some(g) => {
            let arch = {
                #[cfg(feature = "diffusion")]
                {
                    pictor_diffusion::gpu::kernels_built_for()
                }
                #[cfg(not(feature = "diffusion"))]
                None::<&str>
            };
            format!(
                "{}, {} of memory; kernels built for {}",
                g.describe(),
                crate::bounded::size_text(g.memory_total),
                arch.map(|a| format!("compute {} and newer", arch_text(a)))
                    .unwrap_or_else(|| "the build machine's GPU".into())
            )
        }
        None => d.describe(),
    }
}

/// Replaces this process with `bin`, same arguments; returns why when it could not.
#[cfg(unix)]
fn exec(bin: &Path) -> String {
    use std::os::unix::process::CommandExt;
    let e = Command::new(bin)
        .args(std::env::args_os().skip(1))
        .env(HANDED_OFF, "1")
        .exec();
    format!("cannot start it: {e}")
}

#[cfg(not(unix))]
fn exec(_: &Path) -> String {
    "handing over to another binary is implemented on Unix only".to_string()
}

#[cfg(test)]
mod tests {
    use super::arch_text;

    #[test]
    fn architectures_read_as_compute_capabilities() {
        assert_eq!(arch_text("80"), "8.0");
        assert_eq!(arch_text("90a"), "9.0a");
        assert_eq!(arch_text("100"), "10.0");
        assert_eq!(arch_text("x"), "x");
    }
}
