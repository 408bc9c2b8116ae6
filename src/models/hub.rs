//! `pictor models pull <owner/name> [--revision R]`: fetches a diffusers-layout repository from
//! the Hugging Face hub into the data folder, the way `huggingface_hub` does:
//!
//! 1. `GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true` — the commit the revision
//!    points at and every file with its size, git blob id and (for LFS files) SHA-256;
//! 2. per file, `HEAD {endpoint}/{repo}/resolve/{commit}/{path}` without following redirects —
//!    `X-Repo-Commit`, `X-Linked-Etag` (the LFS SHA-256) or `ETag` (the git blob id),
//!    `X-Linked-Size`, and a `Location` pointing at LFS storage for large files;
//! 3. `GET` of that location, with `Range: bytes=N-` to resume a partial file (after a dropped
//!    connection, up to 5 tries, or from an earlier run), the bytes hashed as they arrive;
//! 4. each file checked against the hub's metadata (SHA-256 for LFS files, the git blob SHA-1
//!    otherwise) before it is kept; everything lands in `<models>/.partial-<name>/` and the
//!    folder is renamed into place only when complete.
//!
//! Only what a diffusers pipeline needs is fetched: `model_index.json` and the `unet`, `vae`,
//! text encoder, tokenizer and scheduler folders' `.json`, `.txt` and `.safetensors` files, one
//! weight variant (the plain one, or `--variant fp16`). Pickle weights are never downloaded.
//! `HF_ENDPOINT` and `HF_TOKEN` are honoured as by the hub's own tools; the token is sent to the
//! hub only, never to the storage host a download is redirected to.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// Folders of a diffusers pipeline that are fetched.
const COMPONENTS: [&str; 10] = [
    "unet",
    "transformer",
    "vae",
    "text_encoder",
    "text_encoder_2",
    "text_encoder_3",
    "tokenizer",
    "tokenizer_2",
    "tokenizer_3",
    "scheduler",
];
/// Tries per file before giving up (each resumes where the last stopped).
const TRIES: u32 = 5;
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Http(String),
    #[error("{0}")]
    Checksum(String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("the download was cancelled")]
    Cancelled,
}

/// A pull's progress as it runs, shared with whoever shows it (the console, the CLI talking to
/// a running server), and its cancellation.
#[derive(Debug, Default)]
pub struct PullProgress {
    /// Bytes of the whole download (known once the listing is read).
    pub total: std::sync::atomic::AtomicU64,
    /// Bytes on disk so far (resumed ones included).
    pub done: std::sync::atomic::AtomicU64,
    /// Bytes fetched over the network in this run (for the rate).
    pub fetched: std::sync::atomic::AtomicU64,
    /// The file being fetched.
    pub file: std::sync::Mutex<String>,
    /// Set to stop the pull at its next chunk.
    pub cancel: std::sync::atomic::AtomicBool,
}

impl PullProgress {
    pub fn cancelled(&self) -> bool {
        self.cancel.load(std::sync::atomic::Ordering::Relaxed)
    }
}

pub use crate::bounded::free_space;

/// Room kept free beyond a download (the store and pictures must still be writable).
const DISK_MARGIN: u64 = 256 << 20;

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> PullError {
    let what = what.into();
    move |e| PullError::Io(what, e)
}

/// What to fetch and where.
#[derive(Clone)]
pub struct Pull {
    /// `https://huggingface.co`, or `HF_ENDPOINT` (a mirror, or a test's fake hub).
    pub endpoint: String,
    /// `HF_TOKEN`, for gated repositories. Never logged.
    pub token: Option<String>,
    /// `owner/name`.
    pub repo: String,
    /// Branch, tag or commit.
    pub revision: String,
    /// Weight variant (`fp16`), or the plain weights.
    pub variant: Option<String>,
    /// The folder the model ends up in (`<data>/models/<name>`); must not exist yet.
    pub dest: PathBuf,
    /// Draw a progress bar on standard error.
    pub progress: bool,
    /// Asked with (bytes, files) once the listing is read, before anything is downloaded; a
    /// `false` stops the pull (the CLI's confirmation above 1 GB).
    pub approve: Option<std::sync::Arc<dyn Fn(u64, usize) -> bool + Send + Sync>>,
    /// Progress and cancellation for a pull run by the server.
    pub sink: Option<std::sync::Arc<PullProgress>>,
    /// Files from other repositories put into the folder (FLUX's / SD 3's quantised
    /// transformer and T5 from city96's GGUF repositories); the base repository's weights of
    /// the folders they land in are not fetched.
    pub extras: Vec<Extra>,
}

/// A file of another repository (at its `main`) placed at `dest` in the pulled folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extra {
    pub repo: String,
    pub file: String,
    /// Its path in the folder (`transformer/flux1-schnell-Q4_K_S.gguf`).
    pub dest: String,
}

