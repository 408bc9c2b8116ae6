//! The tiny autoencoder's decoder (TAESD by Ollin Boer Bohan; diffusers `AutoencoderTiny`), for
//! fast pictures: a few 64-channel convolution blocks instead of the full VAE decoder, about
//! 1/60 of its work, at some loss of fine detail.
//!
//! A TAESD folder as `madebyollin/taesd` (SD 1.x/2.x) and `madebyollin/taesdxl` (SDXL) publish
//! it: `config.json` (`AutoencoderTiny`) and `diffusion_pytorch_model.safetensors`. It decodes
//! the UNet's latents as they are (its `scaling_factor` is 1): `tanh(z / 3) * 3`, then
//! convolution, ReLU, blocks of three convolutions with a skip and a ReLU, nearest-neighbour
//! upsampling, and finally `x * 2 - 1`, the full decoder's range.

use std::path::Path;

use candle::{DType, Device, Module, Tensor};
use candle_nn::{Conv2dConfig, VarBuilder};

use crate::net::conv::Conv2d;
use serde_json::Value;

use super::{DiffusionError, load, read_json};

/// The engine's own CPU convolution (`net::conv`: whole-row bands, no NHWC round trip) over
/// candle's: TAESD is all 3×3 convolutions at up to the picture's full size, where candle's
/// general path spent most of its time moving data.
fn fast(c: candle_nn::Conv2d) -> Result<Conv2d, DiffusionError> {
    Ok(Conv2d::new(c)?)
}

enum Layer {
    Conv(Conv2d),
    Relu,
    Block {
        convs: Box<[Conv2d; 3]>,
        skip: Option<Conv2d>,
    },
    Upsample(usize),
}

/// A TAESD decoder.
pub struct TinyDecoder {
    layers: Vec<Layer>,
    latent_channels: usize,
    /// Bytes of its float32 weights.
    pub resident_bytes: u64,
}

fn list(v: &Value, k: &str, default: &[usize]) -> Result<Vec<usize>, DiffusionError> {
    match v.get(k) {
        None | Some(Value::Null) => Ok(default.to_vec()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_u64()
                    .filter(|&x| (1..=4096).contains(&x))
                    .map(|x| x as usize)
                    .ok_or_else(|| DiffusionError::Model(format!("tiny VAE config: {k}")))
            })
            .collect(),
        Some(_) => Err(DiffusionError::Model(format!(
            "tiny VAE config: {k} must be a list"
        ))),
    }
}

impl TinyDecoder {
    /// Loads the decoder half of a TAESD folder.
    pub fn load(dir: &Path, device: &Device) -> Result<TinyDecoder, DiffusionError> {
        let config = read_json(&dir.join("config.json"))?;
        if let Some(class) = config.get("_class_name").and_then(Value::as_str)
            && class != "AutoencoderTiny"
        {
            return Err(DiffusionError::Model(format!(
                "{}: a {class}, not a tiny autoencoder (AutoencoderTiny)",
                dir.display()
            )));
        }
        let weights = load::weights_in(dir, "diffusion_pytorch_model.safetensors")?;
        let mut resident_bytes = 0u64;
        for w in &weights {
            resident_bytes = super::checked_header(w)?
                .iter()
                .filter(|(k, _)| k.starts_with("decoder."))
                .fold(resident_bytes, |n, (_, t)| n.saturating_add(t.f32_bytes()));
        }
        // SAFETY: read-only map of the user's file, as for the models.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&weights, DType::F32, device)? };
        let mut d = Self::new(vb.pp("decoder").pp("layers"), &config)?;
        d.resident_bytes = resident_bytes;
        Ok(d)
    }

