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
    /// LoRA changes to quantised weights, kept apart and applied in the product
    /// ([`WeightMap::add_low_rank`]).
    low_rank: HashMap<String, LowRank>,
    device: Device,
    /// For messages: where the weights came from.
    origin: String,
}

impl WeightMap {
    pub fn new(map: HashMap<String, Weight>, device: &Device, origin: String) -> WeightMap {
        WeightMap {
            map,
            low_rank: HashMap::new(),
            device: device.clone(),
            origin,
        }
    }

    /// Reads safetensors files, each name passed through `rename`: float32 in memory, or with
    /// `quantise`, the matrices that fit its blocks (rows a multiple of the block, 1024
    /// elements or more) quantised as they are read, one at a time, so that a float file larger
    /// than memory (FLUX.1's bfloat16 transformer: 47.6 GB as float32) still loads.
    pub fn safetensors(
        paths: &[impl AsRef<Path>],
        device: &Device,
        rename: impl Fn(&str) -> String,
        quantise: Option<GgmlDType>,
    ) -> std::result::Result<WeightMap, DiffusionError> {
        Self::safetensors_part(paths, device, |n| Some(rename(n)), quantise)
    }

    /// [`safetensors`](Self::safetensors) of the tensors `rename` gives a name (the others —
    /// another part of an all-in-one file — are not read).
    pub fn safetensors_part(
        paths: &[impl AsRef<Path>],
        device: &Device,
        rename: impl Fn(&str) -> Option<String>,
        quantise: Option<GgmlDType>,
    ) -> std::result::Result<WeightMap, DiffusionError> {
        let mut map = HashMap::new();
        for p in paths {
            let p = p.as_ref();
            crate::checked_header(p)?;
            // SAFETY: mapped read-only; Pictor never writes model files (see load_diffusers).
            let st = unsafe { candle::safetensors::MmapedSafetensors::new(p)? };
            for (name, _) in st.tensors() {
                let Some(renamed) = rename(&name) else {
                    continue;
                };
                let t = st.load(&name, &Device::Cpu)?.to_dtype(DType::F32)?;
                let w = match quantise {
                    Some(q)
                        if t.rank() == 2
                            && t.dim(1)? % q.block_size() == 0
                            && t.elem_count() >= 1024 =>
                    {
                        Weight::Quant(Arc::new(QTensor::quantize_onto(&t, q, device)?))
                    }
                    _ => Weight::Float(t.to_device(device)?),
                };
                map.insert(renamed, w);
            }
        }
        let origin = paths
            .first()
            .map(|p| p.as_ref().display().to_string())
            .unwrap_or_default();
        Ok(WeightMap::new(map, device, origin))
    }

