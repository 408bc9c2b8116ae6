//! The client progenitor generates (in `build.rs`) from the document a Pictor server serves at
//! `/api/pictor/openapi.json?multipart=false`.

include!(concat!(env!("OUT_DIR"), "/pictor.rs"));