    /// Builds the decoder of `config` (diffusers `AutoencoderTiny` keys) from `vb`
    /// (`decoder.layers`).
    pub fn new(vb: VarBuilder, config: &Value) -> Result<TinyDecoder, DiffusionError> {
        let channels = list(config, "decoder_block_out_channels", &[64, 64, 64, 64])?;
        let blocks = list(config, "num_decoder_blocks", &[3, 3, 3, 1])?;
        if channels.len() != blocks.len() || channels.is_empty() {
            return Err(DiffusionError::Model(
                "tiny VAE config: decoder_block_out_channels and num_decoder_blocks differ in length"
                    .into(),
            ));
        }
        let get = |k: &str, d: u64| config.get(k).and_then(Value::as_u64).unwrap_or(d) as usize;
        let latent_channels = get("latent_channels", 4);
        let out_channels = get("out_channels", 3);
        let scale = get("upsampling_scaling_factor", 2);
        if let Some(act) = config.get("act_fn").and_then(Value::as_str)
            && act != "relu"
        {
            return Err(DiffusionError::Model(format!(
                "tiny VAE config: act_fn {act:?} is not supported"
            )));
        }
        let pad = Conv2dConfig {
            padding: 1,
            ..Default::default()
        };
        let mut layers = Vec::new();
        let mut i = 0;
        let mut next = || {
            i += 1;
            vb.pp((i - 1).to_string())
        };
        let mut prev = latent_channels;
        for (level, (&c, &n)) in channels.iter().zip(&blocks).enumerate() {
            let last = level + 1 == channels.len();
            if level == 0 {
                layers.push(Layer::Conv(fast(candle_nn::conv2d(
                    prev,
                    c,
                    3,
                    pad,
                    next(),
                )?)?));
                layers.push(Layer::Relu);
                next();
                prev = c;
            }
            for _ in 0..n {
                let vb = next();
                let conv = vb.pp("conv");
                let convs = Box::new([
                    fast(candle_nn::conv2d(prev, c, 3, pad, conv.pp("0"))?)?,
                    fast(candle_nn::conv2d(c, c, 3, pad, conv.pp("2"))?)?,
                    fast(candle_nn::conv2d(c, c, 3, pad, conv.pp("4"))?)?,
                ]);
                let skip = if prev != c {
                    Some(fast(candle_nn::conv2d_no_bias(
                        prev,
                        c,
                        1,
                        Default::default(),
                        vb.pp("skip"),
                    )?)?)
                } else {
                    None
                };
                layers.push(Layer::Block { convs, skip });
                prev = c;
            }
            if !last {
                layers.push(Layer::Upsample(scale));
                next();
            }
            let out = if last { out_channels } else { c };
            let conv = if last {
                candle_nn::conv2d(prev, out, 3, pad, next())?
            } else {
                candle_nn::conv2d_no_bias(prev, out, 3, pad, next())?
            };
            layers.push(Layer::Conv(fast(conv)?));
            prev = out;
        }
        Ok(TinyDecoder {
            layers,
            latent_channels,
            resident_bytes: 0,
        })
    }

    pub fn latent_channels(&self) -> usize {
        self.latent_channels
    }

    /// Decodes the UNet's latents (as they are, not divided by the VAE's scale) to the full
    /// decoder's output range, `(1, 3, 8h, 8w)` in about -1..1.
    pub fn decode(&self, latents: &Tensor) -> Result<Tensor, DiffusionError> {
        let mut x = ((latents / 3.0)?.tanh()? * 3.0)?;
        for layer in &self.layers {
            x = match layer {
                Layer::Conv(c) => c.forward(&x)?,
                Layer::Relu => x.relu()?,
                Layer::Block { convs, skip } => {
                    let y = convs[0].forward(&x)?.relu()?;
                    let y = convs[1].forward(&y)?.relu()?;
                    let y = convs[2].forward(&y)?;
                    let s = match skip {
                        Some(s) => s.forward(&x)?,
                        None => x.clone(),
                    };
                    (y + s)?.relu()?
                }
                Layer::Upsample(f) => {
                    let (_, _, h, w) = x.dims4()?;
                    x.upsample_nearest2d(h * f, w * f)?
                }
            };
        }
        Ok(((x * 2.0)? - 1.0)?)
    }
}