/// The files the catalogue's entry for `repo` takes from other repositories (none for a
/// repository the catalogue does not know).
pub fn extras_for(repo: &str) -> Vec<Extra> {
    crate::models::known(repo)
        .filter(|k| k.repo.eq_ignore_ascii_case(repo))
        .map(|k| {
            k.extras
                .iter()
                .map(|e| Extra {
                    repo: e.repo.into(),
                    file: e.file.into(),
                    dest: e.dest.into(),
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Extra {
    /// The component folder it fills.
    fn folder(&self) -> &str {
        self.dest.split_once('/').map_or("", |(f, _)| f)
    }
}

/// What a pull did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PullReport {
    pub repo: String,
    pub commit: String,
    pub files: usize,
    pub bytes: u64,
    /// Bytes that were already on disk from an interrupted run and not fetched again.
    pub resumed_bytes: u64,
    pub path: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
struct RepoInfo {
    sha: String,
    siblings: Vec<Sibling>,
}

#[derive(Debug, Clone, Deserialize)]
struct Sibling {
    rfilename: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default, rename = "blobId")]
    blob_id: Option<String>,
    #[serde(default)]
    lfs: Option<Lfs>,
}

#[derive(Debug, Clone, Deserialize)]
struct Lfs {
    sha256: String,
    size: u64,
}

/// A file to fetch: its path in the folder (and the base repository) and what it must hash to.
#[derive(Debug, Clone)]
struct Wanted {
    path: String,
    size: u64,
    check: Check,
    /// Where it comes from when not from the base repository at the base commit.
    origin: Option<Origin>,
}

/// Another repository's file: repository, commit, path there.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    repo: String,
    commit: String,
    file: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Check {
    /// LFS file: SHA-256 of the content (hex).
    Sha256(String),
    /// Regular git file: git blob id, SHA-1 of `blob <size>\0<content>` (hex).
    GitBlob(String),
}

fn check_repo(repo: &str) -> Result<(), PullError> {
    let ok = repo.split('/').count() == 2
        && repo.split('/').all(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.len() <= 96
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        });
    if ok {
        Ok(())
    } else {
        Err(PullError::Invalid(format!(
            "{repo:?} is not a hub repository id (owner/name)"
        )))
    }
}

/// The variant of a weights file name: `diffusion_pytorch_model.fp16.safetensors` → `fp16`,
/// `model.fp16-00001-of-00002.safetensors` → `fp16`, `model.safetensors` → none.
fn variant_of(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".safetensors")?;
    let (_, last) = stem.rsplit_once('.')?;
    let v = match last.split_once('-') {
        Some((v, _)) => v,
        None => last,
    };
    (!v.is_empty()).then(|| v.to_string())
}

/// Chooses the files a diffusers pipeline needs, one weight variant per component.
impl Sibling {
    /// This file as something to fetch, with the size and checksum the hub lists for it.
    fn wanted(&self) -> Result<Wanted, PullError> {
        let size = self
            .lfs
            .as_ref()
            .map(|l| l.size)
            .or(self.size)
            .ok_or_else(|| {
                PullError::Http(format!(
                    "the hub did not say the size of {}",
                    self.rfilename
                ))
            })?;
        let check = match (&self.lfs, &self.blob_id) {
            (Some(l), _) => Check::Sha256(l.sha256.to_ascii_lowercase()),
            (None, Some(b)) => Check::GitBlob(b.to_ascii_lowercase()),
            (None, None) => {
                return Err(PullError::Http(format!(
                    "the hub gave no checksum for {}",
                    self.rfilename
                )));
            }
        };
        Ok(Wanted {
            path: self.rfilename.clone(),
            size,
            check,
            origin: None,
        })
    }
}

/// The files of a diffusers pipeline to fetch: `model_index.json`, each component's
/// configuration and tokenizer files, and one weight variant per component — except the
/// weights of the `skip` folders (which other repositories' files fill).
fn select(
    siblings: &[Sibling],
    variant: Option<&str>,
    skip: &[&str],
) -> Result<Vec<Wanted>, PullError> {
    let mut out = Vec::new();
    let mut weights: std::collections::BTreeMap<&str, Vec<&Sibling>> = Default::default();
    for s in siblings {
        let f = s.rfilename.as_str();
        if f.contains("..") || f.starts_with('/') || f.contains('\\') {
            return Err(PullError::Invalid(format!(
                "the repository lists an unsafe path {f:?}"
            )));
        }
        if f == "model_index.json" {
            out.push(s.wanted()?);
            continue;
        }
        let Some((folder, name)) = f.split_once('/') else {
            continue;
        };
        if !COMPONENTS.contains(&folder) || name.contains('/') {
            continue;
        }
        if skip.contains(&folder) && (name.ends_with(".safetensors") || name.contains(".index.")) {
            continue;
        }
        if name.ends_with(".safetensors") {
            weights.entry(folder).or_default().push(s);
        } else if name.ends_with(".json") || name.ends_with(".txt") {
            out.push(s.wanted()?);
        }
    }
    // A tiny decoder (TAESD): its configuration and weights at the top of the repository.
    if !out.iter().any(|w| w.path == "model_index.json")
        && let (Some(config), Some(weights)) = (
            siblings.iter().find(|s| s.rfilename == "config.json"),
            siblings
                .iter()
                .find(|s| s.rfilename == "diffusion_pytorch_model.safetensors"),
        )
    {
        return Ok(vec![config.wanted()?, weights.wanted()?]);
    }
    if !out.iter().any(|w| w.path == "model_index.json") {
        return Err(PullError::Invalid(
            "the repository has no model_index.json: not a diffusers pipeline (single-file checkpoints: download the .safetensors and use `pictor models add`)".into(),
        ));
    }
    for files in weights.values() {
        // The asked-for variant (or the plain weights); failing that, what there is (a
        // repository with only fp16 weights, say).
        let want = match files
            .iter()
            .any(|s| variant_of(&s.rfilename).as_deref() == variant)
        {
            true => variant.map(str::to_string),
            false => files.first().and_then(|s| variant_of(&s.rfilename)),
        };
        for s in files.iter().filter(|s| variant_of(&s.rfilename) == want) {
            out.push(s.wanted()?);
        }
    }
    let denoiser = |w: &Wanted| {
        (w.path.starts_with("unet/") || w.path.starts_with("transformer/"))
            && w.path.ends_with(".safetensors")
    };
    if !out.iter().any(denoiser) && !skip.contains(&"transformer") {
        return Err(PullError::Invalid(
            "the repository has no .safetensors weights for its unet or transformer (pickle .bin weights are not downloaded)".into(),
        ));
    }
    Ok(out)
}

/// Hashes a file's content as the check needs it.
enum Hasher {
    Sha256(Sha256),
    Sha1(Sha1),
}

impl Hasher {
    fn new(check: &Check, size: u64) -> Hasher {
        match check {
            Check::Sha256(_) => Hasher::Sha256(Sha256::new()),
            Check::GitBlob(_) => {
                let mut h = Sha1::new();
                h.update(format!("blob {size}\0").as_bytes());
                Hasher::Sha1(h)
            }
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha1(h) => h.update(bytes),
        }
    }

    fn hex(self) -> String {
        match self {
            Hasher::Sha256(h) => hex::encode(h.finalize()),
            Hasher::Sha1(h) => hex::encode(h.finalize()),
        }
    }
}

/// A progress bar on standard error (redrawn in place on a terminal, a line per file otherwise).
struct Progress {
    sink: Option<std::sync::Arc<PullProgress>>,
    on: bool,
    tty: bool,
    total: u64,
    done: u64,
    started: Instant,
    drawn: Instant,
}

impl Progress {
    fn new(on: bool, total: u64) -> Progress {
        use std::io::IsTerminal;
        Progress {
            sink: None,
            on,
            tty: std::io::stderr().is_terminal(),
            total,
            done: 0,
            started: Instant::now(),
            drawn: Instant::now() - Duration::from_secs(1),
        }
    }

    /// One line of at most ~120 characters whatever the numbers (a file name is cut to 60).
    fn line(&self, file: &str) -> String {
        let pct = (u128::from(self.done) * 100)
            .checked_div(u128::from(self.total))
            .unwrap_or(100)
            .min(100) as u64;
        let filled = (pct / 4) as usize;
        // Control characters (a terminal's escapes) from the listing are not printed.
        let mut file: String = file
            .chars()
            .take(61)
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        if file.chars().count() > 60 {
            file = file.chars().take(60).chain(['…']).collect();
        }
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        format!(
            "[{}{}] {:>3}% {:>8.1} / {:.1} MiB  {:>6.1} MiB/s  {file}",
            "#".repeat(filled),
            ".".repeat(25 - filled),
            pct,
            self.done as f64 / 1048576.0,
            self.total as f64 / 1048576.0,
            self.done as f64 / 1048576.0 / secs,
        )
    }

    fn advance(&mut self, n: u64, file: &str) {
        self.done = self.done.saturating_add(n);
        if let Some(s) = &self.sink {
            s.done
                .store(self.done, std::sync::atomic::Ordering::Relaxed);
            if let Ok(mut f) = s.file.lock()
                && *f != file
            {
                *f = file.to_string();
            }
        }
        if self.on && self.tty && self.drawn.elapsed() >= Duration::from_millis(200) {
            self.drawn = Instant::now();
            eprint!("\r{}\x1b[K", self.line(file));
            let _ = std::io::stderr().flush();
        }
    }

    fn file_done(&mut self, file: &str) {
        if self.on {
            if self.tty {
                eprint!("\r{}\x1b[K", self.line(file));
            } else {
                eprintln!("{}", self.line(file));
            }
        }
    }

    fn finish(&self) {
        if self.on && self.tty {
            eprintln!();
        }
    }
}

fn header<'a>(resp: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    resp.headers().get(name).and_then(|v| v.to_str().ok())
}

