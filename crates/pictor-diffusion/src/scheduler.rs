//! Samplers as diffusers defines them — `EulerDiscreteScheduler`, `EulerAncestralDiscreteScheduler`,
//! `DDIMScheduler`, `DPMSolverMultistepScheduler` (DPM++ 2M), `HeunDiscreteScheduler`,
//! `LMSDiscreteScheduler` — each configured from the model's `scheduler_config.json` as
//! `Class.from_config(...)` configures it: a key the file has is used, a key it lacks takes the
//! class's own default (so an SD 1.5 file without `timestep_spacing` gives DDIM "leading" and the
//! others "linspace", as in diffusers). The noise an ancestral step adds is the caller's, so the
//! seed's noise source (not the sampler) decides the picture.
//!
//! Arithmetic follows diffusers' order and precision: betas from torch's fused `linspace`, the
//! cumulative alphas accumulated in float64 and stored as float32 (torch's `cumprod`), sigmas in
//! float32, the schedule's timesteps and interpolations in float64 as numpy computes them
//! (rounding half to even), the step coefficients in float32.

use candle::Tensor;
use serde_json::Value;

use super::DiffusionError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prediction {
    Epsilon,
    V,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spacing {
    Leading,
    Trailing,
    Linspace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BetaSchedule {
    ScaledLinear,
    Linear,
}

/// The sampler a job uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sampler {
    /// Euler (diffusers `EulerDiscreteScheduler`; A1111 "Euler").
    Euler,
    /// Euler ancestral (diffusers `EulerAncestralDiscreteScheduler`; A1111 "Euler a").
    EulerAncestral,
    /// DDIM, eta 0 (diffusers `DDIMScheduler`; A1111 "DDIM").
    Ddim,
    /// DPM++ 2M (diffusers `DPMSolverMultistepScheduler`, dpmsolver++ order 2; A1111 "DPM++ 2M").
    DpmPp2m,
    /// Heun (diffusers `HeunDiscreteScheduler`; A1111 "Heun").
    Heun,
    /// LMS, order 4 (diffusers `LMSDiscreteScheduler`; A1111 "LMS").
    Lms,
}

impl Sampler {
    pub const ALL: [Sampler; 6] = [
        Sampler::Euler,
        Sampler::EulerAncestral,
        Sampler::Ddim,
        Sampler::DpmPp2m,
        Sampler::Heun,
        Sampler::Lms,
    ];

    /// The sampler a name means (Pictor's ids, A1111's names, diffusers' class names; case,
    /// `_` and `-` do not matter).
    pub fn parse(name: &str) -> Option<Sampler> {
        Self::parse_with_schedule(name).map(|(s, _)| s)
    }

    /// As [`Sampler::parse`], also reading A1111's older combined names ("DPM++ 2M Karras"):
    /// `Some(true)` when the name asks for Karras sigmas.
    pub fn parse_with_schedule(name: &str) -> Option<(Sampler, Option<bool>)> {
        let lower = name.trim().to_ascii_lowercase().replace(['_', '-'], " ");
        let n = lower.split_whitespace().collect::<Vec<_>>().join(" ");
        let (base, karras) = match n.strip_suffix(" karras") {
            Some(b) => (b, Some(true)),
            None => (n.as_str(), None),
        };
        let s = match base {
            "euler" | "euler discrete" => Sampler::Euler,
            "euler a" | "euler ancestral" | "euler ancestral discrete" => Sampler::EulerAncestral,
            "ddim" => Sampler::Ddim,
            "dpm++ 2m" | "dpmpp 2m" | "dpm++2m" | "dpmpp2m" | "dpm solver multistep" => {
                Sampler::DpmPp2m
            }
            "heun" | "heun discrete" => Sampler::Heun,
            "lms" | "lms discrete" | "k lms" => Sampler::Lms,
            _ => return None,
        };
        if karras.is_some() && !s.supports_karras() {
            return None;
        }
        Some((s, karras))
    }

    /// Pictor's id (configuration, CLI, API).
    pub fn id(self) -> &'static str {
        match self {
            Sampler::Euler => "euler",
            Sampler::EulerAncestral => "euler_a",
            Sampler::Ddim => "ddim",
            Sampler::DpmPp2m => "dpm++_2m",
            Sampler::Heun => "heun",
            Sampler::Lms => "lms",
        }
    }

    /// The AUTOMATIC1111 name.
    pub fn a1111_name(self) -> &'static str {
        match self {
            Sampler::Euler => "Euler",
            Sampler::EulerAncestral => "Euler a",
            Sampler::Ddim => "DDIM",
            Sampler::DpmPp2m => "DPM++ 2M",
            Sampler::Heun => "Heun",
            Sampler::Lms => "LMS",
        }
    }

    /// Whether the diffusers class takes `use_karras_sigmas`.
    pub fn supports_karras(self) -> bool {
        matches!(
            self,
            Sampler::Euler | Sampler::DpmPp2m | Sampler::Heun | Sampler::Lms
        )
    }

    /// Whether each step adds fresh noise.
    pub fn ancestral(self) -> bool {
        self == Sampler::EulerAncestral
    }

    /// Model evaluations per step (diffusers' `order`).
    pub fn order(self) -> usize {
        if self == Sampler::Heun { 2 } else { 1 }
    }

    /// The class's `timestep_spacing` when the file does not say.
    fn default_spacing(self) -> Spacing {
        if self == Sampler::Ddim {
            Spacing::Leading
        } else {
            Spacing::Linspace
        }
    }
}