    /// Float32 bytes of the tensors in safetensors files, from their headers.
    pub fn f32_bytes(paths: &[impl AsRef<Path>]) -> std::result::Result<u64, DiffusionError> {
        let mut bytes = 0u64;
        for p in paths {
            let h = crate::checked_header(p.as_ref())?;
            bytes = h
                .values()
                .fold(bytes, |n, t| n.saturating_add(t.f32_bytes()));
        }
        Ok(bytes)
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
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(DiffusionError::Model(format!(
                "{}: not a regular file",
                path.display()
            )));
        }
        // candle bounds the header's counts and strings, but divides by a zero
        // `general.alignment` (a panic): refused here, and every tensor's element count is
        // checked before candle multiplies the dimensions out unchecked.
        let content = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gguf_file::Content::read(&mut file)
        }))
        .map_err(|_| DiffusionError::Model(format!("{}: a malformed GGUF header", path.display())))?
        .map_err(bad)?;
        for (name, info) in &content.tensor_infos {
            let elements = info
                .shape
                .dims()
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
                .filter(|&n| n > 0 && n <= 1 << 40);
            if elements.is_none() {
                return Err(DiffusionError::Model(format!(
                    "{}: tensor `{name}` has an impossible shape {:?}",
                    path.display(),
                    info.shape.dims()
                )));
            }
        }
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
        let low_rank: u64 = self
            .low_rank
            .values()
            .map(|l| 4 * (l.up.elem_count() + l.down.elem_count()) as u64)
            .sum();
        self.map.values().map(Weight::resident_bytes).sum::<u64>() + low_rank
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
        let t = w.float(&self.device)?;
        match self.low_rank.remove(name) {
            Some(lr) => {
                let delta = lr.delta()?.reshape(t.shape())?;
                t + delta
            }
            None => Ok(t),
        }
    }

    /// Adds `up · down` (`[out, r]` · `[r, in]`, float32; a LoRA's change, its scale in `up`)
    /// to the matrix `name` (`[out, in…]`): summed into a float weight now; for a quantised
    /// weight kept as the two factors and applied in each product (`x·downᵀ·upᵀ` beside the
    /// quantised `x·Wᵀ`), which is exact, costs `r·(in + out)` per row against the layer's
    /// `in·out`, and spares requantising (another rounding, and minutes for a whole model).
    pub fn add_low_rank(&mut self, name: &str, up: Tensor, down: Tensor) -> Result<()> {
        let Some(w) = self.map.get_mut(name) else {
            candle::bail!("{}: no tensor `{name}`", self.origin);
        };
        let dims = w.dims();
        if dims.len() < 2 {
            candle::bail!("{}: `{name}` {dims:?} is not a matrix", self.origin);
        }
        let inputs: usize = dims[1..].iter().product();
        if up.dims2()?.0 != dims[0] || down.dims2()?.1 != inputs || up.dim(1)? != down.dim(0)? {
            candle::bail!(
                "{}: a change of {:?} × {:?} does not fit `{name}` {dims:?}",
                self.origin,
                up.dims(),
                down.dims()
            );
        }
        let (up, down) = (up.to_device(&self.device)?, down.to_device(&self.device)?);
        match w {
            Weight::Float(t) => {
                let delta = up.matmul(&down)?.reshape(t.shape())?;
                *t = (t.to_dtype(DType::F32)? + delta)?;
            }
            Weight::Quant(_) => {
                let lr = match self.low_rank.remove(name) {
                    None => LowRank { up, down },
                    Some(prev) => LowRank {
                        up: Tensor::cat(&[prev.up, up], 1)?,
                        down: Tensor::cat(&[prev.down, down], 0)?,
                    },
                };
                self.low_rank.insert(name.to_owned(), lr);
            }
        }
        Ok(())
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
        Ok(match (w, self.low_rank.remove(&name)) {
            (Weight::Quant(q), low_rank) => QLinear::Quant { q, bias, low_rank },
            (Weight::Float(t), Some(lr)) => {
                let t = (t.to_dtype(DType::F32)? + lr.delta()?.reshape(t.shape())?)?;
                QLinear::new(Weight::Float(t), bias, &self.device)?
            }
            (w, None) => QLinear::new(w, bias, &self.device)?,
        })
    }

    /// Fails when weights are left that the network did not take (a file of another shape of
    /// model: better refused than half used).
    pub fn check_used(&self) -> std::result::Result<(), DiffusionError> {
        if let Some(name) = self.low_rank.keys().next() {
            return Err(DiffusionError::Model(format!(
                "{}: a LoRA change to `{name}` was not applied",
                self.origin
            )));
        }
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

/// `y = x Wᵀ + b`, `W` float (kept transposed, [`crate::net::linear::Linear`]) or quantised.
///
/// Quantised weights stay in their compact blocks. candle's fast x86 kernels (AVX-512 VNNI,
/// AMX) first repack a matrix into tiles — 1.1 to 2 bytes per weight — and keep the tiles
/// beside the blocks for good: a Q4_K FLUX transformer (6.7 GB) grew to 21 GB that way, and the
/// Q8_0 T5 doubled. So for 32 rows or more the tiles are made for the call and dropped after it
/// (measured on a 3072 × 12288 layer at 1280 rows: 0.21–0.24 s against 0.21 s with kept
/// tiles, 406–469 GFLOP/s), and fewer rows (the modulation vectors) take candle's plain
/// block-by-block kernels on the blocks themselves, which need no tiles.
#[derive(Debug, Clone)]
pub enum QLinear {
    Float(crate::net::linear::Linear),
    Quant {
        q: Arc<QTensor>,
        bias: Option<Tensor>,
        /// LoRA changes to the quantised matrix ([`WeightMap::add_low_rank`]).
        low_rank: Option<LowRank>,
    },
}

/// A low-rank change `up · down` to a matrix (LoRAs', their scales in `up`).
#[derive(Debug, Clone)]
pub struct LowRank {
    /// `[out, r]`.
    pub up: Tensor,
    /// `[r, in]`.
    pub down: Tensor,
}

impl LowRank {
    fn delta(&self) -> Result<Tensor> {
        self.up.matmul(&self.down)
    }

    /// `x · downᵀ · upᵀ` for `x` of `[…, in]`.
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let h = x.broadcast_matmul(&self.down.t()?)?;
        h.broadcast_matmul(&self.up.t()?)
    }
}