/// An ETag without quotes or the weak prefix.
fn bare_etag(v: &str) -> String {
    v.trim()
        .trim_start_matches("W/")
        .trim_matches('"')
        .to_ascii_lowercase()
}

struct Client {
    /// Follows redirects (downloads).
    http: reqwest::Client,
    /// Does not (HEAD of resolve URLs, to read the hub's own headers).
    head: reqwest::Client,
    endpoint: url::Url,
    token: Option<String>,
}

impl Client {
    fn new(p: &Pull) -> Result<Client, PullError> {
        let endpoint = url::Url::parse(p.endpoint.trim_end_matches('/'))
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                PullError::Invalid(format!(
                    "HF_ENDPOINT {:?} is not an http(s) URL",
                    p.endpoint
                ))
            })?;
        let build = |redirects: bool| {
            reqwest::Client::builder()
                .user_agent(concat!("pictor/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(Duration::from_secs(30))
                .read_timeout(Duration::from_secs(60))
                .redirect(if redirects {
                    reqwest::redirect::Policy::limited(10)
                } else {
                    reqwest::redirect::Policy::none()
                })
                .build()
                .map_err(|e| PullError::Http(format!("cannot make an HTTP client: {e}")))
        };
        Ok(Client {
            http: build(true)?,
            head: build(false)?,
            endpoint,
            token: p.token.clone().filter(|t| !t.is_empty()),
        })
    }

    /// The token goes to the hub's own host only.
    fn auth(&self, req: reqwest::RequestBuilder, url: &url::Url) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) if url.origin() == self.endpoint.origin() => req.bearer_auth(t),
            _ => req,
        }
    }

    fn url(&self, path: &str) -> Result<url::Url, PullError> {
        let base = self.endpoint.as_str().trim_end_matches('/');
        url::Url::parse(&format!("{base}{path}"))
            .map_err(|e| PullError::Invalid(format!("bad URL {path:?}: {e}")))
    }
}