/// The parts of `scheduler_config.json` the samplers use.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    pub num_train_timesteps: usize,
    pub beta_start: f64,
    pub beta_end: f64,
    pub beta_schedule: BetaSchedule,
    pub prediction: Prediction,
    /// `None`: the file does not say, each sampler's class default applies.
    pub spacing: Option<Spacing>,
    pub steps_offset: usize,
    pub karras: bool,
    /// DDIM: the alpha past the last step is 1 (else the first training step's).
    pub set_alpha_to_one: bool,
    /// DDIM: the predicted clean sample is clamped to ± this (`clip_sample`, whose class
    /// default is on at 1.0; SD's own files turn it off).
    pub clip_sample: Option<f32>,
    /// DPM++: the final sigma is the smallest training sigma instead of 0.
    pub final_sigma_min: bool,
    pub lower_order_final: bool,
    pub euler_at_final: bool,
}

impl Default for SchedulerConfig {
    /// Stable Diffusion's training schedule.
    fn default() -> Self {
        SchedulerConfig {
            num_train_timesteps: 1000,
            beta_start: 0.00085,
            beta_end: 0.012,
            beta_schedule: BetaSchedule::ScaledLinear,
            prediction: Prediction::Epsilon,
            spacing: None,
            steps_offset: 1,
            karras: false,
            set_alpha_to_one: false,
            clip_sample: None,
            final_sigma_min: false,
            lower_order_final: true,
            euler_at_final: false,
        }
    }
}

impl SchedulerConfig {
    pub fn from_json(v: &Value) -> Result<SchedulerConfig, DiffusionError> {
        let d = SchedulerConfig::default();
        let bad = |m: String| DiffusionError::Model(format!("scheduler_config.json: {m}"));
        let f = |k: &str, dv: f64| v.get(k).and_then(Value::as_f64).unwrap_or(dv);
        let u = |k: &str, dv: usize| v.get(k).and_then(Value::as_u64).map_or(dv, |x| x as usize);
        let b = |k: &str, dv: bool| v.get(k).and_then(Value::as_bool).unwrap_or(dv);
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        let beta_schedule = match s("beta_schedule").unwrap_or("scaled_linear") {
            "scaled_linear" => BetaSchedule::ScaledLinear,
            "linear" => BetaSchedule::Linear,
            other => return Err(bad(format!("beta_schedule {other:?} is not supported"))),
        };
        let prediction = match s("prediction_type").unwrap_or("epsilon") {
            "epsilon" => Prediction::Epsilon,
            "v_prediction" => Prediction::V,
            other => return Err(bad(format!("prediction_type {other:?} is not supported"))),
        };
        let spacing = match s("timestep_spacing") {
            None => None,
            Some("leading") => Some(Spacing::Leading),
            Some("trailing") => Some(Spacing::Trailing),
            Some("linspace") => Some(Spacing::Linspace),
            Some(other) => {
                return Err(bad(format!("timestep_spacing {other:?} is not supported")));
            }
        };
        let c = SchedulerConfig {
            num_train_timesteps: u("num_train_timesteps", d.num_train_timesteps),
            beta_start: f("beta_start", d.beta_start),
            beta_end: f("beta_end", d.beta_end),
            beta_schedule,
            prediction,
            spacing,
            steps_offset: u("steps_offset", 0),
            karras: b("use_karras_sigmas", false),
            // DDIM's class default is true; SD's files say false.
            set_alpha_to_one: b("set_alpha_to_one", true),
            clip_sample: b("clip_sample", true).then(|| f("clip_sample_range", 1.0) as f32),
            final_sigma_min: s("final_sigmas_type") == Some("sigma_min"),
            lower_order_final: b("lower_order_final", true),
            euler_at_final: b("euler_at_final", false),
        };
        let plausible = (2..=100_000).contains(&c.num_train_timesteps)
            && c.steps_offset < c.num_train_timesteps
            && c.beta_start > 0.0
            && c.beta_end > c.beta_start
            && c.beta_end < 1.0;
        if !plausible {
            return Err(bad("implausible training schedule".into()));
        }
        Ok(c)
    }

