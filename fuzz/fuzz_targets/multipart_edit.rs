//! The multipart path of `POST /api/pictor/v1/edit`: any body is parsed into the edit form or
//! refused, never a panic.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use poem_openapi::payload::ParsePayload;

static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    });
    rt.block_on(async {
        let req = poem::Request::builder()
            .method(poem::http::Method::POST)
            .header("content-type", "multipart/form-data; boundary=XyZ")
            .body(data.to_vec());
        let (req, mut body) = req.split();
        let _ =
            <pictor::api::images::EditForm as ParsePayload>::from_request(&req, &mut body).await;
    });
});
