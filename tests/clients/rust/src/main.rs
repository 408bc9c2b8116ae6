//! The Rust client progenitor generates from Pictor's served document, used the way a developer
//! would against a real server (see `.ci/clients.sh`): generate, long-poll, download, /me, an
//! edit with a file upload (`POST /v1/edit/raw`: progenitor cannot send multipart forms), the
//! history, and a refused request read through the generated error type.
//!
//! Environment: `PICTOR_API` (the API base URL, e.g. `http://127.0.0.1:8080/api/pictor`),
//! `PICTOR_KEY`. The server renders with a delay, so a second job sent right after the first
//! meets it active.

use std::num::NonZeroU32;
use std::time::Duration;

use pictor_client_smoke::types::{GenerateRequest, JobView, ModelName, RatioName};
use pictor_client_smoke::{Client, Error};

type Failure = Box<dyn std::error::Error>;

fn png_size(bytes: &[u8]) -> Result<(u32, u32), Failure> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return Err("not a PNG".into());
    }
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    Ok((be(16), be(20)))
}

fn check(condition: bool, what: impl std::fmt::Display) -> Result<(), Failure> {
    if condition {
        Ok(())
    } else {
        Err(format!("rust client smoke test failed: {what}").into())
    }
}

async fn wait_done(client: &Client, job_id: &str) -> Result<JobView, Failure> {
    for _ in 0..10 {
        let job = client
            .get_job(job_id, None, NonZeroU32::new(60), None)
            .await?
            .into_inner();
        if job.status == "done" || job.status == "failed" {
            return Ok(job);
        }
    }
    Err(format!("{job_id} did not finish").into())
}

async fn download(http: &reqwest::Client, url: Option<&String>) -> Result<Vec<u8>, Failure> {
    let url = url.ok_or("no photo_url")?;
    let response = http.get(url).send().await?.error_for_status()?;
    Ok(response.bytes().await?.to_vec())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Failure> {
    let api = std::env::var("PICTOR_API")?;
    let key = std::env::var("PICTOR_KEY")?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {key}").parse()?,
    );
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(120))
        .build()?;
    let client = Client::new_with_client(&api, http.clone());

    let start = client.me().await?.into_inner().balance;
    let models = client.models().await?.into_inner();
    check(
        models.models.iter().any(|m| m.id == "fast"),
        "no fast model",
    )?;

    let request = GenerateRequest {
        prompt: "a red fox in a snowy forest".parse()?,
        model: Some(ModelName::Fast),
        ratio: Some(RatioName::X169),
        seed: Some(7),
        enhance: None,
        noise: None,
        webhook_url: None,
        loras: None,
    };
    let created = client.generate(&request).await?.into_inner();
    check(created.status == "queued", &created.status)?;

    // One active job per user: the second is refused with 409 job_busy, as the generated
    // error type.
    match client.generate(&request).await {
        Err(Error::ErrorResponse(refusal)) => {
            check(refusal.status().as_u16() == 409, refusal.status())?;
            check(
                refusal.error_code == "job_busy" && !refusal.ok,
                &refusal.error_code,
            )?;
        }
        other => return Err(format!("expected 409 job_busy, got {other:?}").into()),
    }

    let job = wait_done(&client, &created.job_id).await?;
    check(job.status == "done", format!("{job:?}"))?;
    let picture = download(&http, job.photo_url.as_ref()).await?;
    let size = png_size(&picture)?;
    check(
        size == (1024, 576) && (job.width, job.height) == (Some(1024), Some(576)),
        format!("{size:?}"),
    )?;

    let prompt = "make it black and white".parse()?;
    let edited = client.edit_raw(&prompt, None, picture).await?.into_inner();
    let edit_job = wait_done(&client, &edited.job_id).await?;
    check(
        edit_job.status == "done" && edit_job.kind == "edit",
        format!("{edit_job:?}"),
    )?;
    let edited_picture = download(&http, edit_job.photo_url.as_ref()).await?;
    check(png_size(&edited_picture)? == (1024, 576), "edit size")?;

    let history = client
        .list_jobs(None, None, NonZeroU32::new(10), None)
        .await?
        .into_inner();
    let ids: Vec<&str> = history.jobs.iter().map(|j| j.job_id.as_str()).collect();
    check(
        ids == [edited.job_id.as_str(), created.job_id.as_str()],
        format!("{ids:?}"),
    )?;

    let end = client.me().await?.into_inner().balance;
    check(
        end == start - i64::from(created.cost) - i64::from(edited.cost),
        format!("balance {start} -> {end}"),
    )?;
    println!("rust client: generate, long-poll, download, /me, edit upload, history, job_busy: ok");
    Ok(())
}
