//! End to end: a tiny diffusion model (the SD 1.5-architecture parity fixture) installed with
//! `pictor models add`, mapped to `fast` and to edits in the config file, and used through the
//! HTTP API of the real binary: generation, determinism by seed, img2img edits, the PNG
//! parameters, `/v1/models` naming the engine, and the books.
#![cfg(feature = "diffusion")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::{Api, ChildServer, cli_json, spawn_server};
use serde_json::{Value, json};

fn fixture_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model")
}

/// Sends a request and reads its JSON body (for the requests `Api` has no method for).
async fn json_of(req: reqwest::RequestBuilder) -> Value {
    req.send().await.unwrap().json().await.unwrap()
}

/// Runs a generate job to completion; the picture's PNG bytes.
async fn generate(server: &ChildServer, key: &str, model: &str, seed: u64) -> Vec<u8> {
    generate_with(server, key, json!({"model": model, "seed": seed})).await
}

/// A generate job with these request fields (and the test prompt), to its PNG.
async fn generate_with(server: &ChildServer, key: &str, fields: Value) -> Vec<u8> {
    let model = fields["model"].clone();
    let mut body = json!({"prompt": "a photo of a red car"});
    for (k, v) in fields.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (_, r) = server.generate(key, body).await;
    let job = r["job_id"].as_str().unwrap_or_else(|| panic!("{r}"));
    let done = server.finish(key, job).await;
    assert_eq!(done["status"], "done", "{model}: {done}");
    server.fetch(done["photo_url"].as_str().unwrap()).await
}