fn http_error(what: &str, resp: &reqwest::Response) -> PullError {
    let status = resp.status();
    let hint = match status.as_u16() {
        401 | 403 => {
            " (a gated or private repository: accept its licence on the hub and set HF_TOKEN)"
        }
        404 => " (no such repository, revision or file)",
        _ => "",
    };
    PullError::Http(format!("{what}: HTTP {status}{hint}"))
}

/// Fetches `p.repo` at `p.revision` into `p.dest`.
/// A repository's listing at a revision: its commit and files (with sizes and checksums).
async fn listing(client: &Client, repo: &str, revision: &str) -> Result<RepoInfo, PullError> {
    let rev = url_escape(revision);
    let info_url = client.url(&format!("/api/models/{repo}/revision/{rev}?blobs=true"))?;
    let resp = client
        .auth(client.http.get(info_url.clone()), &info_url)
        .send()
        .await
        .map_err(|e| {
            PullError::Http(format!(
                "cannot reach {}: {e}. Check this machine's connection; or use a mirror of the hub \
                 (HF_ENDPOINT=https://…); or download the model on another machine and install \
                 its folder or .safetensors file with `pictor models add NAME PATH`",
                client.endpoint
            ))
        })?;
    if !resp.status().is_success() {
        return Err(http_error(&format!("listing {repo}@{revision}"), &resp));
    }
    // Read within a cap: a mirror that streams without end must not fill the memory.
    let info: RepoInfo =
        crate::bounded::json(resp, crate::bounded::LISTING_MAX, "the hub's listing")
            .await
            .map_err(PullError::Http)?;
    if info.sha.len() < 7 || !info.sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(PullError::Http(format!(
            "the hub gave a bad commit id {:?}",
            info.sha
        )));
    }
    Ok(info)
}

