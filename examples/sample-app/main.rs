//! A runnable "Sign in with Pictor" app that makes pictures for the people who use it:
//!
//! ```sh
//! pictor client add --name sample --redirect-uri http://127.0.0.1:8090/callback \
//!     --post-logout-redirect-uri http://127.0.0.1:8090/signed-out --json
//! PICTOR_APP_SECRET=pcs_… cargo run --example sample-app -- \
//!     --issuer http://127.0.0.1:8080 --client sample --listen 127.0.0.1:8090
//! ```
//!
//! Then open http://127.0.0.1:8090/. See `app.rs` for what each page does.

#[path = "app.rs"]
mod app;

use clap::Parser;
use poem::listener::TcpListener;

#[derive(Parser)]
struct Args {
    /// Pictor's address (the issuer).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    issuer: String,
    /// The app's client id (`pictor client add --name …`).
    #[arg(long)]
    client: String,
    /// The app's secret (shown once by `pictor client add`); kept on this server only.
    #[arg(long, env = "PICTOR_APP_SECRET", hide_env_values = true)]
    secret: String,
    /// Where this app listens.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let base = format!("http://{}", args.listen);
    let app = app::SampleApp::new(&args.issuer, &args.client, &args.secret, &base).await?;
    println!("sample app on {base} (signing in with {})", args.issuer);
    poem::Server::new(TcpListener::bind(args.listen))
        .run(app::routes(app))
        .await?;
    Ok(())
}