impl QLinear {
    pub fn new(w: Weight, bias: Option<Tensor>, device: &Device) -> Result<QLinear> {
        Ok(match w {
            Weight::Float(t) => QLinear::Float(crate::net::linear::Linear::new(
                t.to_dtype(DType::F32)?.to_device(device)?,
                bias,
            )?),
            Weight::Quant(q) => QLinear::Quant {
                q,
                bias,
                low_rank: None,
            },
        })
    }
}

/// Rows from which a quantised product makes its tiles for the call (below: the plain kernels).
const TILED_ROWS: usize = 32;

/// `x Wᵀ` with `W` a quantised `[n, k]` matrix on the CPU, without keeping tiles.
fn quantised_matmul(q: &QTensor, x: &Tensor) -> Result<Tensor> {
    use candle::quantized::k_quants::{self as kq, GgmlType};
    let (n, k) = q.shape().dims2()?;
    let dims = x.dims().to_vec();
    let rows: usize = dims[..dims.len() - 1].iter().product();
    if rows >= TILED_ROWS {
        let data = q.data()?;
        let transient = QTensor::new(
            candle::quantized::QStorage::from_data(data, &Device::Cpu, q.dtype())?,
            (n, k),
        )?;
        return QMatMul::from_qtensor(transient)?.forward(x);
    }
    fn plain<T: GgmlType>(
        bytes: &[u8],
        lhs: &[f32],
        mkn: (usize, usize, usize),
    ) -> Result<Vec<f32>> {
        let size = std::mem::size_of::<T>();
        if !bytes.len().is_multiple_of(size)
            || bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0
        {
            candle::bail!("quantised weights: unexpected block layout");
        }
        // SAFETY: the bytes are the QTensor's own `Vec<T>` storage (its dtype is T's, checked
        // by the caller's match), so they are aligned and a whole number of `T`s (checked).
        let blocks =
            unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) };
        let mut dst = vec![0f32; mkn.0 * mkn.2];
        kq::matmul(mkn, lhs, blocks, &mut dst)?;
        Ok(dst)
    }
    let lhs = x.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
    let data = q.data()?;
    let mkn = (rows, k, n);
    let out = match q.dtype() {
        GgmlDType::Q4_0 => plain::<kq::BlockQ4_0>(&data, &lhs, mkn)?,
        GgmlDType::Q4_1 => plain::<kq::BlockQ4_1>(&data, &lhs, mkn)?,
        GgmlDType::Q5_0 => plain::<kq::BlockQ5_0>(&data, &lhs, mkn)?,
        GgmlDType::Q5_1 => plain::<kq::BlockQ5_1>(&data, &lhs, mkn)?,
        GgmlDType::Q8_0 => plain::<kq::BlockQ8_0>(&data, &lhs, mkn)?,
        GgmlDType::Q2K => plain::<kq::BlockQ2K>(&data, &lhs, mkn)?,
        GgmlDType::Q3K => plain::<kq::BlockQ3K>(&data, &lhs, mkn)?,
        GgmlDType::Q4K => plain::<kq::BlockQ4K>(&data, &lhs, mkn)?,
        GgmlDType::Q5K => plain::<kq::BlockQ5K>(&data, &lhs, mkn)?,
        GgmlDType::Q6K => plain::<kq::BlockQ6K>(&data, &lhs, mkn)?,
        other => candle::bail!("quantised weights of type {other:?} are not supported"),
    };
    let mut out_dims = dims;
    *out_dims.last_mut().unwrap_or(&mut 0) = n;
    Tensor::from_vec(out, out_dims, x.device())
}