    /// The cumulative alphas and training sigmas `sqrt((1 - ᾱ) / ᾱ)`, as torch computes them:
    /// betas from a `linspace` whose halves are fused multiply-adds from either end, the product
    /// accumulated in float64 and stored as float32, the sigmas in float32.
    pub fn train_tables(&self) -> (Vec<f32>, Vec<f32>) {
        let n = self.num_train_timesteps;
        let (a, b) = match self.beta_schedule {
            BetaSchedule::ScaledLinear => {
                (self.beta_start.sqrt() as f32, self.beta_end.sqrt() as f32)
            }
            BetaSchedule::Linear => (self.beta_start as f32, self.beta_end as f32),
        };
        let step = (b - a) / (n - 1) as f32;
        let mut acc = 1f64;
        let mut alphas_cumprod = Vec::with_capacity(n);
        let mut sigmas = Vec::with_capacity(n);
        for i in 0..n {
            let x = if i < n / 2 {
                step.mul_add(i as f32, a)
            } else {
                (-step).mul_add((n - 1 - i) as f32, b)
            };
            let beta = match self.beta_schedule {
                BetaSchedule::ScaledLinear => x * x,
                BetaSchedule::Linear => x,
            };
            acc *= f64::from(1.0 - beta);
            let ac = acc as f32;
            alphas_cumprod.push(ac);
            sigmas.push(((1.0 - ac) / ac).sqrt());
        }
        (alphas_cumprod, sigmas)
    }

    /// Whether a run of `sampler` uses Karras sigmas: `karras` overrides the file's
    /// `use_karras_sigmas`; samplers without Karras sigmas never do.
    pub fn uses_karras(&self, sampler: Sampler, karras: Option<bool>) -> bool {
        sampler.supports_karras() && karras.unwrap_or(self.karras)
    }

    fn spacing_for(&self, sampler: Sampler) -> Spacing {
        self.spacing.unwrap_or(sampler.default_spacing())
    }

