//! Entry point: parses the command line, starts logging, builds the tokio runtime by hand (so the
//! tray controller can own the main thread) and dispatches.

use std::process::ExitCode;

use clap::Parser;
use pictor::cli::serve::ServeArgs;
use pictor::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let serving = matches!(cli.command, None | Some(Command::Serve(_)));
    let default_filter = if serving { "info" } else { "warn" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PICTOR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .init();

    // The engine's device (src/gpu.rs): a CPU build hands serving and rendering over to the
    // NVIDIA build beside it when that can use a GPU; this returns only when we go on here.
    let draws = serving || matches!(cli.command, Some(Command::Render(_)));
    if draws {
        match pictor::gpu::hand_off(cli.device) {
            Ok(Some(reason)) => tracing::info!("the engine runs on the CPU: {reason}"),
            Ok(None) => {}
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
        if let Err(e) = pictor::gpu::apply(cli.device) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    if std::env::var_os(pictor::gpu::HANDED_OFF).is_some() && serving {
        tracing::info!("started by pictor (the CPU build) to compute on the GPU");
    }

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &cli.command {
        None | Some(Command::Serve(_)) => {
            let args = match &cli.command {
                Some(Command::Serve(args)) => args,
                _ => &cli.serve,
            };
            serve(&cli, args, &runtime)
        }
        Some(command) => runtime.block_on(cli::run_command(&cli, command)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `pictor [serve]`: headless until Ctrl+C, or with `--tray` the tray on this thread and the
/// server on the runtime's threads.
fn serve(cli: &Cli, args: &ServeArgs, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let (config, _, layers) = cli::load_config(cli, Some(args))?;
    if args.tray {
        #[cfg(feature = "tray")]
        {
            return pictor::tray::serve(runtime, config, layers.file_path);
        }
        #[cfg(not(feature = "tray"))]
        tracing::warn!(
            "this pictor was built without the tray (cargo feature `tray`); serving without it"
        );
    }
    runtime.block_on(cli::serve::run(config, layers.file_path))
}