impl Module for QLinear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            QLinear::Float(l) => l.forward(x),
            QLinear::Quant { q, bias, low_rank } => {
                let mut y = if x.device().is_cpu() {
                    quantised_matmul(q, &x.contiguous()?)?
                } else {
                    QMatMul::from_arc(q.clone())?.forward(x)?
                };
                if let Some(lr) = low_rank {
                    y = (y + lr.apply(x)?)?;
                }
                match bias {
                    Some(b) => y.broadcast_add(b),
                    None => Ok(y),
                }
            }
        }
    }
}

/// One layer of Black Forest Labs' / Stability AI's layout as made from diffusers' modules:
/// `srcs` stacked by rows (q, k, v into `qkv`; q, k, v and the MLP input into `linear1`), or one
/// module moved, its two halves exchanged when `swap` (diffusers' `AdaLayerNormContinuous`
/// keeps scale, shift; the original layout shift, scale). The renamings ([`diffusers_to_bfl`],
/// `diffusers_to_sai`) and the LoRAs named after diffusers' modules ([`crate::lora`]) read the
/// same table.
#[derive(Debug, Clone)]
pub struct Joined {
    pub dst: String,
    pub srcs: Vec<String>,
    pub swap: bool,
}

impl Joined {
    pub fn moved(dst: impl Into<String>, src: impl Into<String>) -> Joined {
        Joined {
            dst: dst.into(),
            srcs: vec![src.into()],
            swap: false,
        }
    }

    pub fn swapped(dst: impl Into<String>, src: impl Into<String>) -> Joined {
        Joined {
            swap: true,
            ..Joined::moved(dst, src)
        }
    }

    pub fn stacked(dst: impl Into<String>, srcs: Vec<String>) -> Joined {
        Joined {
            dst: dst.into(),
            srcs,
            swap: false,
        }
    }

    /// The rows of `dst` that source `k` fills, for a `dst` of `[out, in]`: every source but
    /// the last has as many rows as the layer has inputs (q, k, v of a `hidden`-wide
    /// attention), the last the rest (v, or the single blocks' MLP input).
    pub fn rows_of(&self, k: usize, (out, inputs): (usize, usize)) -> (usize, usize) {
        let start = k * inputs;
        let len = if k + 1 == self.srcs.len() {
            out.saturating_sub(start)
        } else {
            inputs
        };
        (start, len)
    }
}

/// Carries out `plan` on the weights and biases (those present) of its modules.
pub fn apply_plan(w: &mut WeightMap, plan: &[Joined]) -> Result<()> {
    let dev = w.device().clone();
    for j in plan {
        for s in ["weight", "bias"] {
            let names: Vec<String> = j.srcs.iter().map(|m| format!("{m}.{s}")).collect();
            if s == "bias" && !names.iter().any(|n| w.contains(n)) {
                continue;
            }
            let parts = names
                .iter()
                .map(|n| w.take(n))
                .collect::<Result<Vec<_>>>()?;
            let mut parts = parts.into_iter();
            let mut t = match (parts.next(), parts.len()) {
                (Some(one), 0) => one,
                (Some(first), _) => cat_rows(std::iter::once(first).chain(parts).collect(), &dev)?,
                (None, _) => candle::bail!("{}: no sources", j.dst),
            };
            if j.swap {
                let half = t.dims()[0] / 2;
                t = cat_rows(
                    vec![rows(&t, half, half, &dev)?, rows(&t, 0, half, &dev)?],
                    &dev,
                )?;
            }
            w.insert(format!("{}.{s}", j.dst), t);
        }
    }
    Ok(())
}