    /// The schedule of an `n`-step run with `sampler` (diffusers `set_timesteps`). `karras`
    /// overrides the file's `use_karras_sigmas` (samplers without Karras sigmas ignore it).
    pub fn schedule(
        &self,
        n: usize,
        sampler: Sampler,
        karras: Option<bool>,
    ) -> Result<Schedule, DiffusionError> {
        let t = self.num_train_timesteps;
        if n == 0 || n > t {
            return Err(DiffusionError::Invalid(format!(
                "steps must be between 1 and {t}"
            )));
        }
        let karras = self.uses_karras(sampler, karras);
        let spacing = self.spacing_for(sampler);
        let (alphas_cumprod, table) = self.train_tables();
        let mut s = Schedule {
            sampler,
            timesteps: Vec::new(),
            sigmas: Vec::new(),
            init_noise_sigma: 1.0,
            prediction: self.prediction,
            karras,
            ddim: Vec::new(),
            clip_sample: None,
            dpm: DpmFlags {
                lower_order_final: self.lower_order_final,
                euler_at_final: self.euler_at_final,
                final_zero: !self.final_sigma_min,
            },
        };
        match sampler {
            Sampler::Euler | Sampler::EulerAncestral | Sampler::Heun | Sampler::Lms => {
                let (timesteps, mut sigmas) = self.discrete(n, spacing, karras, &table);
                let max = sigmas.iter().copied().fold(0f32, f32::max);
                s.init_noise_sigma = match spacing {
                    Spacing::Linspace | Spacing::Trailing => max,
                    Spacing::Leading => (max * max + 1.0).sqrt(),
                };
                sigmas.push(0.0);
                if sampler == Sampler::Heun {
                    // [s0, s1, s1, …, s_{n-1}, s_{n-1}, 0] and [t0, t1, t1, …, t_{n-1}, t_{n-1}].
                    let mut st = vec![timesteps[0]];
                    let mut ss = vec![sigmas[0]];
                    for i in 1..n {
                        st.extend([timesteps[i], timesteps[i]]);
                        ss.extend([sigmas[i], sigmas[i]]);
                    }
                    ss.push(0.0);
                    s.timesteps = st;
                    s.sigmas = ss;
                } else {
                    s.timesteps = timesteps;
                    s.sigmas = sigmas;
                }
            }
            Sampler::Ddim => {
                let ts: Vec<usize> = match spacing {
                    Spacing::Linspace => numpy_linspace(0.0, (t - 1) as f64, n)
                        .into_iter()
                        .rev()
                        .map(|x| x.round_ties_even() as usize)
                        .collect(),
                    Spacing::Leading => {
                        let ratio = t / n;
                        (0..n)
                            .rev()
                            .map(|i| (i * ratio + self.steps_offset).min(t - 1))
                            .collect()
                    }
                    Spacing::Trailing => trailing(t, n),
                };
                s.clip_sample = self.clip_sample;
                let final_alpha = if self.set_alpha_to_one {
                    1.0
                } else {
                    alphas_cumprod[0]
                };
                let delta = t / n;
                s.ddim = ts
                    .iter()
                    .map(|&ts| {
                        let at = alphas_cumprod[ts.min(t - 1)];
                        let prev = if ts >= delta {
                            alphas_cumprod[ts - delta]
                        } else {
                            final_alpha
                        };
                        (at, prev)
                    })
                    .collect();
                s.timesteps = ts.iter().map(|&x| x as f32).collect();
                s.sigmas = ts.iter().map(|&x| table[x.min(t - 1)]).collect();
                s.sigmas.push(0.0);
            }
            Sampler::DpmPp2m => {
                let ts: Vec<usize> = match spacing {
                    Spacing::Linspace => numpy_linspace(0.0, (t - 1) as f64, n + 1)
                        .into_iter()
                        .rev()
                        .take(n)
                        .map(|x| x.round_ties_even() as usize)
                        .collect(),
                    Spacing::Leading => {
                        let ratio = t / (n + 1);
                        (1..=n)
                            .rev()
                            .map(|i| (i * ratio + self.steps_offset).min(t - 1))
                            .collect()
                    }
                    Spacing::Trailing => trailing(t, n),
                };
                let mut sigmas: Vec<f32>;
                if karras {
                    let log_sigmas: Vec<f32> = table.iter().map(|s| s.ln()).collect();
                    let k = karras_sigmas(f64::from(table[0]), f64::from(table[t - 1]), n);
                    s.timesteps = k
                        .iter()
                        .map(|&x| sigma_to_t(x, &log_sigmas).round_ties_even() as f32)
                        .collect();
                    sigmas = k.into_iter().map(|x| x as f32).collect();
                } else {
                    s.timesteps = ts.iter().map(|&x| x as f32).collect();
                    sigmas = ts.iter().map(|&x| table[x.min(t - 1)]).collect();
                }
                sigmas.push(if self.final_sigma_min { table[0] } else { 0.0 });
                s.sigmas = sigmas;
            }
        }
        Ok(s)
    }

    /// Euler-family timesteps and sigmas (Euler, Euler a, Heun, LMS share this code in
    /// diffusers): fractional float32 timesteps, sigmas interpolated in float64, Karras sigmas
    /// spanning the interpolated range.
    fn discrete(
        &self,
        n: usize,
        spacing: Spacing,
        karras: bool,
        table: &[f32],
    ) -> (Vec<f32>, Vec<f32>) {
        let t = self.num_train_timesteps;
        let mut timesteps: Vec<f32> = match spacing {
            Spacing::Linspace => numpy_linspace(0.0, (t - 1) as f64, n)
                .into_iter()
                .rev()
                .map(|x| x as f32)
                .collect(),
            Spacing::Leading => {
                let ratio = t / n;
                (0..n)
                    .rev()
                    .map(|i| (i * ratio) as f32 + self.steps_offset as f32)
                    .collect()
            }
            Spacing::Trailing => trailing(t, n).into_iter().map(|x| x as f32).collect(),
        };
        let mut sigmas: Vec<f64> = timesteps
            .iter()
            .map(|&ts| interp(f64::from(ts), table))
            .collect();
        if karras {
            let log_sigmas: Vec<f32> = table.iter().map(|s| s.ln()).collect();
            sigmas = karras_sigmas(sigmas[sigmas.len() - 1], sigmas[0], n);
            timesteps = sigmas
                .iter()
                .map(|&s| sigma_to_t(s, &log_sigmas) as f32)
                .collect();
        }
        (timesteps, sigmas.into_iter().map(|s| s as f32).collect())
    }
}

/// numpy `linspace(start, stop, num)`: `i * step + start`, the last exactly `stop`.
fn numpy_linspace(start: f64, stop: f64, num: usize) -> Vec<f64> {
    if num == 1 {
        return vec![start];
    }
    let step = (stop - start) / (num - 1) as f64;
    (0..num)
        .map(|i| {
            if i == num - 1 {
                stop
            } else {
                i as f64 * step + start
            }
        })
        .collect()
}

