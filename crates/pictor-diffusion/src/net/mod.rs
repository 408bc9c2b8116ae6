//! The Stable Diffusion networks: CLIP text encoders, the conditional UNet and the KL autoencoder.
//!
//! Vendored from candle-transformers 0.11 (`models/stable_diffusion`, MIT OR Apache-2.0,
//! Copyright the candle authors) and changed where parity with diffusers/transformers or Pictor
//! needed it:
//! - the UNet has SDXL's `text_time` add-embedding (candle's lacks it, so SDXL output differed);
//! - CLIP configurations come from the model's `config.json` (candle's are private presets),
//!   `"gelu"` is the exact GELU as in transformers (candle used the tanh one for SD 2.x), and the
//!   encoder returns the penultimate hidden state and the projected pooled output;
//! - the GEGLU feed-forward uses the exact GELU, as diffusers;
//! - the VAE posterior is sampled with the caller's noise and its log-variance clamped as in
//!   diffusers; sliced attention concatenates its slices (upstream stacked them) and keeps a
//!   partial last slice;
//! - the plain down/up blocks' resnets use the configured group count (upstream: always 32);
//! - no flash-attention path (CUDA-only and a separate crate); on the CPU in float32 the
//!   attention runs a block of queries at a time without the full score matrix
//!   ([`attention_cpu`]);
//! - 3×3 convolutions go through the engine's own CPU convolution ([`conv`]); group
//!   normalisation (and the SiLU after it) is one fused operation on the CPU ([`norm`]);
//! - the text encoders' float32 linear layers keep their weights packed for few rows
//!   ([`linear_cpu`]); the UNet's keep theirs transposed ([`linear`]).
#![allow(clippy::too_many_arguments)]

pub mod attention;
pub mod attention_cpu;
pub mod clip;
pub mod conv;
pub mod cpu_op;
pub mod embeddings;
pub mod fast_math;
pub mod linear;
pub mod linear_cpu;
pub mod linear_int8;
pub mod norm;
pub mod resnet;
pub mod unet_2d;
pub mod unet_2d_blocks;
pub mod vae;
mod with_tracing;
