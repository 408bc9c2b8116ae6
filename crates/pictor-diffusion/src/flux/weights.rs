//! The FLUX networks' weights by name, float or quantised, from the files people have:
//! diffusers folders (safetensors, renamed to Black Forest Labs' names by [`diffusers_to_bfl`]),
//! the single files ComfyUI uses (BFL names, optionally under `model.diffusion_model.`), and
//! GGUF files (city96's FLUX and T5 GGUFs), whose quantised matrices stay quantised in memory
//! and are multiplied by candle's quantised kernels ([`QLinear`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle::quantized::{GgmlDType, QMatMul, QTensor, gguf_file};
use candle::{DType, Device, Module, Result, Tensor};

use crate::DiffusionError;

/// One named weight as read.
#[derive(Debug, Clone)]
pub enum Weight {
    Float(Tensor),
    Quant(Arc<QTensor>),
}

impl Weight {
    pub fn dims(&self) -> Vec<usize> {
        match self {
            Weight::Float(t) => t.dims().to_vec(),
            Weight::Quant(q) => q.shape().dims().to_vec(),
        }
    }

    /// The weight as float32 (a quantised one dequantised).
    pub fn float(&self, device: &Device) -> Result<Tensor> {
        match self {
            Weight::Float(t) => t.to_dtype(DType::F32),
            Weight::Quant(q) => q.dequantize(device),
        }
    }

    /// Bytes it takes in memory once loaded (float32 for float weights).
    pub fn resident_bytes(&self) -> u64 {
        match self {
            Weight::Float(t) => 4 * t.elem_count() as u64,
            Weight::Quant(q) => q.storage_size_in_bytes() as u64,
        }
    }
}

/// A network's weights by name; parts are taken out as the network is built, so that what is
/// left at the end ([`WeightMap::check_used`]) is what the network did not expect.
pub struct WeightMap {
    map: HashMap<String, Weight>,
    device: Device,
    /// For messages: where the weights came from.
    origin: String,
}

impl WeightMap {
    pub fn new(map: HashMap<String, Weight>, device: &Device, origin: String) -> WeightMap {
        WeightMap {
            map,
            device: device.clone(),
            origin,
        }
    }

    /// Reads safetensors files (float32 in memory), each name passed through `rename`.
    pub fn safetensors(
        paths: &[impl AsRef<Path>],
        device: &Device,
        rename: impl Fn(&str) -> String,
    ) -> std::result::Result<WeightMap, DiffusionError> {
        let mut map = HashMap::new();
        for p in paths {
            let p = p.as_ref();
            crate::checked_header(p)?;
            // SAFETY: mapped read-only; Pictor never writes model files (see load_diffusers).
            let st = unsafe { candle::safetensors::MmapedSafetensors::new(p)? };
            for (name, _) in st.tensors() {
                let t = st.load(&name, device)?.to_dtype(DType::F32)?;
                map.insert(rename(&name), Weight::Float(t));
            }
        }
        let origin = paths
            .first()
            .map(|p| p.as_ref().display().to_string())
            .unwrap_or_default();
        Ok(WeightMap::new(map, device, origin))
    }