/// "trailing": numpy `round(arange(t, 0, -t / n)) - 1` (the first `n`).
fn trailing(t: usize, n: usize) -> Vec<usize> {
    let ratio = t as f64 / n as f64;
    let delta = (t as f64 - ratio) - t as f64;
    (0..n)
        .map(|k| ((t as f64 + k as f64 * delta).round_ties_even() as usize).saturating_sub(1))
        .collect()
}

/// Karras et al. sigmas from `max` down to `min` (rho 7), in float64.
fn karras_sigmas(min: f64, max: f64, n: usize) -> Vec<f64> {
    let rho = 7.0;
    let (min_inv, max_inv) = (min.powf(1.0 / rho), max.powf(1.0 / rho));
    numpy_linspace(0.0, 1.0, n)
        .into_iter()
        .map(|ramp| (max_inv + ramp * (min_inv - max_inv)).powf(rho))
        .collect()
}

/// numpy `interp(x, arange(len), ys)`.
fn interp(x: f64, ys: &[f32]) -> f64 {
    if x <= 0.0 {
        return f64::from(ys[0]);
    }
    let last = ys.len() - 1;
    if x >= last as f64 {
        return f64::from(ys[last]);
    }
    let i = x.floor() as usize;
    if x == i as f64 {
        return f64::from(ys[i]);
    }
    let (a, b) = (f64::from(ys[i]), f64::from(ys[i + 1]));
    (b - a) * (x - i as f64) + a
}

/// diffusers `_sigma_to_t`: the (fractional) training timestep of a sigma; the log sigmas are
/// float32 (numpy's log of the float32 table).
fn sigma_to_t(sigma: f64, log_sigmas: &[f32]) -> f64 {
    let ls = sigma.max(1e-10).ln();
    let n = log_sigmas.len();
    let count = log_sigmas
        .iter()
        .filter(|&&l| ls - f64::from(l) >= 0.0)
        .count();
    let low = count.saturating_sub(1).min(n - 2);
    let (lo, hi) = (log_sigmas[low], log_sigmas[low + 1]);
    let w = ((f64::from(lo) - ls) / f64::from(lo - hi)).clamp(0.0, 1.0);
    (1.0 - w) * low as f64 + w * (low + 1) as f64
}

#[derive(Debug, Clone, Copy)]
struct DpmFlags {
    lower_order_final: bool,
    euler_at_final: bool,
    final_zero: bool,
}

/// One run's schedule: a UNet timestep per model evaluation (Heun evaluates twice per step
/// but the last) and the sigmas in diffusers' layout (with the final one).
#[derive(Debug, Clone)]
pub struct Schedule {
    pub sampler: Sampler,
    pub timesteps: Vec<f32>,
    pub sigmas: Vec<f32>,
    /// What the initial standard-normal latents are multiplied by.
    pub init_noise_sigma: f32,
    pub prediction: Prediction,
    /// Whether the sigmas are Karras'.
    pub karras: bool,
    /// DDIM: (ᾱ at the step's timestep, ᾱ at the previous one) per step.
    ddim: Vec<(f32, f32)>,
    /// DDIM: the clamp of the predicted clean sample.
    clip_sample: Option<f32>,
    dpm: DpmFlags,
}

/// What a sampler carries from one evaluation to the next.
#[derive(Default)]
pub struct SamplerState {
    /// DPM++: the last denoised predictions; LMS: the last derivatives (newest last).
    history: Vec<Tensor>,
    /// Heun, between its two evaluations: (derivative, dt, sample).
    heun: Option<(Tensor, f32, Tensor)>,
}

/// DPM-Solver's `_sigma_to_alpha_sigma_t` in float32.
fn alpha_sigma(s: f32) -> (f32, f32) {
    let a = 1.0 / (s * s + 1.0).sqrt();
    (a, s * a)
}

impl Schedule {
    /// Model evaluations in the whole run.
    pub fn len(&self) -> usize {
        self.timesteps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.timesteps.is_empty()
    }

    /// The evaluation an img2img run that skips `steps` steps starts at.
    pub fn begin(&self, steps: usize) -> usize {
        steps * self.sampler.order()
    }

    /// `scale_model_input` at evaluation `k`: the UNet sees `sample / sqrt(σ² + 1)` (DDIM and
    /// DPM++ work in the variance-preserving form and take the sample as is).
    pub fn scale_input(&self, sample: &Tensor, k: usize) -> candle::Result<Tensor> {
        match self.sampler {
            Sampler::Ddim | Sampler::DpmPp2m => Ok(sample.clone()),
            _ => {
                let s = self.sigmas[k];
                sample / f64::from((s * s + 1.0).sqrt())
            }
        }
    }