pub async fn pull(p: &Pull) -> Result<PullReport, PullError> {
    check_repo(&p.repo)?;
    if p.revision.is_empty() || p.revision.contains("..") || p.revision.starts_with('/') {
        return Err(PullError::Invalid(format!("bad revision {:?}", p.revision)));
    }
    if p.dest.exists() {
        return Err(PullError::Invalid(format!(
            "{} already exists: remove the model first (`pictor models remove NAME --delete-files`)",
            p.dest.display()
        )));
    }
    let client = Client::new(p)?;
    let info = listing(&client, &p.repo, &p.revision).await?;
    let skip: Vec<&str> = p.extras.iter().map(Extra::folder).collect();
    let mut wanted = select(&info.siblings, p.variant.as_deref(), &skip)?;
    for e in &p.extras {
        check_repo(&e.repo)?;
        let safe = |f: &str| {
            !f.is_empty() && !f.contains("..") && !f.starts_with('/') && !f.contains('\\')
        };
        if !safe(&e.file) || !safe(&e.dest) || e.folder().is_empty() {
            return Err(PullError::Invalid(format!("bad extra file {e:?}")));
        }
        let other = listing(&client, &e.repo, "main").await?;
        let sibling = other
            .siblings
            .iter()
            .find(|s| s.rfilename == e.file)
            .ok_or_else(|| PullError::Invalid(format!("{} has no file {}", e.repo, e.file)))?;
        let mut w = sibling.wanted()?;
        w.path = e.dest.clone();
        w.origin = Some(Origin {
            repo: e.repo.clone(),
            commit: other.sha.clone(),
            file: e.file.clone(),
        });
        wanted.push(w);
    }
    let total = wanted
        .iter()
        .try_fold(0u64, |n, w| n.checked_add(w.size))
        .ok_or_else(|| {
            PullError::Http(
                "the hub's listing gives file sizes that add up past 2^64 bytes: not a real repository"
                    .into(),
            )
        })?;

    if let Some(approve) = &p.approve
        && !approve(total, wanted.len())
    {
        return Err(PullError::Invalid(
            "download not confirmed; nothing was fetched".into(),
        ));
    }
    let parent = p
        .dest
        .parent()
        .ok_or_else(|| PullError::Invalid("no folder for the model".into()))?;
    let name = p
        .dest
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| PullError::Invalid("bad model folder name".into()))?;
    let tmp = parent.join(format!(".partial-{name}"));
    // Enough room for what is not on disk yet (files fetched or partly fetched before count),
    // checked before anything is written.
    let on_disk: u64 = wanted
        .iter()
        .map(|w| {
            let done = std::fs::metadata(tmp.join(&w.path)).map_or(0, |m| m.len().min(w.size));
            let part = std::fs::metadata(tmp.join(format!("{}.part", w.path)))
                .map_or(0, |m| m.len().min(w.size));
            done.max(part)
        })
        .sum();
    let needed = total.saturating_sub(on_disk);
    if let Some(free) = free_space(parent)
        && needed.saturating_add(DISK_MARGIN) > free
    {
        return Err(PullError::Invalid(format!(
            "not enough disk space: the download needs {} more ({} in all), and {} has {} free (Pictor keeps {} spare); free some space or put the data folder on a larger disk",
            crate::bounded::size_text(needed),
            crate::bounded::size_text(total),
            parent.display(),
            crate::bounded::size_text(free),
            crate::bounded::size_text(DISK_MARGIN)
        )));
    }
    std::fs::create_dir_all(&tmp).map_err(io(format!("cannot create {}", tmp.display())))?;
    // A partial download of another commit is of no use.
    // (The other repositories' commits too: their files are taken from their `main`, which
    // may have moved since an interrupted run.)
    let marker = tmp.join(".commit");
    let stamp = std::iter::once(info.sha.clone())
        .chain(
            wanted
                .iter()
                .filter_map(|w| w.origin.as_ref())
                .map(|o| format!("{}@{}", o.repo, o.commit)),
        )
        .collect::<Vec<_>>()
        .join("\n");
    let previous =
        crate::bounded::read_text(&marker, 64 * 1024, "a download marker").unwrap_or_default();
    if !previous.is_empty() && previous.trim() != stamp {
        std::fs::remove_dir_all(&tmp).map_err(io(format!("cannot clear {}", tmp.display())))?;
        std::fs::create_dir_all(&tmp).map_err(io(format!("cannot create {}", tmp.display())))?;
    }
    std::fs::write(&marker, &stamp).map_err(io("cannot write the download marker"))?;

    let mut progress = Progress::new(p.progress, total);
    progress.sink = p.sink.clone();
    if let Some(s) = &p.sink {
        s.total.store(total, std::sync::atomic::Ordering::Relaxed);
    }
    let mut resumed = 0u64;
    for w in &wanted {
        match fetch_file(&client, &p.repo, &info.sha, w, &tmp, &mut progress).await {
            Ok(n) => resumed += n,
            Err(PullError::Cancelled) => {
                // A cancelled download frees its space.
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(PullError::Cancelled);
            }
            Err(e) => return Err(e),
        }
    }
    progress.finish();
    let _ = std::fs::remove_file(&marker);
    let source = serde_json::json!({
        "repo": p.repo,
        "revision": p.revision,
        "commit": info.sha,
        "endpoint": client.endpoint.as_str(),
        "files": wanted.iter().map(|w| {
            let mut f = serde_json::json!({
                "path": w.path,
                "size": w.size,
                match &w.check { Check::Sha256(_) => "sha256", Check::GitBlob(_) => "git_blob" }:
                    match &w.check { Check::Sha256(h) | Check::GitBlob(h) => h },
            });
            if let Some(o) = &w.origin {
                f["repo"] = o.repo.clone().into();
                f["commit"] = o.commit.clone().into();
                f["file"] = o.file.clone().into();
            }
            f
        }).collect::<Vec<_>>(),
    });
    std::fs::write(
        tmp.join("pictor-source.json"),
        serde_json::to_vec_pretty(&source).unwrap_or_default(),
    )
    .map_err(io("cannot write pictor-source.json"))?;
    std::fs::rename(&tmp, &p.dest).map_err(io(format!(
        "cannot move the download to {}",
        p.dest.display()
    )))?;
    Ok(PullReport {
        repo: p.repo.clone(),
        commit: info.sha,
        files: wanted.len(),
        bytes: total,
        resumed_bytes: resumed,
        path: p.dest.clone(),
    })
}

fn url_escape(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// What `pictor-source.json` (written when a model was pulled) records: the repository, the
/// commit and every file with its size and checksum.
struct Recorded {
    repo: String,
    commit: String,
    files: Vec<Wanted>,
}

fn recorded(dir: &Path) -> Result<Recorded, String> {
    let source = dir.join("pictor-source.json");
    let text = crate::bounded::read_text(&source, crate::bounded::CONFIG_MAX, "a download record")
        .map_err(|e| format!("{e} (only models pulled from the hub record their checksums)"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", source.display()))?;
    let bad = |m: &str| format!("{}: {m}", source.display());
    let repo = v["repo"]
        .as_str()
        .ok_or_else(|| bad("no repository"))?
        .to_string();
    check_repo(&repo).map_err(|e| bad(&e.to_string()))?;
    let commit = v["commit"]
        .as_str()
        .ok_or_else(|| bad("no commit"))?
        .to_string();
    if commit.len() < 7 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad("a bad commit id"));
    }
    let mut files = Vec::new();
    for f in v["files"].as_array().cloned().unwrap_or_default() {
        let Some(path) = f["path"].as_str().filter(|p| {
            !p.is_empty() && !p.contains("..") && !p.starts_with('/') && !p.contains('\\')
        }) else {
            return Err(bad("a file without a safe path"));
        };
        let check = match (f["sha256"].as_str(), f["git_blob"].as_str()) {
            (Some(h), _) => Check::Sha256(h.to_ascii_lowercase()),
            (None, Some(h)) => Check::GitBlob(h.to_ascii_lowercase()),
            _ => return Err(bad(&format!("{path} has no checksum"))),
        };
        let origin = match (f["repo"].as_str(), f["commit"].as_str(), f["file"].as_str()) {
            (None, None, None) => None,
            (Some(repo), Some(commit), Some(file)) => {
                check_repo(repo).map_err(|e| bad(&e.to_string()))?;
                let hex = commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit());
                let safe = !file.is_empty()
                    && !file.contains("..")
                    && !file.starts_with('/')
                    && !file.contains('\\');
                if !hex || !safe {
                    return Err(bad(&format!("{path} has a bad origin")));
                }
                Some(Origin {
                    repo: repo.into(),
                    commit: commit.into(),
                    file: file.into(),
                })
            }
            _ => return Err(bad(&format!("{path} has half an origin"))),
        };
        files.push(Wanted {
            path: path.to_string(),
            size: f["size"].as_u64().unwrap_or(0),
            check,
            origin,
        });
    }
    Ok(Recorded {
        repo,
        commit,
        files,
    })
}