    /// Reads a GGUF file: float tensors (F32/F16/BF16) as float32, quantised ones kept
    /// quantised. Each name passed through `rename`.
    pub fn gguf(
        path: &Path,
        device: &Device,
        rename: impl Fn(&str) -> String,
    ) -> std::result::Result<WeightMap, DiffusionError> {
        let bad = |e: candle::Error| DiffusionError::Model(format!("{}: {e}", path.display()));
        let mut file = std::fs::File::open(path)
            .map_err(|e| DiffusionError::Model(format!("{}: {e}", path.display())))?;
        let content = gguf_file::Content::read(&mut file).map_err(bad)?;
        let mut map = HashMap::new();
        for name in content.tensor_infos.keys() {
            let q = content.tensor(&mut file, name, device).map_err(bad)?;
            let w = match q.dtype() {
                GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16 => {
                    Weight::Float(q.dequantize(device)?)
                }
                _ => Weight::Quant(Arc::new(q)),
            };
            map.insert(rename(name), w);
        }
        Ok(WeightMap::new(map, device, path.display().to_string()))
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    /// The shape of `name`, if present.
    pub fn dims_of(&self, name: &str) -> Option<Vec<usize>> {
        self.map.get(name).map(Weight::dims)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.map.keys()
    }

    /// Bytes the weights take in memory.
    pub fn resident_bytes(&self) -> u64 {
        self.map.values().map(Weight::resident_bytes).sum()
    }

    pub fn take(&mut self, name: &str) -> Result<Weight> {
        self.map
            .remove(name)
            .ok_or_else(|| candle::Error::Msg(format!("{}: no tensor `{name}`", self.origin)))
    }

    /// Puts a weight back (under a new name, for renamings).
    pub fn insert(&mut self, name: String, w: Weight) {
        self.map.insert(name, w);
    }

    /// A float32 tensor of exactly `dims`.
    pub fn tensor(&mut self, name: &str, dims: &[usize]) -> Result<Tensor> {
        let w = self.take(name)?;
        if w.dims() != dims {
            candle::bail!(
                "{}: `{name}` is {:?}, expected {dims:?}",
                self.origin,
                w.dims()
            );
        }
        w.float(&self.device)
    }

    /// `prefix.weight` (`[out, in]`) and, when `bias`, `prefix.bias` (`[out]`).
    pub fn linear(
        &mut self,
        prefix: &str,
        in_dim: usize,
        out_dim: usize,
        bias: bool,
    ) -> Result<QLinear> {
        let name = format!("{prefix}.weight");
        let w = self.take(&name)?;
        if w.dims() != [out_dim, in_dim] {
            candle::bail!(
                "{}: `{name}` is {:?}, expected [{out_dim}, {in_dim}]",
                self.origin,
                w.dims()
            );
        }
        let bias = if bias {
            Some(self.tensor(&format!("{prefix}.bias"), &[out_dim])?)
        } else {
            None
        };
        QLinear::new(w, bias, &self.device)
    }

    /// Fails when weights are left that the network did not take (a file of another shape of
    /// model: better refused than half used).
    pub fn check_used(&self) -> std::result::Result<(), DiffusionError> {
        if self.map.is_empty() {
            return Ok(());
        }
        let mut left: Vec<_> = self.map.keys().cloned().collect();
        left.sort();
        left.truncate(5);
        Err(DiffusionError::Model(format!(
            "{}: {} tensors the network does not use (e.g. {})",
            self.origin,
            self.map.len(),
            left.join(", ")
        )))
    }
}

/// `y = x Wᵀ + b`, `W` float (kept transposed, [`crate::net::linear::Linear`]) or quantised
/// (candle's quantised matmul, which quantises `x` to 8 bits per block and takes the dot
/// products in integers).
#[derive(Debug, Clone)]
pub enum QLinear {
    Float(crate::net::linear::Linear),
    Quant { mm: QMatMul, bias: Option<Tensor> },
}

impl QLinear {
    pub fn new(w: Weight, bias: Option<Tensor>, device: &Device) -> Result<QLinear> {
        Ok(match w {
            Weight::Float(t) => QLinear::Float(crate::net::linear::Linear::new(
                t.to_dtype(DType::F32)?.to_device(device)?,
                bias,
            )?),
            Weight::Quant(q) => QLinear::Quant {
                mm: QMatMul::from_arc(q)?,
                bias,
            },
        })
    }
}

impl Module for QLinear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            QLinear::Float(l) => l.forward(x),
            QLinear::Quant { mm, bias } => {
                let y = mm.forward(x)?;
                match bias {
                    Some(b) => y.broadcast_add(b),
                    None => Ok(y),
                }
            }
        }
    }
}

