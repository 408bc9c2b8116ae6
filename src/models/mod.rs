//! Diffusion models on the user's disk: what a folder or file is (`pictor_core::models`,
//! re-exported here, shared with the engine) and fetching diffusers repositories from the
//! Hugging Face hub ([`hub`]).

pub mod hub;
pub mod pulls;

pub use pictor_core::known_models::*;
pub use pictor_core::models::*;
