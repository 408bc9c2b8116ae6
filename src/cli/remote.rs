//! The CLI side of the admin channel: reads `<data>/admin.json` and posts the request.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::app::admin::AdminFile;
use crate::ops::AdminRequest;

pub async fn execute(data_dir: &Path, req: &AdminRequest) -> anyhow::Result<Value> {
    post(data_dir, "/admin/v1/exec", req).await
}

/// Asks the running server to write a backup (it holds the store open).
pub async fn backup(data_dir: &Path, to: &Path) -> anyhow::Result<Value> {
    post(
        data_dir,
        "/admin/v1/backup",
        &serde_json::json!({ "to": to }),
    )
    .await
}

/// The running server's inference servers and their health.
pub async fn backends(data_dir: &Path) -> anyhow::Result<Value> {
    post(data_dir, "/admin/v1/backends", &serde_json::json!({})).await
}

async fn post(data_dir: &Path, route: &str, req: &impl serde::Serialize) -> anyhow::Result<Value> {
    let path = crate::config::admin_file(data_dir);
    let bytes = std::fs::read(&path).with_context(|| {
        format!(
            "the store is in use but {} cannot be read (is the server still starting?)",
            path.display()
        )
    })?;
    let file: AdminFile = serde_json::from_slice(&bytes).context("admin.json is malformed")?;
    eprintln!(
        "pictor: data folder {}, through the server running there (pid {}, admin channel {})",
        data_dir.display(),
        file.pid,
        file.url
    );
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{}{route}", file.url))
        .bearer_auth(&file.token)
        .json(req)
        .send()
        .await
        .context("cannot reach the running server's admin channel")?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .await
        .context("bad answer from the admin channel")?;
    if body["ok"].as_bool() == Some(true) {
        Ok(body["result"].clone())
    } else {
        bail!(
            "{}",
            body["error"]
                .as_str()
                .unwrap_or(&format!("admin channel answered {status}"))
        )
    }
}
