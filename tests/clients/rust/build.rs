//! Generates the client from the OpenAPI document named by `PICTOR_OPENAPI` (the one a running
//! server serves; `.ci/clients.sh` downloads it) with progenitor, into `$OUT_DIR/pictor.rs`.

use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=PICTOR_OPENAPI");
    let path = env::var("PICTOR_OPENAPI")
        .expect("set PICTOR_OPENAPI to the OpenAPI document to generate the client from");
    println!("cargo:rerun-if-changed={path}");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let spec = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut generator = progenitor::Generator::default();
    let tokens = generator
        .generate_tokens(&spec)
        .unwrap_or_else(|e| panic!("progenitor cannot generate a client from {path}: {e}"));
    let ast = syn::parse2(tokens).expect("progenitor's output parses");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("pictor.rs");
    fs::write(&out, prettyplease::unparse(&ast)).unwrap();
}