/// The recorded files that are missing or do not match their checksum, with why.
fn damaged(dir: &Path, files: &[Wanted]) -> Vec<(Wanted, &'static str)> {
    let mut out = Vec::new();
    for w in files {
        let full = dir.join(&w.path);
        let want = match &w.check {
            Check::Sha256(h) | Check::GitBlob(h) => h,
        };
        let mut hasher = Hasher::new(&w.check, w.size);
        match hash_existing(&full, &mut hasher) {
            _ if !full.is_file() => out.push((w.clone(), "missing")),
            Ok(n) if n == w.size && hasher.hex() == *want => {}
            Ok(_) => out.push((w.clone(), "checksum differs")),
            Err(_) => out.push((w.clone(), "unreadable")),
        }
    }
    out
}

/// Checks a pulled model's files against the checksums recorded when it was pulled: the number
/// of files checked, or which differ or are missing.
pub fn verify(dir: &Path) -> Result<usize, String> {
    let r = recorded(dir)?;
    let broken = damaged(dir, &r.files);
    if broken.is_empty() {
        Ok(r.files.len())
    } else {
        Err(format!(
            "{} of {} files are damaged: {}. Repair downloads them again",
            broken.len(),
            r.files.len(),
            broken
                .iter()
                .map(|(w, why)| format!("{} ({why})", w.path))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// Downloads again, from the commit recorded when the model was pulled, the files of `dir`
/// that are missing or no longer match their checksums (each checked, then moved into place);
/// the number of files fetched.
pub async fn repair(
    endpoint: &str,
    token: Option<String>,
    dir: &Path,
    sink: Option<std::sync::Arc<PullProgress>>,
) -> Result<usize, PullError> {
    let d = dir.to_path_buf();
    let (r, broken) = tokio::task::spawn_blocking(move || {
        let r = recorded(&d)?;
        let broken = damaged(&d, &r.files);
        Ok::<_, String>((r, broken))
    })
    .await
    .map_err(|e| PullError::Invalid(e.to_string()))?
    .map_err(PullError::Invalid)?;
    let client = Client::new(&Pull {
        endpoint: endpoint.to_string(),
        token,
        repo: r.repo.clone(),
        revision: r.commit.clone(),
        variant: None,
        dest: dir.to_path_buf(),
        progress: false,
        approve: None,
        sink: None,
        extras: Vec::new(),
    })?;
    let total = broken
        .iter()
        .map(|(w, _)| w.size)
        .fold(0u64, u64::saturating_add);
    let mut progress = Progress::new(false, total);
    progress.sink = sink.clone();
    if let Some(s) = &sink {
        s.total.store(total, std::sync::atomic::Ordering::Relaxed);
    }
    for (w, _) in &broken {
        let _ = std::fs::remove_file(dir.join(&w.path));
        fetch_file(&client, &r.repo, &r.commit, w, dir, &mut progress).await?;
    }
    Ok(broken.len())
}

/// Hashes what is already in `path` (a partial file from before).
fn hash_existing(path: &Path, hasher: &mut Hasher) -> std::io::Result<u64> {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        hasher.update(&buf[..k]);
        n += k as u64;
    }
}

/// The download loop's word for a cancellation (its errors are strings).
const CANCELLED: &str = "cancelled";

/// Fetches one file into `dir` (resuming a `.part`), checks it and moves it into place.
/// Returns how many bytes were already on disk.
async fn fetch_file(
    client: &Client,
    repo: &str,
    commit: &str,
    w: &Wanted,
    dir: &Path,
    progress: &mut Progress,
) -> Result<u64, PullError> {
    let dest = dir.join(&w.path);
    if let Some(folder) = dest.parent() {
        std::fs::create_dir_all(folder)
            .map_err(io(format!("cannot create {}", folder.display())))?;
    }
    // Already fetched and checked by an earlier run.
    if std::fs::metadata(&dest).is_ok_and(|m| m.len() == w.size) {
        progress.advance(w.size, &w.path);
        progress.file_done(&w.path);
        return Ok(w.size);
    }
    let part = dir.join(format!("{}.part", w.path));
    let (repo, commit, remote) = match &w.origin {
        Some(o) => (o.repo.as_str(), o.commit.as_str(), o.file.as_str()),
        None => (repo, commit, w.path.as_str()),
    };
    let resolve = client.url(&format!(
        "/{repo}/resolve/{commit}/{}",
        remote
            .split('/')
            .map(url_escape)
            .collect::<Vec<_>>()
            .join("/")
    ))?;

    // The hub's own headers, before any redirect.
    let head = client
        .auth(client.head.head(resolve.clone()), &resolve)
        .send()
        .await
        .map_err(|e| PullError::Http(format!("{}: {e}", w.path)))?;
    if !(head.status().is_success() || head.status().is_redirection()) {
        return Err(http_error(&w.path, &head));
    }
    if let Some(c) = header(&head, "x-repo-commit")
        && !c.eq_ignore_ascii_case(commit)
    {
        return Err(PullError::Http(format!(
            "{}: the hub served commit {c}, not {commit}",
            w.path
        )));
    }
    let etag = header(&head, "x-linked-etag")
        .or_else(|| header(&head, "etag"))
        .map(bare_etag);
    let expected = match &w.check {
        Check::Sha256(h) | Check::GitBlob(h) => h.clone(),
    };
    if let Some(e) = &etag
        && *e != expected
    {
        return Err(PullError::Checksum(format!(
            "{}: the hub's ETag {e} disagrees with its listing ({expected})",
            w.path
        )));
    }
    if let Some(size) = header(&head, "x-linked-size").and_then(|v| v.parse::<u64>().ok())
        && size != w.size
    {
        return Err(PullError::Checksum(format!(
            "{}: the hub says {size} bytes, its listing {}",
            w.path, w.size
        )));
    }
    let download = match header(&head, "location") {
        Some(loc) if head.status().is_redirection() => resolve
            .join(loc)
            .map_err(|e| PullError::Http(format!("{}: bad redirect {loc:?}: {e}", w.path)))?,
        _ => resolve.clone(),
    };

    let mut hasher = Hasher::new(&w.check, w.size);
    let mut have =
        hash_existing(&part, &mut hasher).map_err(io(format!("cannot read {}", part.display())))?;
    if have > w.size {
        let _ = std::fs::remove_file(&part);
        hasher = Hasher::new(&w.check, w.size);
        have = 0;
    }
    let resumed = have;
    progress.advance(have, &w.path);
    let mut tries = 0;
    while have < w.size {
        tries += 1;
        let mut req = client.auth(client.http.get(download.clone()), &download);
        if have > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let outcome = async {
            let mut resp = req.send().await.map_err(|e| e.to_string())?;
            match resp.status().as_u16() {
                206 => {
                    let start = header(&resp, "content-range")
                        .and_then(|v| v.strip_prefix("bytes "))
                        .and_then(|v| v.split('-').next())
                        .and_then(|v| v.parse::<u64>().ok());
                    if start != Some(have) {
                        return Err(format!("the server resumed at {start:?}, not {have}"));
                    }
                }
                200 => {
                    // The server ignored the range: start over.
                    if have > 0 {
                        progress.done = progress.done.saturating_sub(have);
                        have = 0;
                        hasher = Hasher::new(&w.check, w.size);
                        let _ = std::fs::remove_file(&part);
                    }
                }
                _ => return Err(format!("HTTP {}", resp.status())),
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&part)
                .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
            while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
                if have + chunk.len() as u64 > w.size {
                    return Err("more bytes than the hub said the file has".into());
                }
                file.write_all(&chunk)
                    .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
                hasher.update(&chunk);
                have += chunk.len() as u64;
                progress.advance(chunk.len() as u64, &w.path);
                if let Some(s) = &progress.sink {
                    s.fetched
                        .fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    if s.cancelled() {
                        return Err(CANCELLED.to_string());
                    }
                }
            }
            file.sync_all()
                .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
            if have < w.size {
                return Err("the server ended the download early".to_string());
            }
            Ok(())
        }
        .await;
        match outcome {
            Ok(()) => break,
            Err(e) if e == CANCELLED => return Err(PullError::Cancelled),
            Err(e) if tries >= TRIES => {
                return Err(PullError::Http(format!(
                    "{}: giving up after {TRIES} tries ({have} of {} bytes, kept for next time): {e}",
                    w.path, w.size
                )));
            }
            Err(e) => {
                tracing::warn!(file = %w.path, have, error = %e, "download interrupted; resuming");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(tries))).await;
            }
        }
    }
    let got = hasher.hex();
    if got != expected {
        let _ = std::fs::remove_file(&part);
        return Err(PullError::Checksum(format!(
            "{}: checksum mismatch (got {got}, the hub says {expected}); the file was deleted, run the pull again",
            w.path
        )));
    }
    std::fs::rename(&part, &dest).map_err(io(format!("cannot move {}", dest.display())))?;
    progress.file_done(&w.path);
    Ok(resumed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_progress_line_is_bounded_whatever_the_numbers() {
        let mut p = Progress::new(false, 4);
        p.advance(u64::MAX - 1, "unet/x.safetensors");
        p.advance(u64::MAX, "unet/x.safetensors");
        let name = format!("unet/{}\x1b[2J.safetensors", "a".repeat(5000));
        let line = p.line(&name);
        assert!(line.chars().count() < 160, "{line}");
        assert!(line.contains("100%") && !line.contains('\x1b'), "{line}");
        p.total = 0;
        assert!(p.line("x").contains("100%"));
        p.total = u64::MAX;
        p.done = u64::MAX / 2;
        assert!(p.line("x").contains(" 49%"), "{}", p.line("x"));
    }

    fn sib(name: &str, lfs: bool) -> Sibling {
        Sibling {
            rfilename: name.into(),
            size: Some(10),
            blob_id: Some("ab".into()),
            lfs: lfs.then(|| Lfs {
                sha256: "cd".into(),
                size: 10,
            }),
        }
    }

    #[test]
    fn one_variant_of_the_pipeline_files() {
        let files = [
            sib("model_index.json", false),
            sib("README.md", false),
            sib("unet/config.json", false),
            sib("unet/diffusion_pytorch_model.safetensors", true),
            sib("unet/diffusion_pytorch_model.fp16.safetensors", true),
            sib("unet/diffusion_pytorch_model.bin", true),
            sib("vae/diffusion_pytorch_model.fp16.safetensors", true),
            sib("text_encoder/model.safetensors", true),
            sib("tokenizer/merges.txt", false),
            sib("safety_checker/model.safetensors", true),
            sib("v1-5-pruned.ckpt", true),
        ];
        let plain: Vec<String> = select(&files, None, &[])
            .unwrap()
            .into_iter()
            .map(|w| w.path)
            .collect();
        assert!(plain.contains(&"unet/diffusion_pytorch_model.safetensors".to_string()));
        assert!(
            !plain
                .iter()
                .any(|p| p.ends_with(".bin") || p.ends_with(".ckpt") || p.contains("safety"))
        );
        // Only an fp16 VAE exists: that one.
        assert!(plain.contains(&"vae/diffusion_pytorch_model.fp16.safetensors".to_string()));
        let fp16: Vec<String> = select(&files, Some("fp16"), &[])
            .unwrap()
            .into_iter()
            .map(|w| w.path)
            .collect();
        assert!(fp16.contains(&"unet/diffusion_pytorch_model.fp16.safetensors".to_string()));
        assert!(!fp16.contains(&"unet/diffusion_pytorch_model.safetensors".to_string()));
        assert!(select(&[sib("../x", false)], None, &[]).is_err());
        assert!(
            select(&[sib("unet/a.safetensors", true)], None, &[]).is_err(),
            "no model_index.json"
        );
    }

    /// FLUX.1-schnell's repository with its transformer and T5 taken from GGUF repositories:
    /// their folders' configurations and tokenizers come, their float weights (and shard
    /// indexes) do not, nor the all-in-one files at the top.
    #[test]
    fn a_transformer_pipeline_without_the_weights_others_give() {
        let files = [
            sib("model_index.json", false),
            sib("flux1-schnell.safetensors", true),
            sib("ae.safetensors", true),
            sib("scheduler/scheduler_config.json", false),
            sib("transformer/config.json", false),
            sib(
                "transformer/diffusion_pytorch_model-00001-of-00003.safetensors",
                true,
            ),
            sib(
                "transformer/diffusion_pytorch_model.safetensors.index.json",
                false,
            ),
            sib("text_encoder/config.json", false),
            sib("text_encoder/model.safetensors", true),
            sib("text_encoder_2/config.json", false),
            sib("text_encoder_2/model-00001-of-00002.safetensors", true),
            sib("text_encoder_2/model.safetensors.index.json", false),
            sib("tokenizer_2/tokenizer.json", false),
            sib("vae/diffusion_pytorch_model.safetensors", true),
        ];
        let got: Vec<String> = select(&files, None, &["transformer", "text_encoder_2"])
            .unwrap()
            .into_iter()
            .map(|w| w.path)
            .collect();
        let mut want = vec![
            "model_index.json",
            "scheduler/scheduler_config.json",
            "text_encoder/config.json",
            "text_encoder/model.safetensors",
            "text_encoder_2/config.json",
            "tokenizer_2/tokenizer.json",
            "transformer/config.json",
            "vae/diffusion_pytorch_model.safetensors",
        ];
        let mut got = got;
        got.sort();
        want.sort();
        assert_eq!(got, want);
        // Without the GGUFs, the float transformer is fetched.
        let all = select(&files, None, &[]).unwrap();
        assert!(
            all.iter()
                .any(|w| w.path.starts_with("transformer/diffusion_pytorch_model-"))
        );
        // The catalogue's FLUX entry names its GGUFs.
        let extras = extras_for("black-forest-labs/FLUX.1-schnell");
        assert_eq!(extras.len(), 2);
        assert_eq!(
            extras.iter().map(Extra::folder).collect::<Vec<_>>(),
            ["transformer", "text_encoder_2"]
        );
        assert!(extras_for("someone/else").is_empty());
    }

    #[test]
    fn a_tiny_decoder_is_its_config_and_weights() {
        let files = [
            sib("config.json", false),
            sib("diffusion_pytorch_model.safetensors", true),
            sib("diffusion_pytorch_model.bin", true),
            sib("README.md", false),
            sib("images/example.png", true),
        ];
        let got: Vec<String> = select(&files, None, &[])
            .unwrap()
            .into_iter()
            .map(|w| w.path)
            .collect();
        assert_eq!(got, ["config.json", "diffusion_pytorch_model.safetensors"]);
    }

    #[test]
    fn variants_and_repo_ids() {
        assert_eq!(
            variant_of("diffusion_pytorch_model.fp16.safetensors").as_deref(),
            Some("fp16")
        );
        assert_eq!(
            variant_of("model.fp16-00001-of-00002.safetensors").as_deref(),
            Some("fp16")
        );
        assert_eq!(variant_of("model.safetensors"), None);
        assert!(check_repo("stabilityai/sd-turbo").is_ok());
        assert!(check_repo("../etc").is_err());
        assert!(check_repo("a/b/c").is_err());
    }
}