    /// Euler-family `pred_original_sample` at sigma `s`.
    fn denoised_at(&self, out: &Tensor, s: f32, sample: &Tensor) -> candle::Result<Tensor> {
        match self.prediction {
            Prediction::Epsilon => sample - (out * f64::from(s))?,
            Prediction::V => {
                let c_out = f64::from(-s / (s * s + 1.0).sqrt());
                let c_skip = f64::from(s * s + 1.0);
                (out * c_out)? + (sample / c_skip)?
            }
        }
    }

    /// One evaluation's step from `sample` at evaluation `k`. Ancestral steps add `noise`
    /// (standard normal, the shape of `sample`), which the caller draws; `None` otherwise.
    pub fn step(
        &self,
        state: &mut SamplerState,
        out: &Tensor,
        k: usize,
        sample: &Tensor,
        noise: Option<&Tensor>,
    ) -> candle::Result<Tensor> {
        match self.sampler {
            Sampler::Euler | Sampler::EulerAncestral => {
                let sigma = self.sigmas[k];
                let next = self.sigmas[k + 1];
                let x0 = self.denoised_at(out, sigma, sample)?;
                let derivative = ((sample - &x0)? / f64::from(sigma))?;
                if self.sampler == Sampler::Euler {
                    return sample + (derivative * f64::from(next - sigma))?;
                }
                let up = (next * next * (sigma * sigma - next * next) / (sigma * sigma)).sqrt();
                let down = (next * next - up * up).sqrt();
                let prev = (sample + (derivative * f64::from(down - sigma))?)?;
                match noise {
                    Some(n) => prev + (n * f64::from(up))?,
                    None => Err(candle::Error::Msg("an ancestral step needs noise".into())),
                }
            }
            Sampler::Ddim => {
                let (at, ap) = self.ddim[k];
                let bt = 1.0 - at;
                let (x0, eps) = match self.prediction {
                    Prediction::Epsilon => (
                        ((sample - (out * f64::from(bt.sqrt()))?)? / f64::from(at.sqrt()))?,
                        out.clone(),
                    ),
                    Prediction::V => (
                        ((sample * f64::from(at.sqrt()))? - (out * f64::from(bt.sqrt()))?)?,
                        ((out * f64::from(at.sqrt()))? + (sample * f64::from(bt.sqrt()))?)?,
                    ),
                };
                let (x0, eps) = match self.clip_sample {
                    // diffusers clamps x₀ and keeps the model's ε (no `use_clipped_model_output`).
                    Some(r) => (x0.clamp(-r, r)?, eps),
                    None => (x0, eps),
                };
                let c = ((1.0 - ap) - 0.0).sqrt();
                (x0 * f64::from(ap.sqrt()))? + (eps * f64::from(c))?
            }
            Sampler::DpmPp2m => {
                let s0 = self.sigmas[k];
                let (a0, sg0) = alpha_sigma(s0);
                let x0 = match self.prediction {
                    Prediction::Epsilon => ((sample - (out * f64::from(sg0))?)? / f64::from(a0))?,
                    Prediction::V => ((sample * f64::from(a0))? - (out * f64::from(sg0))?)?,
                };
                let last = k + 1 == self.len();
                let first_order = state.history.is_empty()
                    || (last
                        && (self.dpm.euler_at_final
                            || (self.dpm.lower_order_final && self.len() < 15)
                            || self.dpm.final_zero));
                let (at, st) = alpha_sigma(self.sigmas[k + 1]);
                let lambda = |a: f32, s: f32| a.ln() - s.ln();
                let h = lambda(at, st) - lambda(a0, sg0);
                let em1 = (-h).exp() - 1.0;
                let base = ((sample * f64::from(st / sg0))? - (&x0 * f64::from(at * em1))?)?;
                let next = if first_order {
                    base
                } else {
                    let s1 = self.sigmas[k - 1];
                    let (a1, sg1) = alpha_sigma(s1);
                    let r0 = (lambda(a0, sg0) - lambda(a1, sg1)) / h;
                    let d1 =
                        ((&x0 - &state.history[state.history.len() - 1])? * f64::from(1.0 / r0))?;
                    (base - (d1 * f64::from(0.5 * (at * em1)))?)?
                };
                state.history = vec![x0];
                Ok(next)
            }
            Sampler::Heun => match state.heun.take() {
                None => {
                    let (sigma, next) = (self.sigmas[k], self.sigmas[k + 1]);
                    let x0 = self.denoised_at(out, sigma, sample)?;
                    let derivative = ((sample - &x0)? / f64::from(sigma))?;
                    let dt = next - sigma;
                    let prev = (sample + (&derivative * f64::from(dt))?)?;
                    // The last evaluation is a plain Euler step to sigma 0.
                    if k + 1 < self.len() {
                        state.heun = Some((derivative, dt, sample.clone()));
                    }
                    Ok(prev)
                }
                Some((d0, dt, saved)) => {
                    let next = self.sigmas[k];
                    let x0 = self.denoised_at(out, next, sample)?;
                    let d1 = ((sample - &x0)? / f64::from(next))?;
                    let d = ((d0 + d1)? / 2.0)?;
                    saved + (d * f64::from(dt))?
                }
            },
            Sampler::Lms => {
                let sigma = self.sigmas[k];
                let x0 = self.denoised_at(out, sigma, sample)?;
                let derivative = ((sample - &x0)? / f64::from(sigma))?;
                state.history.push(derivative);
                if state.history.len() > 4 {
                    state.history.remove(0);
                }
                let order = (k + 1).min(4);
                let mut acc: Option<Tensor> = None;
                for (cur, d) in state.history.iter().rev().enumerate().take(order) {
                    let c = lms_coefficient(&self.sigmas, order, k, cur) as f32;
                    let term = (d * f64::from(c))?;
                    acc = Some(match acc {
                        None => term,
                        Some(a) => (a + term)?,
                    });
                }
                match acc {
                    Some(a) => sample + a,
                    None => Ok(sample.clone()),
                }
            }
        }
    }