/// Renames a diffusers `FluxTransformer2DModel` state dict to Black Forest Labs' names, the
/// inverse of diffusers' `convert_flux_transformer_checkpoint_to_diffusers`: q, k, v (and the
/// single blocks' MLP input) concatenated into `qkv` / `linear1`, the final modulation's halves
/// swapped (diffusers keeps scale, shift; BFL shift, scale).
pub fn diffusers_to_bfl(
    w: &mut WeightMap,
    double: usize,
    single: usize,
) -> std::result::Result<(), DiffusionError> {
    let dev = w.device().clone();
    let cat = |w: &mut WeightMap, dst: String, src: &[String]| -> Result<()> {
        let parts = src
            .iter()
            .map(|s| w.take(s)?.float(&dev))
            .collect::<Result<Vec<_>>>()?;
        let t = Tensor::cat(&parts, 0)?;
        w.insert(dst, Weight::Float(t));
        Ok(())
    };
    let mv = |w: &mut WeightMap, dst: &str, src: &str| -> Result<()> {
        let t = w.take(src)?;
        w.insert(dst.to_string(), t);
        Ok(())
    };
    let err = |e: candle::Error| DiffusionError::Model(format!("FLUX transformer: {e}"));
    let run = |w: &mut WeightMap| -> Result<()> {
        for s in ["weight", "bias"] {
            for (dst, src) in [
                ("time_in", "time_text_embed.timestep_embedder"),
                ("vector_in", "time_text_embed.text_embedder"),
                ("guidance_in", "time_text_embed.guidance_embedder"),
            ] {
                if dst == "guidance_in" && !w.contains(&format!("{src}.linear_1.{s}")) {
                    continue;
                }
                mv(
                    w,
                    &format!("{dst}.in_layer.{s}"),
                    &format!("{src}.linear_1.{s}"),
                )?;
                mv(
                    w,
                    &format!("{dst}.out_layer.{s}"),
                    &format!("{src}.linear_2.{s}"),
                )?;
            }
            mv(w, &format!("txt_in.{s}"), &format!("context_embedder.{s}"))?;
            mv(w, &format!("img_in.{s}"), &format!("x_embedder.{s}"))?;
            mv(
                w,
                &format!("final_layer.linear.{s}"),
                &format!("proj_out.{s}"),
            )?;
            for i in 0..double {
                let (d, b) = (
                    format!("double_blocks.{i}"),
                    format!("transformer_blocks.{i}"),
                );
                for (dst, src) in [
                    ("img_mod.lin", "norm1.linear"),
                    ("txt_mod.lin", "norm1_context.linear"),
                    ("img_mlp.0", "ff.net.0.proj"),
                    ("img_mlp.2", "ff.net.2"),
                    ("txt_mlp.0", "ff_context.net.0.proj"),
                    ("txt_mlp.2", "ff_context.net.2"),
                    ("img_attn.proj", "attn.to_out.0"),
                    ("txt_attn.proj", "attn.to_add_out"),
                ] {
                    mv(w, &format!("{d}.{dst}.{s}"), &format!("{b}.{src}.{s}"))?;
                }
                let img: Vec<_> = ["q", "k", "v"]
                    .iter()
                    .map(|x| format!("{b}.attn.to_{x}.{s}"))
                    .collect();
                cat(w, format!("{d}.img_attn.qkv.{s}"), &img)?;
                let txt: Vec<_> = ["q", "k", "v"]
                    .iter()
                    .map(|x| format!("{b}.attn.add_{x}_proj.{s}"))
                    .collect();
                cat(w, format!("{d}.txt_attn.qkv.{s}"), &txt)?;
            }
            for i in 0..single {
                let (d, b) = (
                    format!("single_blocks.{i}"),
                    format!("single_transformer_blocks.{i}"),
                );
                mv(
                    w,
                    &format!("{d}.modulation.lin.{s}"),
                    &format!("{b}.norm.linear.{s}"),
                )?;
                mv(w, &format!("{d}.linear2.{s}"), &format!("{b}.proj_out.{s}"))?;
                let parts = [
                    format!("{b}.attn.to_q.{s}"),
                    format!("{b}.attn.to_k.{s}"),
                    format!("{b}.attn.to_v.{s}"),
                    format!("{b}.proj_mlp.{s}"),
                ];
                cat(w, format!("{d}.linear1.{s}"), &parts)?;
            }
            let t = w.take(&format!("norm_out.linear.{s}"))?.float(&dev)?;
            let half = t.dim(0)? / 2;
            let swapped = Tensor::cat(&[t.narrow(0, half, half)?, t.narrow(0, 0, half)?], 0)?;
            w.insert(
                format!("final_layer.adaLN_modulation.1.{s}"),
                Weight::Float(swapped),
            );
        }
        for i in 0..double {
            let (d, b) = (
                format!("double_blocks.{i}"),
                format!("transformer_blocks.{i}"),
            );
            for (dst, src) in [
                ("img_attn.norm.query_norm.scale", "attn.norm_q.weight"),
                ("img_attn.norm.key_norm.scale", "attn.norm_k.weight"),
                ("txt_attn.norm.query_norm.scale", "attn.norm_added_q.weight"),
                ("txt_attn.norm.key_norm.scale", "attn.norm_added_k.weight"),
            ] {
                mv(w, &format!("{d}.{dst}"), &format!("{b}.{src}"))?;
            }
        }
        for i in 0..single {
            let (d, b) = (
                format!("single_blocks.{i}"),
                format!("single_transformer_blocks.{i}"),
            );
            mv(
                w,
                &format!("{d}.norm.query_norm.scale"),
                &format!("{b}.attn.norm_q.weight"),
            )?;
            mv(
                w,
                &format!("{d}.norm.key_norm.scale"),
                &format!("{b}.attn.norm_k.weight"),
            )?;
        }
        Ok(())
    };
    run(w).map_err(err)
}

/// city96's / llama.cpp's T5 encoder names (`enc.blk.0.attn_q.weight`) to transformers'
/// (`encoder.block.0.layer.0.SelfAttention.q.weight`), as ComfyUI-GGUF maps them.
pub fn t5_gguf_name(name: &str) -> String {
    const MAP: [(&str, &str); 14] = [
        ("enc.", "encoder."),
        (".blk.", ".block."),
        ("token_embd", "shared"),
        ("output_norm", "final_layer_norm"),
        ("attn_q", "layer.0.SelfAttention.q"),
        ("attn_k", "layer.0.SelfAttention.k"),
        ("attn_v", "layer.0.SelfAttention.v"),
        ("attn_o", "layer.0.SelfAttention.o"),
        ("attn_norm", "layer.0.layer_norm"),
        (
            "attn_rel_b",
            "layer.0.SelfAttention.relative_attention_bias",
        ),
        ("ffn_up", "layer.1.DenseReluDense.wi_1"),
        ("ffn_down", "layer.1.DenseReluDense.wo"),
        ("ffn_gate", "layer.1.DenseReluDense.wi_0"),
        ("ffn_norm", "layer.1.layer_norm"),
    ];
    let mut s = name.to_string();
    for (a, b) in MAP {
        s = s.replace(a, b);
    }
    s
}