#[tokio::test]
async fn diffusion_model_serves_generate_and_edit_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let model = fixture_model();
    let added = cli_json(
        &d,
        &["models", "add", "tiny", model.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(added["model"]["name"], "tiny", "{added}");
    // The same model as an A1111-style single file, its configuration from the folder.
    let single = model.parent().unwrap().join("single_file.safetensors");
    let added = cli_json(
        &d,
        &[
            "models",
            "add",
            "tinyfile",
            single.to_str().unwrap(),
            "--json",
        ],
        None,
    );
    assert_eq!(added["model"]["layout"], "single_file", "{added}");
    let taesd = model
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("taesd/model")
        .to_str()
        .unwrap()
        .to_owned();
    let config = d.join("config.toml");
    let run = "steps = 4\nguidance = 7.5\nsampler = \"euler_a\"\nnegative_prompt = \"blurry\"\n";
    std::fs::write(
        &config,
        format!(
            "[diffusion.fast]\nmodel = \"tiny\"\n{run}\n[diffusion.artist]\nmodel = \"tinyfile\"\nconfig = \"tiny\"\n{run}\n[diffusion.\"0.2plus\"]\nmodel = \"tiny\"\ntiny_vae = {taesd:?}\n{run}\n[diffusion.edit]\nmodel = \"tiny\"\nsteps = 4\nguidance = 7.5\n"
        ),
    )
    .unwrap();
    cli_json(
        &d,
        &[
            "user",
            "add",
            "--email",
            "d@example.com",
            "--credits",
            "50",
            "--json",
        ],
        None,
    );
    let key = cli_json(
        &d,
        &["key", "issue", "--email", "d@example.com", "--json"],
        None,
    )["api_key"]
        .as_str()
        .unwrap()
        .to_string();

    let server = spawn_server(&d, &[("PICTOR_CONFIG", config.to_str().unwrap())]);

    // /v1/models names the engine of each model.
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    let engine = |id: &str| {
        models["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap()["engine"]
            .clone()
    };
    assert_eq!(engine("fast"), "diffusion:tiny", "{models}");
    assert_eq!(engine("artist"), "diffusion:tinyfile", "{models}");
    assert_eq!(engine("0.2plus"), "diffusion:tiny", "{models}");
    // A mapping stored from the console or the CLI does not override the config file's.
    let stored = cli_json(&d, &["models", "map", "fast", "tinyfile", "--json"], None);
    assert_eq!(stored["tier"], "fast", "{stored}");
    let now: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert_eq!(now["models"][0]["id"], "fast", "{now}");
    assert_eq!(
        now["models"][0]["engine"], "diffusion:tiny",
        "the config file wins: {now}"
    );
    cli_json(&d, &["models", "unmap", "fast", "--json"], None);

    let mut pictures = Vec::new();
    for seed in [7u64, 7, 8] {
        let bytes = generate(&server, &key, "fast", seed).await;
        let params = pictor::render::encode::read_parameters(&bytes).unwrap();
        assert!(
            params.starts_with("a photo of a red car")
                && params.contains(
                    "\nNegative prompt: blurry\nSteps: 4, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7.5, "
                ),
            "{params}"
        );
        assert!(
            params.contains(&format!("Seed: {seed}, Size: 64x64, Model hash: ")),
            "{params}"
        );
        assert!(
            params.contains("Model: tiny") && params.contains("RNG: CPU"),
            "{params}"
        );
        let img = image::load_from_memory(&bytes).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (1024, 1024));
        pictures.push(img);
    }
    assert_eq!(
        pictures[0].as_raw(),
        pictures[1].as_raw(),
        "the same seed gives the same picture"
    );
    assert_ne!(
        pictures[0].as_raw(),
        pictures[2].as_raw(),
        "another seed gives another picture"
    );
    // The job chooses A1111's GPU noise: the same seed, another picture, and the PNG says so.
    let bytes = generate_with(
        &server,
        &key,
        json!({"model": "fast", "seed": 7, "noise": "a1111-gpu"}),
    )
    .await;
    let params = pictor::render::encode::read_parameters(&bytes).unwrap();
    assert!(
        params.contains("RNG: NV") && params.contains("Noise source: a1111-gpu"),
        "{params}"
    );
    let nv = image::load_from_memory(&bytes).unwrap().to_rgb8();
    assert_ne!(
        nv.as_raw(),
        pictures[0].as_raw(),
        "GPU noise is another noise"
    );
    // The single file, same settings and seed: the very same picture as the folder.
    let bytes = generate(&server, &key, "artist", 7).await;
    let params = pictor::render::encode::read_parameters(&bytes).unwrap();
    assert!(params.contains("Model: tinyfile"), "{params}");
    // A single file's "Model hash" is AUTOMATIC1111's: the file's SHA-256, first 10 digits.
    let listed = cli_json(&d, &["models", "list", "--json"], None);
    let file = listed["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "tinyfile")
        .unwrap()["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let sha = pictor::models::sha256_file(std::path::Path::new(&file)).unwrap();
    assert!(
        params.contains(&format!("Model hash: {}, Model: tinyfile", &sha[..10])),
        "{params}"
    );
    // artist is delivered larger (1536²) than fast (1024²): both are the same 64² render
    // scaled up, so scaled back down to 64² they agree within resampling rounding.
    let small = |img: &image::RgbImage| {
        image::imageops::resize(img, 64, 64, image::imageops::FilterType::Triangle).into_raw()
    };
    let from_file = image::load_from_memory(&bytes).unwrap().to_rgb8();
    let (a, b) = (small(&from_file), small(&pictures[0]));
    let worst = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).max().unwrap();
    let other = small(&pictures[2]);
    let apart = a
        .iter()
        .zip(&other)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap();
    assert!(
        worst <= 4 && apart > 40,
        "the single file renders the folder's picture: {worst} (another seed: {apart})"
    );
    // The tiny decoder: the same latents, another decoder, another (real) picture.
    let bytes = generate(&server, &key, "0.2plus", 7).await;
    let tiny = small(&image::load_from_memory(&bytes).unwrap().to_rgb8());
    let differs = tiny
        .iter()
        .zip(&a)
        .filter(|(x, y)| x.abs_diff(**y) > 8)
        .count();
    let mean = |v: &[u8]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
    assert!(
        differs > tiny.len() / 10,
        "the tiny decoder made the VAE's picture: {differs} of {} differ; means {} vs {}",
        tiny.len(),
        mean(&tiny),
        mean(&a)
    );
    // A real picture, not a flat fill: the pixels vary.
    let px = pictures[0].as_raw();
    let mean = px.iter().map(|&v| f64::from(v)).sum::<f64>() / px.len() as f64;
    let var = px
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / px.len() as f64;
    assert!(var > 10.0, "variance {var}");

    // An edit the instruction filters cannot do goes through img2img; one they can stays exact.
    let source = {
        let img = image::RgbImage::from_fn(96, 64, |x, y| {
            image::Rgb([(x * 2) as u8, (y * 3) as u8, 128])
        });
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    };
    for (instruction, diffusion) in [("add a small red hat", true), ("rotate 90 degrees", false)] {
        let form = reqwest::multipart::Form::new()
            .text("prompt", instruction)
            .part(
                "image",
                reqwest::multipart::Part::bytes(source.clone())
                    .file_name("s.png")
                    .mime_str("image/png")
                    .unwrap(),
            );
        let r: Value = json_of(
            server
                .http()
                .post(server.url("/api/pictor/v1/edit"))
                .bearer_auth(&key)
                .multipart(form),
        )
        .await;
        let job = r["job_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_string();
        let done = server.finish(&key, &job).await;
        assert_eq!(done["status"], "done", "{instruction}: {done}");
        let bytes = server.fetch(done["photo_url"].as_str().unwrap()).await;
        let params = pictor::render::encode::read_parameters(&bytes).unwrap();
        assert_eq!(
            params.contains("Denoising strength: 0.6"),
            diffusion,
            "{instruction}: {params}"
        );
        let img = image::load_from_memory(&bytes).unwrap();
        let expected = if diffusion { (96, 64) } else { (64, 96) };
        assert_eq!((img.width(), img.height()), expected, "{instruction}");
    }

    // Three fast generations, one artist generation and two edits were charged, nothing else.
    let me: Value = server.get(&key, "/api/pictor/v1/me").await.1;
    let edit_price = models["edit_price"].as_i64().unwrap();
    let price = |id: &str| {
        models["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap()["price"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(
        me["balance"].as_i64().unwrap(),
        50 - 4 * price("fast") - price("artist") - price("0.2plus") - 2 * edit_price,
        "{me}"
    );
    drop(server);

    // Progress and cancel through the API, on one render slot: both models render 150
    // denoising steps (the most a mapping allows).
    std::fs::write(
        &config,
        "[diffusion.fast]\nmodel = \"tiny\"\nsteps = 150\nsampler = \"euler\"\n[diffusion.artist]\nmodel = \"tiny\"\nsteps = 150\nsampler = \"euler\"\n",
    )
    .unwrap();
    let server = spawn_server(
        &d,
        &[
            ("PICTOR_CONFIG", config.to_str().unwrap()),
            ("PICTOR_RENDER_WORKERS", "1"),
        ],
    );
    let create = |model: &'static str| {
        let (server, key) = (&server, key.clone());
        async move {
            let body = json!({"prompt": "a red car", "model": model, "seed": 3, "enhance": false});
            let (_, r) = server.generate(&key, body).await;
            r["job_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{r}"))
                .to_string()
        }
    };
    // Followed with `wait_for=progress`: one answer per step or so, never going back.
    let job = create("fast").await;
    let mut seen = Vec::new();
    let mut since = String::new();
    let done = loop {
        let v: Value = server
            .get(
                &key,
                &format!("/api/pictor/v1/jobs/{job}?wait=30&wait_for=progress&since={since}"),
            )
            .await
            .1;
        since = v["state_token"].as_str().unwrap_or_default().to_string();
        if let Some(p) = v["progress"].as_f64() {
            seen.push(p);
        }
        if v["status"] == "done" || v["status"] == "failed" {
            break v;
        }
    };
    assert_eq!(done["status"], "done", "{done}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    let steps_seen = seen.iter().filter(|p| **p > 0.05 && **p < 0.95).count();
    assert!(steps_seen >= 5, "denoising steps seen: {seen:?}");
    let full = done["finished_at"].as_u64().unwrap() - done["started_at"].as_u64().unwrap();

    // The same render cancelled after its first step: failed at once with the credits back, and
    // the render slot free again long before the loop could have ended.
    let before: Value = server.get(&key, "/api/pictor/v1/me").await.1;
    let long = create("artist").await;
    for _ in 0..600 {
        let v: Value = server
            .get(
                &key,
                &format!("/api/pictor/v1/jobs/{long}?wait=10&wait_for=progress"),
            )
            .await
            .1;
        if v["progress"].as_f64().is_some_and(|p| p > 0.05) {
            break;
        }
    }
    let cancelled_at = std::time::Instant::now();
    let cancelled: Value = json_of(
        server
            .http()
            .post(server.url(&format!("/api/pictor/v1/jobs/{long}/cancel")))
            .bearer_auth(&key),
    )
    .await;
    assert_eq!(cancelled["error_code"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["balance"], before["balance"], "{cancelled}");
    // The user's next job can start once the render has stopped (it holds the active slot
    // until then).
    let freed_after = loop {
        let me: Value = server.get(&key, "/api/pictor/v1/me").await.1;
        if me["active_job"].is_null() {
            break cancelled_at.elapsed().as_millis() as u64;
        }
        assert!(
            cancelled_at.elapsed().as_millis() < u128::from(full) * 2,
            "the cancelled render never stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let next = create("fast").await;
    let next = server.finish(&key, &next).await;
    assert_eq!(next["status"], "done", "{next}");
    eprintln!(
        "150-step render: {full} ms, {} progress answers; slot freed {freed_after} ms after the cancel",
        seen.len()
    );
    // Left alone, the loop would have held the slot for most of `full`.
    assert!(
        freed_after < full / 3,
        "the slot was freed {freed_after} ms after the cancel (the whole render takes {full} ms)"
    );
    let twin = create("fast").await;
    let twin = server.finish(&key, &twin).await;
    let same = server.fetch(twin["photo_url"].as_str().unwrap()).await;
    let again = server.fetch(next["photo_url"].as_str().unwrap()).await;
    assert_eq!(
        image::load_from_memory(&same).unwrap().to_rgb8().as_raw(),
        image::load_from_memory(&again).unwrap().to_rgb8().as_raw(),
        "the same seed after a cancelled render gives the same picture"
    );
    drop(server);

    // A mapping to a model that is not installed stops the start with a clear message.
    std::fs::write(&config, "[diffusion.fast]\nmodel = \"missing\"\n").unwrap();
    let mut cmd = common::pictor_cmd(&d);
    let out = cmd
        .env("PICTOR_CONFIG", &config)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no installed model is named \"missing\""),
        "{err}"
    );
}

/// `pictor models map/unmap` against a running server: applied to the next job without a
/// restart, the family preset filling what is not given, bad values refused with nothing
/// changed, a mapped model not removable, `config show` naming each tier's source.
#[tokio::test]
async fn tiers_are_mapped_and_unmapped_without_a_restart() {
    use common::run_cli;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let model = fixture_model();
    cli_json(
        &d,
        &["models", "add", "tiny", model.to_str().unwrap(), "--json"],
        None,
    );
    let taesd = model
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("taesd/model");
    let added = cli_json(
        &d,
        &["models", "add", "taesd", taesd.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(added["model"]["kind"], "tiny_decoder", "{added}");
    let key = common::cli_user_key(&d, "t@example.com", 50);
    let server = spawn_server(&d, &[]);
    let fast = |models: &Value| {
        models["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == "fast")
            .cloned()
            .unwrap()
    };
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert_eq!(fast(&models)["engine"], "procedural", "{models}");
    assert_eq!(
        fast(&models)["label"],
        "Standard · built-in painter",
        "{models}"
    );

    // Mapped through the running server: the preset of the model's family (SD 1.x: DPM++ 2M
    // Karras, CFG 7) with the steps given.
    let mapped = cli_json(
        &d,
        &["models", "map", "fast", "tiny", "--steps", "2", "--json"],
        None,
    );
    assert_eq!(mapped["settings"]["steps"], 2, "{mapped}");
    assert_eq!(mapped["settings"]["sampler"], "dpm++_2m", "{mapped}");
    assert_eq!(mapped["settings"]["schedule"], "karras", "{mapped}");
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert_eq!(fast(&models)["engine"], "diffusion:tiny", "{models}");
    assert_eq!(fast(&models)["label"], "Standard · tiny", "{models}");
    let bytes = generate(&server, &key, "fast", 3).await;
    let params = pictor::render::encode::read_parameters(&bytes).unwrap();
    assert!(
        params.contains("Steps: 2, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7"),
        "{params}"
    );
    assert!(params.contains("Model: tiny"), "{params}");
    // Where it was computed and what it holds, in the API, the CLI and the metrics.
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert_eq!(fast(&models)["device"], "cpu", "{models}");
    let held = fast(&models)["memory_bytes"].as_u64().unwrap_or(0);
    assert!(held > 0, "the model is loaded after its picture: {models}");
    let listed = cli_json(&d, &["models", "list", "--json"], None);
    assert_eq!(listed["device"]["id"], "cpu", "{listed}");
    let tiny = listed["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "tiny")
        .unwrap();
    assert_eq!(tiny["loaded_bytes"], held, "{listed}");
    assert_eq!(tiny["loaded_on"], "cpu", "{listed}");
    let (_, text, _) = run_cli(&d, &["models", "list"], None);
    assert!(
        text.contains("the running server's engine computes on the CPU")
            && text.contains("[loaded: ")
            && text.contains(" on cpu]"),
        "{text}"
    );
    // The admin channel serves /metrics to its token.
    let admin: Value =
        serde_json::from_slice(&std::fs::read(d.join("admin.json")).unwrap()).unwrap();
    let metrics = server
        .http()
        .get(format!("{}/metrics", admin["url"].as_str().unwrap()))
        .bearer_auth(admin["token"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "pictor_model_memory_bytes{{model=\"tiny\",device=\"cpu\"}} {held}"
        )),
        "{metrics}"
    );
    assert!(
        !metrics.contains("pictor_gpu_memory_used_bytes{"),
        "no GPU here"
    );
    // `pictor render --model fast` renders as the server's fast tier does.
    let out = d.join("fast.png");
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            "fast",
            "--prompt",
            "a photo of a red car",
            "--seed",
            "3",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let rendered = pictor::render::encode::read_parameters(&std::fs::read(&out).unwrap()).unwrap();
    assert!(
        rendered.contains("Steps: 2, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7"),
        "{rendered}"
    );
    assert!(rendered.contains("Model: tiny"), "{rendered}");

    // Bad requests change nothing.
    for (args, why) in [
        (vec!["models", "map", "turbo", "tiny"], "not a tier"),
        (vec!["models", "map", "fast", "nope"], "no installed model"),
        (vec!["models", "map", "fast", "taesd"], "tiny decoder"),
        (
            vec!["models", "map", "fast", "tiny", "--steps", "0"],
            "from 1 to 150",
        ),
        (
            vec!["models", "map", "fast", "tiny", "--guidance", "31"],
            "from 0 to 30",
        ),
        (
            vec!["models", "map", "fast", "tiny", "--sampler", "bogus"],
            "one of euler",
        ),
        (
            vec![
                "models",
                "map",
                "fast",
                "tiny",
                "--sampler",
                "euler_a",
                "--schedule",
                "karras",
            ],
            "no Karras schedule",
        ),
        (
            vec!["models", "map", "fast", "tiny", "--size", "100"],
            "multiple of 64",
        ),
        (
            vec!["models", "map", "fast", "tiny", "--tiny-vae", "tiny"],
            "not a tiny decoder",
        ),
        (
            vec!["models", "map", "fast", "tiny", "--text-weights", "int4"],
            "\"float32\" or \"int8\"",
        ),
        (
            vec!["models", "map", "fast", "tiny", "--unet-weights", "int4"],
            "unet_weights: \"float32\" or \"int8\"",
        ),
        (vec!["models", "remove", "tiny"], "draws the fast tier"),
        (vec!["models", "unmap", "artist"], "not mapped"),
    ] {
        let (code, _, err) = run_cli(&d, &args, None);
        assert_ne!(code, 0, "{args:?} succeeded");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let shown = cli_json(&d, &["config", "show", "--json"], None);
    let tiers = shown["tiers"].as_array().unwrap();
    assert_eq!(tiers[0]["tier"], "fast", "{shown}");
    assert_eq!(tiers[0]["source"], "console", "{shown}");
    assert_eq!(tiers[0]["model"], "tiny", "{shown}");
    assert_eq!(tiers[0]["settings"]["steps"], 2, "{shown}");
    assert_eq!(tiers[1]["source"], "default", "{shown}");

    // `models map fast tiny --steps 2` with these settings.
    let map_fast = |settings: &[&str]| {
        let mut args = vec!["models", "map", "fast", "tiny", "--steps", "2"];
        args.extend_from_slice(settings);
        args.push("--json");
        cli_json(&d, &args, None)
    };
    // With the tiny decoder: the next picture is decoded by it (another picture, same seed).
    map_fast(&["--tiny-vae", "taesd"]);
    let tiny_decoded = generate(&server, &key, "fast", 3).await;
    let pixels = |b: &[u8]| image::load_from_memory(b).unwrap().to_rgba8().into_raw();
    assert_ne!(
        pixels(&tiny_decoded),
        pixels(&bytes),
        "the tiny decoder made the same pixels"
    );

    // 8-bit text encoders: kept in the mapping, the model reloaded with them, the picture made
    // from slightly different embeddings (same seed, other pixels) and still a picture.
    let int8 = map_fast(&["--text-weights", "int8"]);
    assert_eq!(int8["settings"]["text_weights"], "int8", "{int8}");
    let shown = cli_json(&d, &["config", "show", "--json"], None);
    assert_eq!(
        shown["tiers"][0]["settings"]["text_weights"], "int8",
        "{shown}"
    );
    let int8_picture = generate(&server, &key, "fast", 3).await;
    assert_ne!(
        pixels(&int8_picture),
        pixels(&bytes),
        "the 8-bit text encoders made the float32 pixels"
    );
    let size = |b: &[u8]| {
        let i = image::load_from_memory(b).unwrap();
        (i.width(), i.height())
    };
    assert_eq!(size(&int8_picture), size(&bytes));

    // And the UNet's transformer layers in 8 bits too (on CPUs with AVX-512 VNNI; elsewhere
    // they stay float32 and the picture is the one above).
    let both = map_fast(&["--text-weights", "int8", "--unet-weights", "int8"]);
    assert_eq!(both["settings"]["unet_weights"], "int8", "{both}");
    let int8_unet_picture = generate(&server, &key, "fast", 3).await;
    assert_eq!(size(&int8_unet_picture), size(&bytes));
    if pictor::render::diffusion::net::linear_int8::available() {
        assert_ne!(
            pixels(&int8_unet_picture),
            pixels(&int8_picture),
            "the 8-bit UNet made the float32 UNet's pixels"
        );
    }

    // Unmapped: the painter again, at once.
    let out = cli_json(&d, &["models", "unmap", "fast", "--json"], None);
    assert_eq!(out["removed"]["model"], "tiny", "{out}");
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert_eq!(fast(&models)["engine"], "procedural", "{models}");
    let painted = generate(&server, &key, "fast", 3).await;
    let params = pictor::render::encode::read_parameters(&painted).unwrap();
    assert!(!params.contains("Model: tiny"), "{params}");
    // Now it can go.
    cli_json(&d, &["models", "remove", "tiny", "--json"], None);
    server.terminate();
}

/// LoRAs end to end: installed with `pictor models add` (kind and architecture read off the
/// file, AUTOMATIC1111's addnet hash), refused as a tier's model, asked for per picture by
/// AUTOMATIC1111's prompt tags and by `loras`, recorded in the PNG's `Lora hashes`, and every
/// bad request refused with the documented error shape and nothing charged.
#[tokio::test]
async fn loras_are_installed_and_asked_for_per_picture() {
    use common::{assert_error, run_cli};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let model = fixture_model();
    let loras = model.parent().unwrap().parent().unwrap().join("lora");
    cli_json(
        &d,
        &["models", "add", "tiny", model.to_str().unwrap(), "--json"],
        None,
    );
    // The tiny SD 1.5 model's LoRAs have its 32-wide layers, which no published family has:
    // the file cannot tell, so `--for` says; SDXL's second text encoder tells by itself, and
    // a file that tells contradicts a wrong `--for`.
    let style = loras.join("sd15/style_peft.safetensors");
    let (code, _, err) = run_cli(&d, &["models", "add", "s", style.to_str().unwrap()], None);
    assert_ne!(code, 0);
    assert!(
        err.contains("say which with --for sd1, sd2 or sdxl"),
        "{err}"
    );
    let xl = loras.join("sdxl/style_peft.safetensors");
    let (code, _, err) = run_cli(
        &d,
        &["models", "add", "x", xl.to_str().unwrap(), "--for", "sd1"],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("a LoRA for SDXL, not SD 1.x"), "{err}");
    let mut hashes = std::collections::HashMap::new();
    for (name, file, arch, given) in [
        ("style", "sd15/style_peft.safetensors", "sd1", Some("sd1")),
        (
            "detail",
            "sd15/detail_kohya.safetensors",
            "sd1",
            Some("sd1"),
        ),
        ("xl", "sdxl/style_peft.safetensors", "sdxl", None),
    ] {
        let path = loras.join(file);
        let mut args = vec!["models", "add", name, path.to_str().unwrap(), "--json"];
        if let Some(a) = given {
            args.extend(["--for", a]);
        }
        let added = cli_json(&d, &args, None);
        assert_eq!(added["model"]["kind"], "lora", "{added}");
        assert_eq!(added["model"]["arch"], arch, "{added}");
        let hash = pictor::models::addnet_hash(&path).unwrap();
        assert_eq!(added["model"]["sha256"], hash, "the addnet hash: {added}");
        hashes.insert(name, hash[..12].to_owned());
    }
    let (_, text, _) = run_cli(&d, &["models", "list"], None);
    assert!(
        text.contains("[LoRA: <lora:style:1> in a prompt]"),
        "{text}"
    );
    // A LoRA is not a tier's model.
    let (code, _, err) = run_cli(&d, &["models", "map", "fast", "style"], None);
    assert_ne!(code, 0);
    assert!(err.contains("is a LoRA"), "{err}");

    let key = common::cli_user_key(&d, "l@example.com", 50);
    let server = spawn_server(&d, &[]);
    let balance = |me: Value| me["balance"].as_i64().unwrap();
    let start = balance(server.me(&key).await);
    // The built-in painter takes no LoRAs.
    let r = server
        .generate(&key, json!({"prompt": "a red car <lora:style:1>"}))
        .await;
    assert_error(&r, 400, "invalid_request");
    assert!(
        r.1["error"].as_str().unwrap().contains("built-in painter"),
        "{r:?}"
    );

    cli_json(
        &d,
        &["models", "map", "fast", "tiny", "--steps", "2", "--json"],
        None,
    );
    let picture = |bytes: &[u8]| image::load_from_memory(bytes).unwrap().to_rgb8();
    // The models list names the LoRAs each model can take: the SD 1.x ones for the tiny SD 1.5
    // model on fast, none for the tiers the painter draws.
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    let loras_of = |id: &str| {
        models["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .unwrap()["loras"]
            .clone()
    };
    assert_eq!(loras_of("fast"), json!(["detail", "style"]), "{models}");
    assert_eq!(loras_of("artist"), json!([]), "{models}");
    let plain = generate_with(&server, &key, json!({"model": "fast", "seed": 5})).await;
    let tagged = generate_with(
        &server,
        &key,
        json!({"model": "fast", "seed": 5, "prompt": "a photo of a red car <lora:style:0.7>"}),
    )
    .await;
    let params = pictor::render::encode::read_parameters(&tagged).unwrap();
    let prompt = params.lines().next().unwrap();
    assert!(
        prompt.starts_with("a photo of a red car") && prompt.ends_with(" <lora:style:0.7>"),
        "the (enhanced) prompt with its tag: {params}"
    );
    assert!(
        params.contains(&format!("Lora hashes: \"style: {}\"", hashes["style"])),
        "{params}"
    );
    assert_ne!(
        picture(&plain),
        picture(&tagged),
        "the LoRA changes the picture"
    );
    // The same LoRA asked for in the request: the same picture (the tag is not read as text).
    let fielded = generate_with(
        &server,
        &key,
        json!({"model": "fast", "seed": 5, "loras": [{"name": "style", "weight": 0.7}]}),
    )
    .await;
    assert_eq!(picture(&fielded), picture(&tagged));
    let params = pictor::render::encode::read_parameters(&fielded).unwrap();
    assert!(
        params
            .lines()
            .next()
            .unwrap()
            .ends_with(" <lora:style:0.7>"),
        "a LoRA asked for in `loras` is written into the prompt as A1111 needs it: {params}"
    );
    // Two at once, one from each.
    let both = generate_with(
        &server,
        &key,
        json!({"model": "fast", "seed": 5, "prompt": "a photo of a red car <lora:style:0.7>",
               "loras": [{"name": "detail"}]}),
    )
    .await;
    let params = pictor::render::encode::read_parameters(&both).unwrap();
    assert!(
        params.contains(&format!(
            "Lora hashes: \"style: {}, detail: {}\"",
            hashes["style"], hashes["detail"]
        )),
        "{params}"
    );
    assert_ne!(picture(&both), picture(&tagged));
    let spent = balance(server.me(&key).await);
    assert!(spent < start, "four pictures were paid for");

    // Refused, each with the error shape, and nothing charged or queued.
    for (body, says) in [
        (json!({"prompt": "x <lora:nope:1>"}), "no LoRA is installed"),
        (
            json!({"prompt": "x", "loras": [{"name": "xl"}]}),
            "is for SDXL",
        ),
        (json!({"prompt": "x <lora:style:lots>"}), "not a weight"),
        (json!({"prompt": "x", "loras": "style"}), "must be a list"),
        (
            json!({"prompt": "x", "loras": [{"name": "style", "weight": 11}]}),
            "from -10 to 10",
        ),
        (
            json!({"prompt": "x", "loras": [{"name": "style", "strength": 1}]}),
            "unknown field",
        ),
        (
            json!({"prompt": "x <lora:tiny:1>"}),
            "no LoRA is installed under the name \"tiny\"",
        ),
        (
            json!({"prompt": "x", "loras": vec![json!({"name": "style"}); 9]}),
            "at most 8",
        ),
    ] {
        let r = server.generate(&key, body.clone()).await;
        assert_error(&r, 400, "invalid_request");
        assert!(
            r.1["error"].as_str().unwrap().contains(says),
            "{body}: {r:?}"
        );
    }
    assert_eq!(balance(server.me(&key).await), spent, "nothing charged");
    let (s, history) = server.get(&key, "/api/pictor/v1/jobs").await;
    assert_eq!(s, 200, "{history}");
    assert_eq!(
        history["jobs"].as_array().map(Vec::len),
        Some(4),
        "no job made for the refused requests: {history}"
    );

    // The job says which LoRAs it used.
    let (_, r) = server
        .generate(
            &key,
            json!({"prompt": "a red car <lora:style:0.5:1.5>", "model": "fast",
                   "loras": [{"name": "detail", "weight": 0.7}]}),
        )
        .await;
    let done = server.finish(&key, r["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(
        done["loras"],
        json!([{"name": "style", "weight": 1.5, "text_weight": 0.5},
               {"name": "detail", "weight": 0.7, "text_weight": 0.7}]),
        "{done}"
    );

    // Edits read the instruction's tags too, for the model that draws the edit tier: the
    // LoRA merged into it, the job and the PNG naming it; one for another family is refused
    // before the upload is stored, and nothing is charged.
    cli_json(
        &d,
        &["models", "map", "edit", "tiny", "--steps", "2", "--json"],
        None,
    );
    let source = {
        let img = image::RgbImage::from_fn(64, 64, |x, y| {
            image::Rgb([(x * 3) as u8, (y * 3) as u8, 90])
        });
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    };
    let form = |instruction: &str| {
        reqwest::multipart::Form::new()
            .text("prompt", instruction.to_string())
            .part(
                "image",
                reqwest::multipart::Part::bytes(source.clone())
                    .file_name("s.png")
                    .mime_str("image/png")
                    .unwrap(),
            )
    };
    let (s, r) = server
        .edit_form(&key, form("make it a sunny day <lora:style:0.8>"))
        .await;
    assert_eq!(s, 202, "{r}");
    let done = server.finish(&key, r["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(
        done["loras"],
        json!([{"name": "style", "weight": 0.8, "text_weight": 0.8}]),
        "{done}"
    );
    let params = pictor::render::encode::read_parameters(
        &server.fetch(done["photo_url"].as_str().unwrap()).await,
    )
    .unwrap();
    for want in [
        format!("Lora hashes: \"style: {}\"", hashes["style"]),
        "Denoising strength".to_string(),
        "<lora:style:0.8>".to_string(),
    ] {
        assert!(params.contains(&want), "{want:?} in {params}");
    }
    let before = balance(server.me(&key).await);
    let sources =
        |d: &std::path::Path| std::fs::read_dir(d.join("sources")).map_or(0, |r| r.count());
    let stored = sources(&d);
    let r = server
        .edit_form(&key, form("make it a sunny day <lora:xl:1>"))
        .await;
    assert_error(&r, 400, "invalid_request");
    assert!(
        r.1["error"].as_str().unwrap().contains("is for SDXL"),
        "{r:?}"
    );
    assert_eq!(balance(server.me(&key).await), before, "nothing charged");
    assert_eq!(sources(&d), stored, "nothing stored");

    // `pictor render` reads the tags too, and re-renders the PNG it wrote from its parameters.
    let out = d.join("lora.png");
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            "tiny",
            "--prompt",
            "a photo of a red car <lora:style:0.7>",
            "--steps",
            "2",
            "--seed",
            "5",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let first = std::fs::read(&out).unwrap();
    let params = pictor::render::encode::read_parameters(&first).unwrap();
    assert!(
        params.contains(&format!("Lora hashes: \"style: {}\"", hashes["style"])),
        "{params}"
    );
    let again = d.join("again.png");
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--from-png",
            out.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        picture(&std::fs::read(&again).unwrap()),
        picture(&first),
        "the PNG's parameters (its tag and Lora hashes) make the same picture"
    );
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            "tiny",
            "--prompt",
            "x <lora:nope:1>",
            "--out",
            again.to_str().unwrap(),
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("no such LoRA is installed here"), "{err}");
}

/// A FLUX.1 model (the tiny FLUX.1-dev parity fixture) installed, mapped and drawing through
/// the API: its family and preset, the settings FLUX has not refused, a GGUF transformer in
/// place of the folder's, and the PNG parameters as Forge writes them for FLUX.
#[tokio::test]
async fn flux_models_are_installed_mapped_and_draw() {
    use common::run_cli;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let flux = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/flux/dev");
    let added = cli_json(
        &d,
        &["models", "add", "flux", flux.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(added["model"]["arch"], "flux", "{added}");
    assert_eq!(added["model"]["family"], "flux-dev", "{added}");
    // No negative prompt, no other sampler, no tiny decoder for FLUX.
    for bad in [
        vec!["--negative-prompt", "blurry"],
        vec!["--sampler", "dpm++_2m"],
        vec!["--text-weights", "int8"],
        vec!["--tiny-vae", flux.to_str().unwrap()],
    ] {
        let mut args = vec!["models", "map", "fast", "flux"];
        args.extend(bad.iter().copied());
        let (code, _, err) = run_cli(&d, &args, None);
        assert_ne!(code, 0, "{bad:?}");
        assert!(
            err.contains("not a setting of FLUX models"),
            "{bad:?}: {err}"
        );
    }
    // FLUX does not edit (yet): the edit tier is refused at mapping time, not at the first job.
    let (code, _, err) = run_cli(&d, &["models", "map", "edit", "flux"], None);
    assert_ne!(code, 0);
    assert!(
        err.contains("does not edit pictures with FLUX.1 yet"),
        "{err}"
    );
    // A part file must exist and be safetensors or GGUF.
    let (code, _, err) = run_cli(
        &d,
        &[
            "models",
            "map",
            "fast",
            "flux",
            "--transformer",
            "/nonexistent.gguf",
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("transformer"), "{err}");
    let mapped = cli_json(
        &d,
        &[
            "models", "map", "fast", "flux", "--steps", "2", "--size", "64", "--json",
        ],
        None,
    );
    assert_eq!(
        mapped["settings"]["guidance"], 3.5,
        "the dev preset: {mapped}"
    );
    let gguf = flux.join("transformer.gguf");
    cli_json(
        &d,
        &[
            "models",
            "map",
            "artist",
            "flux",
            "--steps",
            "2",
            "--size",
            "64",
            "--transformer",
            gguf.to_str().unwrap(),
            "--json",
        ],
        None,
    );

    // LoRAs for FLUX: the family read off the layers (kohya's BFL names, diffusers' single
    // blocks); an SD 1.x LoRA stays one.
    let loras = flux.parent().unwrap().parent().unwrap().join("lora");
    for (name, file, arch, given) in [
        ("flux-style", "flux/style_peft.safetensors", "flux", None),
        ("flux-detail", "flux/detail_kohya.safetensors", "flux", None),
        (
            "sd-style",
            "sd15/style_peft.safetensors",
            "sd1",
            Some("sd1"),
        ),
    ] {
        let path = loras.join(file);
        let mut args = vec!["models", "add", name, path.to_str().unwrap(), "--json"];
        if let Some(a) = given {
            args.extend(["--for", a]);
        }
        let added = cli_json(&d, &args, None);
        assert_eq!(added["model"]["kind"], "lora", "{added}");
        assert_eq!(added["model"]["arch"], arch, "{added}");
    }

    let key = common::cli_user_key(&d, "f@example.com", 80);
    let server = spawn_server(&d, &[]);
    let a = generate(&server, &key, "fast", 7).await;
    let b = generate(&server, &key, "fast", 7).await;
    let c = generate(&server, &key, "fast", 8).await;
    let pixels = |bytes: &[u8]| image::load_from_memory(bytes).unwrap().to_rgb8().into_raw();
    assert_eq!(pixels(&a), pixels(&b), "same seed, same picture");
    assert_ne!(pixels(&a), pixels(&c), "another seed, another picture");
    let params = pictor::render::encode::read_parameters(&a).unwrap();
    for want in [
        "Sampler: Euler",
        "Schedule type: Simple",
        "CFG scale: 1",
        "Distilled CFG Scale: 3.5",
        "Model: flux",
        "Size: 64x64",
    ] {
        assert!(params.contains(want), "{want:?} in {params}");
    }
    // The Q8_0 GGUF transformer draws close to the float one (same seed, same settings).
    let q = generate(&server, &key, "artist", 7).await;
    let (pa, pq) = (
        image::load_from_memory(&a).unwrap().to_rgb8(),
        image::load_from_memory(&q).unwrap().to_rgb8(),
    );
    let pq = image::imageops::resize(
        &pq,
        pa.width(),
        pa.height(),
        image::imageops::FilterType::Triangle,
    );
    let mean = pa
        .as_raw()
        .iter()
        .zip(pq.as_raw())
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs())
        .sum::<f64>()
        / pa.as_raw().len() as f64;
    assert!(mean < 8.0, "GGUF against float: mean difference {mean}/255");
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert!(models.to_string().contains("diffusion:flux"), "{models}");

    // LoRAs on FLUX, by prompt tag and by `loras`, on the float transformer and (applied beside
    // the quantised matrices) on the GGUF one: other pictures, the same again for the same
    // request, recorded in the PNG as AUTOMATIC1111 does.
    let tagged = json!({"model": "fast", "seed": 7,
                        "prompt": "a photo of a red car <lora:flux-style:0.8>"});
    let la = generate_with(&server, &key, tagged.clone()).await;
    assert_ne!(pixels(&la), pixels(&a), "the LoRA changes the picture");
    assert_eq!(
        pixels(&generate_with(&server, &key, tagged).await),
        pixels(&la),
        "the same LoRA, the same picture"
    );
    let params = pictor::render::encode::read_parameters(&la).unwrap();
    assert!(params.contains("Lora hashes: \"flux-style: "), "{params}");
    let both = generate_with(
        &server,
        &key,
        json!({"model": "artist", "seed": 7,
               "loras": [{"name": "flux-style", "weight": 0.8}, {"name": "flux-detail", "weight": 0.6}]}),
    )
    .await;
    assert_ne!(pixels(&both), pixels(&q), "LoRAs on the GGUF transformer");
    let r = server
        .generate(
            &key,
            json!({"prompt": "x <lora:sd-style:1>", "model": "fast"}),
        )
        .await;
    common::assert_error(&r, 400, "invalid_request");
    assert!(
        r.1["error"].as_str().unwrap().contains("is for SD 1.x"),
        "{r:?}"
    );

    // `pictor render` by installed name with the GGUF transformer, and with a LoRA's tag.
    let out = d.join("flux.png");
    let render = |prompt: &str, extra: &[&str]| {
        let mut args = vec![
            "render",
            "--model",
            "flux",
            "--prompt",
            prompt,
            "--steps",
            "2",
            "--width",
            "64",
            "--height",
            "64",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let (code, _, err) = run_cli(&d, &args, None);
        assert_eq!(code, 0, "{err}");
        pictor::render::encode::read_parameters(&std::fs::read(&out).unwrap()).unwrap()
    };
    let params = render(
        "a photo of a red car",
        &["--transformer", gguf.to_str().unwrap()],
    );
    assert!(
        params.contains("Distilled CFG Scale: 3.5") && params.contains("Model: flux"),
        "{params}"
    );
    let params = render("a photo of a red car <lora:flux-detail:0.6>", &[]);
    assert!(params.contains("Lora hashes: \"flux-detail: "), "{params}");
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            "flux",
            "--prompt",
            "a cat",
            "--negative-prompt",
            "blurry",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("no negative prompt"), "{err}");
}

/// SD 3.5: a diffusers folder is recognised (family from the name for Large Turbo), mapped
/// with the settings SD3 takes (a negative prompt among them) and refused the others, draws
/// deterministically with classifier-free guidance, and the transformer as Stability AI's
/// single file draws the same picture.
#[tokio::test]
async fn sd3_models_are_installed_mapped_and_draw() {
    use common::run_cli;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/sd3");
    let medium = fixtures.join("medium");
    let added = cli_json(
        &d,
        &["models", "add", "sd35", medium.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(added["model"]["arch"], "sd3", "{added}");
    assert_eq!(added["model"]["family"], "sd3", "{added}");
    let turbo = fixtures.join("turbo");
    let added = cli_json(
        &d,
        &[
            "models",
            "add",
            "sd35-large-turbo",
            turbo.to_str().unwrap(),
            "--json",
        ],
        None,
    );
    assert_eq!(added["model"]["family"], "sd3-turbo", "{added}");
    for bad in [
        vec!["--sampler", "dpm++_2m"],
        vec!["--tiny-vae", medium.to_str().unwrap()],
        vec!["--preset", "sdxl"],
    ] {
        let mut args = vec!["models", "map", "fast", "sd35"];
        args.extend(bad.iter().copied());
        let (code, _, err) = run_cli(&d, &args, None);
        assert_ne!(code, 0, "{bad:?}");
        assert!(
            err.contains("not a setting of SD3 models") || err.contains("preset"),
            "{bad:?}: {err}"
        );
    }
    // FLUX's T5 key is not SD3's.
    let t5 = medium.join("text_encoder_3/model.safetensors");
    let (code, _, err) = run_cli(
        &d,
        &[
            "models",
            "map",
            "fast",
            "sd35",
            "--text-encoder-2",
            t5.to_str().unwrap(),
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("FLUX models only"), "{err}");
    let (code, _, err) = run_cli(&d, &["models", "map", "edit", "sd35"], None);
    assert_ne!(code, 0);
    assert!(
        err.contains("does not edit pictures with SD 3.x yet"),
        "{err}"
    );
    let mapped = cli_json(
        &d,
        &[
            "models",
            "map",
            "fast",
            "sd35",
            "--steps",
            "2",
            "--size",
            "64",
            "--negative-prompt",
            "blurry",
            "--json",
        ],
        None,
    );
    assert_eq!(
        mapped["settings"]["guidance"], 4.5,
        "the SD 3.5 preset: {mapped}"
    );
    let single = medium.join("transformer_sai.safetensors");
    cli_json(
        &d,
        &[
            "models",
            "map",
            "artist",
            "sd35",
            "--steps",
            "2",
            "--size",
            "64",
            "--negative-prompt",
            "blurry",
            "--transformer",
            single.to_str().unwrap(),
            "--text-encoder-3",
            t5.to_str().unwrap(),
            "--json",
        ],
        None,
    );
    let mapped = cli_json(
        &d,
        &[
            "models",
            "map",
            "0.2plus",
            "sd35-large-turbo",
            "--size",
            "64",
            "--json",
        ],
        None,
    );
    assert_eq!(mapped["settings"]["steps"], 4, "the Turbo preset: {mapped}");
    assert_eq!(
        mapped["settings"]["guidance"], 0.0,
        "the Turbo preset: {mapped}"
    );

    let key = common::cli_user_key(&d, "s@example.com", 50);
    // PRO: no watermark, so the server's pictures compare with `pictor render`'s.
    cli_json(
        &d,
        &[
            "user",
            "update",
            "--email",
            "s@example.com",
            "--pro",
            "true",
            "--json",
        ],
        None,
    );
    let server = spawn_server(&d, &[]);
    let a = generate(&server, &key, "fast", 7).await;
    let b = generate(&server, &key, "fast", 7).await;
    let c = generate(&server, &key, "fast", 8).await;
    let pixels = |bytes: &[u8]| image::load_from_memory(bytes).unwrap().to_rgb8().into_raw();
    assert_eq!(pixels(&a), pixels(&b), "same seed, same picture");
    assert_ne!(pixels(&a), pixels(&c), "another seed, another picture");
    let params = pictor::render::encode::read_parameters(&a).unwrap();
    for want in [
        "Negative prompt: blurry",
        "Steps: 2",
        "Sampler: Euler",
        "CFG scale: 4.5",
        "Model: sd35",
        "Size: 64x64",
    ] {
        assert!(params.contains(want), "{want:?} in {params}");
    }
    // The same weights as Stability AI's single file (and T5 as a file): the same picture.
    // (Tiers differ in output size: the 64² working picture is fitted to each.)
    let s = generate(&server, &key, "artist", 7).await;
    let params_s = pictor::render::encode::read_parameters(&s).unwrap();
    assert!(params_s.contains("Size: 64x64"), "{params_s}");
    let (pa, ps) = (
        image::load_from_memory(&a).unwrap().to_rgb8(),
        image::load_from_memory(&s).unwrap().to_rgb8(),
    );
    let ps = image::imageops::resize(
        &ps,
        pa.width(),
        pa.height(),
        image::imageops::FilterType::Triangle,
    );
    let mean = pa
        .as_raw()
        .iter()
        .zip(ps.as_raw())
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs())
        .sum::<f64>()
        / pa.as_raw().len() as f64;
    assert!(
        mean < 1.0,
        "single file against the folder: mean difference {mean}/255"
    );
    // Large Turbo's shape: no T5, no guidance, 4 steps.
    let t = generate(&server, &key, "0.2plus", 7).await;
    let params = pictor::render::encode::read_parameters(&t).unwrap();
    assert!(
        params.contains("Steps: 4") && params.contains("CFG scale: 0"),
        "{params}"
    );
    let img = image::load_from_memory(&t).unwrap().to_rgb8();
    let (min, max) = img
        .as_raw()
        .iter()
        .fold((255u8, 0u8), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    assert!(max > min + 20, "a picture, not a flat field: {min}..{max}");
    let models: Value = json_of(server.http().get(server.url("/api/pictor/v1/models"))).await;
    assert!(models.to_string().contains("diffusion:sd3"), "{models}");

    // `pictor render` with the folder (by path) draws the tier's picture: same seed, settings,
    // the prompt as written (the server's enhancement off).
    let plain = generate_with(
        &server,
        &key,
        json!({"model": "fast", "seed": 7, "enhance": false}),
    )
    .await;
    let pa = image::load_from_memory(&plain).unwrap().to_rgb8();
    let plain_pixels = pa.clone().into_raw();
    let out = d.join("sd3.png");
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            medium.to_str().unwrap(),
            "--prompt",
            "a photo of a red car",
            "--negative-prompt",
            "blurry",
            "--steps",
            "2",
            "--width",
            "64",
            "--height",
            "64",
            "--seed",
            "7",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let png = std::fs::read(&out).unwrap();
    let params = pictor::render::encode::read_parameters(&png).unwrap();
    assert!(
        params.contains("Steps: 2, Sampler: Euler, Schedule type: Simple, CFG scale: 4.5"),
        "{params}"
    );
    let pr = image::load_from_memory(&png).unwrap().to_rgb8();
    assert_eq!((pr.width(), pr.height()), (64, 64));
    let pr = image::imageops::resize(
        &pr,
        pa.width(),
        pa.height(),
        image::imageops::FilterType::Triangle,
    );
    let mean = pa
        .as_raw()
        .iter()
        .zip(pr.as_raw())
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs())
        .sum::<f64>()
        / pa.as_raw().len() as f64;
    // The tier's picture is the 64² one fitted to the tier's size, compared at that size.
    assert!(
        mean < 3.0,
        "render against the tier ({}×{}): mean difference {mean}/255",
        pa.width(),
        pa.height()
    );
    // An SD 3 LoRA (its family read off its second CLIP's layers), by tag in `pictor render`
    // and in a job: another picture, named in the PNG.
    let lora = medium
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lora/sd3/style_peft.safetensors");
    let added = cli_json(
        &d,
        &[
            "models",
            "add",
            "sd3-style",
            lora.to_str().unwrap(),
            "--json",
        ],
        None,
    );
    assert_eq!(added["model"]["arch"], "sd3", "{added}");
    let styled = generate_with(
        &server,
        &key,
        json!({"model": "fast", "seed": 7, "enhance": false,
               "prompt": "a photo of a red car <lora:sd3-style:0.7>"}),
    )
    .await;
    assert_ne!(
        image::load_from_memory(&styled)
            .unwrap()
            .to_rgb8()
            .into_raw(),
        plain_pixels,
        "the LoRA changes the picture"
    );
    let params = pictor::render::encode::read_parameters(&styled).unwrap();
    assert!(params.contains("Lora hashes: \"sd3-style: "), "{params}");
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            medium.to_str().unwrap(),
            "--prompt",
            "a red car <lora:sd3-style:0.7>",
            "--steps",
            "1",
            "--width",
            "64",
            "--height",
            "64",
            "--out",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let params = pictor::render::encode::read_parameters(&std::fs::read(&out).unwrap()).unwrap();
    assert!(params.contains("Lora hashes: \"sd3-style: "), "{params}");
    // What SD 3 does not do is refused before anything loads.
    for (prompt, extra, why) in [
        ("a cat", vec!["--sampler", "dpm++_2m"], "one sampler"),
        ("a cat", vec!["--width", "72"], "multiple of 16"),
        (
            "a cat <lora:ink:1>",
            vec![],
            "no such LoRA is installed here",
        ),
    ] {
        let mut args = vec![
            "render",
            "--model",
            medium.to_str().unwrap(),
            "--prompt",
            prompt,
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra.iter().copied());
        let (code, _, err) = run_cli(&d, &args, None);
        assert_ne!(code, 0, "{extra:?}");
        assert!(err.contains(why), "{prompt} {extra:?}: {err}");
    }
}