    /// `add_noise` for img2img: the clean latents noised to evaluation `k`.
    pub fn add_noise(&self, original: &Tensor, noise: &Tensor, k: usize) -> candle::Result<Tensor> {
        match self.sampler {
            Sampler::Ddim => {
                let (at, _) = self.ddim[k];
                (original * f64::from(at.sqrt()))? + (noise * f64::from((1.0 - at).sqrt()))?
            }
            Sampler::DpmPp2m => {
                let (a, s) = alpha_sigma(self.sigmas[k]);
                (original * f64::from(a))? + (noise * f64::from(s))?
            }
            _ => original + (noise * f64::from(self.sigmas[k]))?,
        }
    }
}

/// diffusers' LMS coefficient: the integral of the Lagrange basis polynomial `current` over
/// `[σ_t, σ_{t+1}]`, the polynomial evaluated in float32 as torch does and integrated as
/// scipy's `quad` does for it (its first 21-point Gauss–Kronrod pass, which meets the
/// tolerance for polynomials of degree ≤ 3).
fn lms_coefficient(sigmas: &[f32], order: usize, t: usize, current: usize) -> f64 {
    const XGK: [f64; 11] = [
        0.995_657_163_025_808_1,
        0.973_906_528_517_171_7,
        0.930_157_491_355_708_2,
        0.865_063_366_688_984_5,
        0.780_817_726_586_416_9,
        0.679_409_568_299_024_4,
        0.562_757_134_668_604_7,
        0.433_395_394_129_247_2,
        0.294_392_862_701_460_2,
        0.148_874_338_981_631_2,
        0.0,
    ];
    const WGK: [f64; 11] = [
        0.011_694_638_867_371_874,
        0.032_558_162_307_964_73,
        0.054_755_896_574_351_996,
        0.075_039_674_810_919_95,
        0.093_125_454_583_697_6,
        0.109_387_158_802_297_64,
        0.123_491_976_262_065_85,
        0.134_709_217_311_473_33,
        0.142_775_938_577_060_08,
        0.147_739_104_901_338_5,
        0.149_445_554_002_916_9,
    ];
    let f = |tau: f64| -> f64 {
        let tau = tau as f32;
        let mut p = 1f32;
        for k in 0..order {
            if k != current {
                p *= (tau - sigmas[t - k]) / (sigmas[t - current] - sigmas[t - k]);
            }
        }
        f64::from(p)
    };
    let (a, b) = (f64::from(sigmas[t]), f64::from(sigmas[t + 1]));
    let centr = 0.5 * (a + b);
    let hlgth = 0.5 * (b - a);
    let mut resk = WGK[10] * f(centr);
    for j in 0..5 {
        let jtw = 2 * j + 1;
        let absc = hlgth * XGK[jtw];
        resk += WGK[jtw] * (f(centr - absc) + f(centr + absc));
    }
    for j in 0..5 {
        let jtwm1 = 2 * j;
        let absc = hlgth * XGK[jtwm1];
        resk += WGK[jtwm1] * (f(centr - absc) + f(centr + absc));
    }
    resk * hlgth
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sd15() -> SchedulerConfig {
        SchedulerConfig {
            set_alpha_to_one: false,
            clip_sample: None,
            ..SchedulerConfig::default()
        }
    }

    #[test]
    fn timesteps_match_diffusers() {
        let c = SchedulerConfig {
            spacing: Some(Spacing::Leading),
            ..sd15()
        };
        let s = c.schedule(4, Sampler::Euler, None).unwrap();
        assert_eq!(s.timesteps, vec![751.0, 501.0, 251.0, 1.0]);
        let t = SchedulerConfig {
            spacing: Some(Spacing::Trailing),
            ..sd15()
        };
        assert_eq!(
            t.schedule(4, Sampler::Euler, None).unwrap().timesteps,
            vec![999.0, 749.0, 499.0, 249.0]
        );
        // SD-Turbo's one step: sigma ≈ 14.6 and the final 0.
        let one = t.schedule(1, Sampler::Euler, None).unwrap();
        assert_eq!(one.timesteps, vec![999.0]);
        assert!((one.sigmas[0] - 14.6146).abs() < 1e-3, "{:?}", one.sigmas);
        assert_eq!(one.sigmas[1], 0.0);

        // The SD 1.5 file has no timestep_spacing: each class's default (diffusers 0.42.1).
        let c = sd15();
        let ddim = c.schedule(20, Sampler::Ddim, None).unwrap();
        assert_eq!(ddim.timesteps[0], 951.0);
        assert_eq!(ddim.timesteps[19], 1.0);
        let dpm = c.schedule(20, Sampler::DpmPp2m, None).unwrap();
        let want: Vec<f32> = [
            999, 949, 899, 849, 799, 749, 699, 649, 599, 549, 500, 450, 400, 350, 300, 250, 200,
            150, 100, 50,
        ]
        .map(|x| x as f32)
        .to_vec();
        assert_eq!(dpm.timesteps, want);
        let karras = c.schedule(20, Sampler::DpmPp2m, Some(true)).unwrap();
        let want: Vec<f32> = [
            999, 962, 921, 876, 827, 772, 710, 640, 561, 474, 380, 285, 197, 123, 69, 35, 15, 6, 2,
            0,
        ]
        .map(|x| x as f32)
        .to_vec();
        assert_eq!(karras.timesteps, want);
        assert!((karras.sigmas[1] - 11.725_372).abs() < 1e-5);
        let lms = c.schedule(20, Sampler::Lms, None).unwrap();
        assert!((lms.timesteps[1] - 946.421).abs() < 1e-3);
        assert!((lms.init_noise_sigma - 14.614_647).abs() < 1e-5);
        let heun = c.schedule(10, Sampler::Heun, None).unwrap();
        assert_eq!(heun.len(), 19);
        assert_eq!(heun.timesteps[1], heun.timesteps[2]);
        assert_eq!(heun.sigmas.len(), 20);
    }

    #[test]
    fn train_tables_match_torch() {
        let (ac, sigmas) = sd15().train_tables();
        assert_eq!(ac[0], 0.999_15);
        assert_eq!(ac[999], 0.004_660_095);
        assert!((sigmas[0] - 0.029_167_535).abs() < 1e-8);
        assert!((sigmas[999] - 14.614_647).abs() < 1e-5);
    }

    #[test]
    fn samplers_by_name() {
        assert_eq!(Sampler::parse("Euler a"), Some(Sampler::EulerAncestral));
        assert_eq!(Sampler::parse("euler"), Some(Sampler::Euler));
        assert_eq!(Sampler::parse("DDIM"), Some(Sampler::Ddim));
        assert_eq!(
            Sampler::parse_with_schedule("DPM++ 2M Karras"),
            Some((Sampler::DpmPp2m, Some(true)))
        );
        assert_eq!(Sampler::parse("dpm++_2m"), Some(Sampler::DpmPp2m));
        assert_eq!(Sampler::parse("LMS"), Some(Sampler::Lms));
        assert_eq!(Sampler::parse("plms"), None);
        assert_eq!(Sampler::parse_with_schedule("DDIM Karras"), None);
        for s in Sampler::ALL {
            assert_eq!(Sampler::parse(s.id()), Some(s));
            assert_eq!(Sampler::parse(s.a1111_name()), Some(s));
        }
    }

    #[test]
    fn lms_first_coefficient_is_the_step() {
        let s = [10.0f32, 5.0, 0.0];
        assert!((lms_coefficient(&s, 1, 0, 0) + 5.0).abs() < 1e-9);
    }
}