/// FLUX's layers in BFL's layout from diffusers' `FluxTransformer2DModel` modules (`guidance`:
/// FLUX.1-dev's guidance embedder).
pub fn bfl_plan(double: usize, single: usize, guidance: bool) -> Vec<Joined> {
    let mut plan = Vec::new();
    for (dst, src) in [
        ("time_in", "time_text_embed.timestep_embedder"),
        ("vector_in", "time_text_embed.text_embedder"),
        ("guidance_in", "time_text_embed.guidance_embedder"),
    ] {
        if dst == "guidance_in" && !guidance {
            continue;
        }
        plan.push(Joined::moved(
            format!("{dst}.in_layer"),
            format!("{src}.linear_1"),
        ));
        plan.push(Joined::moved(
            format!("{dst}.out_layer"),
            format!("{src}.linear_2"),
        ));
    }
    plan.push(Joined::moved("txt_in", "context_embedder"));
    plan.push(Joined::moved("img_in", "x_embedder"));
    plan.push(Joined::moved("final_layer.linear", "proj_out"));
    plan.push(Joined::swapped(
        "final_layer.adaLN_modulation.1",
        "norm_out.linear",
    ));
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
            plan.push(Joined::moved(format!("{d}.{dst}"), format!("{b}.{src}")));
        }
        plan.push(Joined::stacked(
            format!("{d}.img_attn.qkv"),
            ["q", "k", "v"].map(|x| format!("{b}.attn.to_{x}")).to_vec(),
        ));
        plan.push(Joined::stacked(
            format!("{d}.txt_attn.qkv"),
            ["q", "k", "v"]
                .map(|x| format!("{b}.attn.add_{x}_proj"))
                .to_vec(),
        ));
    }
    for i in 0..single {
        let (d, b) = (
            format!("single_blocks.{i}"),
            format!("single_transformer_blocks.{i}"),
        );
        plan.push(Joined::moved(
            format!("{d}.modulation.lin"),
            format!("{b}.norm.linear"),
        ));
        plan.push(Joined::moved(
            format!("{d}.linear2"),
            format!("{b}.proj_out"),
        ));
        plan.push(Joined::stacked(
            format!("{d}.linear1"),
            vec![
                format!("{b}.attn.to_q"),
                format!("{b}.attn.to_k"),
                format!("{b}.attn.to_v"),
                format!("{b}.proj_mlp"),
            ],
        ));
    }
    plan
}

/// Renames a diffusers `FluxTransformer2DModel` state dict to Black Forest Labs' names, the
/// inverse of diffusers' `convert_flux_transformer_checkpoint_to_diffusers`: q, k, v (and the
/// single blocks' MLP input) concatenated into `qkv` / `linear1`, the final modulation's halves
/// swapped (diffusers keeps scale, shift; BFL shift, scale). See [`bfl_plan`].
pub fn diffusers_to_bfl(
    w: &mut WeightMap,
    double: usize,
    single: usize,
) -> std::result::Result<(), DiffusionError> {
    let guidance = w.contains("time_text_embed.guidance_embedder.linear_1.weight");
    let run = |w: &mut WeightMap| -> Result<()> {
        apply_plan(w, &bfl_plan(double, single, guidance))?;
        let mv = |w: &mut WeightMap, dst: String, src: String| -> Result<()> {
            let t = w.take(&src)?;
            w.insert(dst, t);
            Ok(())
        };
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
                mv(w, format!("{d}.{dst}"), format!("{b}.{src}"))?;
            }
        }
        for i in 0..single {
            let (d, b) = (
                format!("single_blocks.{i}"),
                format!("single_transformer_blocks.{i}"),
            );
            for (dst, src) in [("query_norm", "norm_q"), ("key_norm", "norm_k")] {
                mv(
                    w,
                    format!("{d}.norm.{dst}.scale"),
                    format!("{b}.attn.{src}.weight"),
                )?;
            }
        }
        Ok(())
    };
    run(w).map_err(|e| DiffusionError::Model(format!("FLUX transformer: {e}")))
}

/// Weights stacked along their first dimension. Quantised matrices of one type and width are
/// joined block for block (each row is a whole number of blocks, so rows are byte ranges);
/// anything else is joined in float32.
pub fn cat_rows(parts: Vec<Weight>, device: &Device) -> Result<Weight> {
    let quant: Option<Vec<&Arc<QTensor>>> = parts
        .iter()
        .map(|p| match p {
            Weight::Quant(q) => Some(q),
            Weight::Float(_) => None,
        })
        .collect();
    if let Some(qs) = quant
        && let Some(first) = qs.first()
        && first.rank() == 2
        && qs.iter().all(|q| {
            q.dtype() == first.dtype()
                && q.rank() == 2
                && q.shape().dims()[1] == first.shape().dims()[1]
        })
    {
        let k = first.shape().dims()[1];
        let mut bytes = Vec::new();
        let mut n = 0;
        for q in &qs {
            bytes.extend_from_slice(&q.data()?);
            n += q.shape().dims()[0];
        }
        let storage = candle::quantized::QStorage::from_data(
            std::borrow::Cow::Owned(bytes),
            device,
            first.dtype(),
        )?;
        return Ok(Weight::Quant(Arc::new(QTensor::new(storage, (n, k))?)));
    }
    let floats = parts
        .iter()
        .map(|p| p.float(device))
        .collect::<Result<Vec<_>>>()?;
    Ok(Weight::Float(Tensor::cat(&floats, 0)?))
}

