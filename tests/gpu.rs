//! The device the engine computes on, from a machine without a GPU (CI's): `pictor gpu` says
//! why there is none; a CPU build with an NVIDIA build beside it (`pictor-cuda`) that cannot use
//! a GPU stays on the CPU and logs why, whether that build runs and finds no GPU or the dynamic
//! loader refuses it for want of the driver's libcuda; `--device cuda` then refuses to start.
//! (The hand-over itself, and everything on a GPU, is checked by tools/gpu/check.sh on a GPU
//! machine.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// A folder inside the target folder (the same file system as the binary, for hard links).
fn workdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A copy of the binary at `to` (a hard link when possible: the debug binary is large).
fn install(to: &Path) {
    let from = Path::new(env!("CARGO_BIN_EXE_pictor"));
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

fn pictor(bin: &Path, data: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.arg("--init")
        .env("PICTOR_DATA_DIR", data)
        .env("PICTOR_LOG", "info")
        .env_remove("PICTOR_CONFIG")
        .env_remove("PICTOR_DEVICE")
        .env_remove("PICTOR_CUDA_BINARY")
        .env_remove("PICTOR_HANDED_OFF");
    cmd
}

/// `pictor serve` on an ephemeral port: its first lines until it says where it runs, then
/// stopped; returns (stdout's URL line, everything on stderr).
fn serve_and_stop(mut cmd: Command) -> (String, String) {
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            lines.push(line.clone());
            if line.starts_with("  Engine:") {
                let _ = tx.send(lines.join("\n"));
                break;
            }
        }
    });
    let started = rx.recv_timeout(Duration::from_secs(90));
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let out = started.unwrap_or_else(|_| panic!("the server did not start: {err}"));
    (out, err)
}

#[test]
fn gpu_says_why_this_build_has_none() {
    let data = tempfile::tempdir().unwrap();
    let out = pictor(Path::new(env!("CARGO_BIN_EXE_pictor")), data.path())
        .args(["gpu", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "no GPU is a failure for scripts"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["cuda_built"], false, "{v}");
    assert_eq!(v["gpus"], serde_json::json!([]), "{v}");
    let error = v["error"].as_str().unwrap();
    if cfg!(feature = "diffusion") {
        assert!(error.contains("built without CUDA"), "{error}");
    } else {
        assert!(error.contains("without the diffusion engine"), "{error}");
    }
    assert!(v.get("nvidia_build").is_none(), "none beside it: {v}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no NVIDIA GPU can be used here"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_nvidia_build_that_finds_no_gpu_leaves_the_cpu_build_serving() {
    // `pictor-cuda` beside `pictor`: here a second copy of this CPU build, which starts and
    // says it cannot use a GPU — what the real one says on a machine with the driver and
    // no GPU.
    let dir = workdir();
    let (bin, cuda) = (dir.path().join("pictor"), dir.path().join("pictor-cuda"));
    install(&bin);
    install(&cuda);
    let data = dir.path().join("data");

    let out = pictor(&bin, &data).arg("gpu").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("this build: CPU only")
            && text.contains(&format!("the NVIDIA build beside it: {}", cuda.display()))
            && text.contains("cannot use a GPU"),
        "{text}"
    );

    let (started, log) = serve_and_stop(pictor(&bin, &data));
    assert!(started.contains("  Engine:    the CPU"), "{started}");
    assert!(
        log.contains(&format!(
            "the engine runs on the CPU: {} cannot use a GPU",
            cuda.display()
        )),
        "{log}"
    );

    // --device cpu: no probe, nothing to say.
    let mut cmd = pictor(&bin, &data);
    cmd.args(["--device", "cpu"]);
    let (_, log) = serve_and_stop(cmd);
    assert!(!log.contains("cannot use a GPU"), "{log}");

    // --device cuda: a failure, saying why, before anything starts.
    let out = pictor(&bin, &data)
        .args(["--device", "cuda", "serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--device cuda:") && err.contains("cannot use a GPU"),
        "{err}"
    );
    // And without any NVIDIA build beside it.
    std::fs::remove_file(&cuda).unwrap();
    let out = pictor(&bin, &data)
        .args(["--device", "cuda", "render", "--prompt", "x", "--out"])
        .arg(dir.path().join("x.png"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("there is no pictor-cuda beside it"), "{err}");
    assert!(!dir.path().join("x.png").exists());
}

/// A program that needs `libcuda.so.1`, as the CUDA build does, on a machine without the NVIDIA
/// driver: built against a stub library that is then removed, so the real dynamic loader
/// refuses it. `None` when there is no C compiler (a failure under CI).
fn needs_libcuda(dir: &Path) -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let stub = dir.join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    std::fs::write(
        stub.join("libcuda.c"),
        "int cuInit(unsigned int f) { return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.c"),
        "int cuInit(unsigned int);\nint main(void) { return cuInit(0); }\n",
    )
    .unwrap();
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(stub.join("libcuda.so"))
        .arg(stub.join("libcuda.c"))
        .status()
        .ok()?
        .success()
        && Command::new(&cc)
            .arg("-o")
            .arg(dir.join("pictor-cuda"))
            .arg(dir.join("main.c"))
            .arg("-L")
            .arg(&stub)
            .arg("-lcuda")
            .status()
            .ok()?
            .success();
    std::fs::remove_dir_all(&stub).unwrap();
    built.then(|| dir.join("pictor-cuda"))
}

#[test]
fn an_nvidia_build_the_loader_refuses_leaves_the_cpu_build_serving() {
    let dir = workdir();
    let Some(cuda) = needs_libcuda(dir.path()) else {
        assert!(
            std::env::var_os("PICTOR_CI").is_none(),
            "no C compiler (cc) to build the stand-in NVIDIA build"
        );
        eprintln!("skipped: no C compiler (cc) to build the stand-in NVIDIA build");
        return;
    };
    let bin = dir.path().join("pictor");
    install(&bin);
    let (started, log) = serve_and_stop(pictor(&bin, &dir.path().join("data")));
    assert!(started.contains("  Engine:    the CPU"), "{started}");
    assert!(
        log.contains(&format!(
            "the engine runs on the CPU: {} cannot use a GPU: it does not start",
            cuda.display()
        )) && log.contains("libcuda.so.1"),
        "{log}"
    );
    // PICTOR_CUDA_BINARY names another one; empty turns the hand-over off.
    let mut cmd = pictor(&bin, &dir.path().join("data"));
    cmd.env("PICTOR_CUDA_BINARY", "");
    let (_, log) = serve_and_stop(cmd);
    assert!(!log.contains("cannot use a GPU"), "{log}");
}