/// Rows `start..start + len` of a weight (block for block when quantised).
pub fn rows(w: &Weight, start: usize, len: usize, device: &Device) -> Result<Weight> {
    match w {
        Weight::Float(t) => Ok(Weight::Float(t.narrow(0, start, len)?)),
        Weight::Quant(q) => {
            let (n, k) = q.shape().dims2()?;
            if start + len > n {
                candle::bail!("rows {start}..{} of {n}", start + len);
            }
            let data = q.data()?;
            let row = data.len() / n;
            let bytes = data[start * row..(start + len) * row].to_vec();
            let storage = candle::quantized::QStorage::from_data(
                std::borrow::Cow::Owned(bytes),
                device,
                q.dtype(),
            )?;
            Ok(Weight::Quant(Arc::new(QTensor::new(storage, (len, k))?)))
        }
    }
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

/// transformers' T5 encoder names to llama.cpp's, as city96's converter writes them (the
/// inverse of [`t5_gguf_name`]; `encoder.embed_tokens`, a copy of `shared`, has no GGUF name).
pub fn t5_name_in_gguf(name: &str) -> String {
    const MAP: [(&str, &str); 14] = [
        ("encoder.final_layer_norm", "enc.output_norm"),
        ("shared", "token_embd"),
        ("encoder.", "enc."),
        (".block.", ".blk."),
        (
            "layer.0.SelfAttention.relative_attention_bias",
            "attn_rel_b",
        ),
        ("layer.0.SelfAttention.q", "attn_q"),
        ("layer.0.SelfAttention.k", "attn_k"),
        ("layer.0.SelfAttention.v", "attn_v"),
        ("layer.0.SelfAttention.o", "attn_o"),
        ("layer.0.layer_norm", "attn_norm"),
        ("layer.1.DenseReluDense.wi_0", "ffn_gate"),
        ("layer.1.DenseReluDense.wi_1", "ffn_up"),
        ("layer.1.DenseReluDense.wo", "ffn_down"),
        ("layer.1.layer_norm", "ffn_norm"),
    ];
    MAP.iter()
        .fold(name.to_string(), |s, (a, b)| s.replace(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t5_names_round_trip_through_llama_cpp_names() {
        for n in [
            "shared.weight",
            "encoder.final_layer_norm.weight",
            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            "encoder.block.11.layer.0.SelfAttention.q.weight",
            "encoder.block.3.layer.1.DenseReluDense.wi_0.weight",
            "encoder.block.3.layer.1.DenseReluDense.wo.weight",
            "encoder.block.3.layer.1.layer_norm.weight",
        ] {
            let g = t5_name_in_gguf(n);
            assert!(g.starts_with("enc.") || g.starts_with("token_embd"), "{g}");
            assert_eq!(t5_gguf_name(&g), n);
        }
        assert_eq!(
            t5_name_in_gguf("encoder.block.0.layer.0.SelfAttention.q.weight"),
            "enc.blk.0.attn_q.weight"
        );
    }

    /// A LoRA change to a quantised matrix is applied beside it, exactly: the product with the
    /// change minus the product without is `x·downᵀ·upᵀ` (both from one activation rounding,
    /// which cancels), for 40 rows (tiles) and 1 row (plain kernels); two changes to one matrix
    /// add. A float matrix gets the change summed in; a change that does not fit is refused.
    #[test]
    fn low_rank_changes_to_quantised_weights_are_exact() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 0.1, (64, 96), &dev).unwrap();
        let bias = Tensor::randn(0f32, 0.1, 64, &dev).unwrap();
        let up = Tensor::randn(0f32, 0.1, (64, 3), &dev).unwrap();
        let down = Tensor::randn(0f32, 0.1, (3, 96), &dev).unwrap();
        let up2 = Tensor::randn(0f32, 0.1, (64, 2), &dev).unwrap();
        let down2 = Tensor::randn(0f32, 0.1, (2, 96), &dev).unwrap();
        let q = Arc::new(QTensor::quantize(&w, GgmlDType::Q8_0).unwrap());
        let map = |w: Weight| {
            let mut m = HashMap::new();
            m.insert("l.weight".to_string(), w);
            m.insert("l.bias".to_string(), Weight::Float(bias.clone()));
            WeightMap::new(m, &dev, "test".into())
        };
        let mut plain = map(Weight::Quant(q.clone()));
        let plain = plain.linear("l", 96, 64, true).unwrap();
        let mut changed = map(Weight::Quant(q.clone()));
        changed
            .add_low_rank("l.weight", up.clone(), down.clone())
            .unwrap();
        changed
            .add_low_rank("l.weight", up2.clone(), down2.clone())
            .unwrap();
        let lin = changed.linear("l", 96, 64, true).unwrap();
        changed.check_used().unwrap();
        let max_diff = |a: Tensor, b: Tensor| -> f32 {
            (a - b)
                .and_then(|d| d.abs()?.flatten_all()?.max(0)?.to_scalar())
                .unwrap()
        };
        let delta = (up.matmul(&down).unwrap() + up2.matmul(&down2).unwrap()).unwrap();
        for rows in [40, 1] {
            let x = Tensor::randn(0f32, 1.0, (1, rows, 96), &dev).unwrap();
            let got = (lin.forward(&x).unwrap() - plain.forward(&x).unwrap()).unwrap();
            let want = x.broadcast_matmul(&delta.t().unwrap()).unwrap();
            let d = max_diff(got, want);
            assert!(d < 1e-5, "{rows} rows: {d}");
        }
        // Float: summed into the weight.
        let mut float = map(Weight::Float(w.clone()));
        float
            .add_low_rank("l.weight", up.clone(), down.clone())
            .unwrap();
        let t = float.tensor("l.weight", &[64, 96]).unwrap();
        let d = max_diff(t, (&w + up.matmul(&down).unwrap()).unwrap());
        assert!(d < 1e-6, "{d}");
        // Wrong shapes are refused; an unapplied change fails the census.
        let mut m = map(Weight::Quant(q));
        assert!(
            m.add_low_rank("l.weight", up.t().unwrap(), down.clone())
                .is_err()
        );
        assert!(
            m.add_low_rank("nope.weight", up.clone(), down.clone())
                .is_err()
        );
        m.add_low_rank("l.weight", up, down).unwrap();
        m.take("l.weight").unwrap();
        m.take("l.bias").unwrap();
        let e = m.check_used().unwrap_err().to_string();
        assert!(e.contains("not applied"), "{e}");
    }

    /// Hostile GGUF headers are refused with a message, not a panic: a zero alignment (candle
    /// divides by it), dimensions whose product overflows, a tensor past the end of the file,
    /// a truncated header, not a GGUF at all.
    #[test]
    fn malformed_gguf_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        // GGUF v3: magic, version, tensor count, kv count, then kvs and tensor infos.
        let header = |tensors: u64, kvs: u64| {
            let mut b = b"GGUF".to_vec();
            b.extend(3u32.to_le_bytes());
            b.extend(tensors.to_le_bytes());
            b.extend(kvs.to_le_bytes());
            b
        };
        let string = |b: &mut Vec<u8>, s: &str| {
            b.extend((s.len() as u64).to_le_bytes());
            b.extend(s.as_bytes());
        };
        let tensor = |b: &mut Vec<u8>, dims: &[u64]| {
            string(b, "w");
            b.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                b.extend(d.to_le_bytes());
            }
            b.extend(0u32.to_le_bytes()); // F32
            b.extend(0u64.to_le_bytes()); // offset
        };
        let mut zero_align = header(1, 1);
        string(&mut zero_align, "general.alignment");
        zero_align.extend(4u32.to_le_bytes()); // u32
        zero_align.extend(0u32.to_le_bytes());
        tensor(&mut zero_align, &[4]);
        zero_align.extend([0u8; 64]);
        let mut overflow = header(1, 0);
        tensor(&mut overflow, &[1 << 40, 1 << 40]);
        overflow.extend([0u8; 64]);
        let mut past_end = header(1, 0);
        tensor(&mut past_end, &[1 << 20]);
        past_end.extend([0u8; 64]);
        let truncated = header(3, 2);
        for (name, bytes) in [
            ("zero-align.gguf", zero_align.as_slice()),
            ("overflow.gguf", overflow.as_slice()),
            ("past-end.gguf", past_end.as_slice()),
            ("truncated.gguf", truncated.as_slice()),
            ("text.gguf", b"not a gguf file at all".as_slice()),
        ] {
            let p = write(name, bytes);
            match WeightMap::gguf(&p, &Device::Cpu, |n| n.to_string()) {
                Err(DiffusionError::Model(m)) => assert!(m.contains(name), "{name}: {m}"),
                Err(e) => panic!("{name}: {e}"),
                Ok(_) => panic!("{name} was read"),
            }
        }
    }

    /// Quantised rows split and joined block for block give back the same matrix, byte for
    /// byte (the FLUX folder's q, k, v joined into `qkv`; the final modulation's halves swapped).
    #[test]
    fn quantised_rows_split_and_join_exactly() {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (96, 256), &dev).unwrap();
        for dtype in [GgmlDType::Q8_0, GgmlDType::Q4K] {
            let q = Weight::Quant(Arc::new(QTensor::quantize(&w, dtype).unwrap()));
            let parts = vec![
                rows(&q, 0, 32, &dev).unwrap(),
                rows(&q, 32, 48, &dev).unwrap(),
                rows(&q, 80, 16, &dev).unwrap(),
            ];
            let joined = cat_rows(parts, &dev).unwrap();
            let (Weight::Quant(a), Weight::Quant(b)) = (&q, &joined) else {
                panic!("not quantised")
            };
            assert_eq!(a.shape(), b.shape());
            assert_eq!(a.data().unwrap(), b.data().unwrap(), "{dtype:?}");
            let tail = rows(&q, 80, 16, &dev).unwrap().float(&dev).unwrap();
            let want = q.float(&dev).unwrap().narrow(0, 80, 16).unwrap();
            assert_eq!(
                tail.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                want.flatten_all().unwrap().to_vec1::<f32>().unwrap()
            );
        }
        assert!(rows(&Weight::Float(w), 90, 16, &dev).is_err());
    }

    /// Both ways of multiplying by quantised blocks — tiles made for the call (32 rows or
    /// more) and the plain kernels (fewer) — against the dequantised weights in float32: the
    /// activations' 8-bit rounding only (a few 1e-3 relative), for every supported type.
    #[test]
    fn quantised_products_match_dequantised_weights() {
        let dev = Device::Cpu;
        let (n, k) = (48, 512);
        let w = Tensor::randn(0f32, 0.05, (n, k), &dev).unwrap();
        for dtype in [
            GgmlDType::Q4_0,
            GgmlDType::Q5_0,
            GgmlDType::Q8_0,
            GgmlDType::Q4K,
            GgmlDType::Q5K,
            GgmlDType::Q6K,
        ] {
            let q = Arc::new(QTensor::quantize(&w, dtype).unwrap());
            let deq = q.dequantize(&dev).unwrap();
            let lin = QLinear::new(Weight::Quant(q), None, &dev).unwrap();
            for rows in [1, 7, 31, 32, 70] {
                let x = Tensor::randn(0f32, 1.0, (1, rows, k), &dev).unwrap();
                let got = lin.forward(&x).unwrap();
                assert_eq!(got.dims(), &[1, rows, n]);
                let want = x.matmul(&deq.t().unwrap().unsqueeze(0).unwrap()).unwrap();
                let err = (&got - &want)
                    .unwrap()
                    .sqr()
                    .unwrap()
                    .mean_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
                    .sqrt();
                let scale = want
                    .sqr()
                    .unwrap()
                    .mean_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
                    .sqrt();
                assert!(
                    err < 0.02 * scale,
                    "{dtype:?} {rows} rows: {err} of {scale}"
                );
            }
        }
    }
}
