//! Samplers as diffusers defines them (`EulerDiscreteScheduler`, `EulerAncestralDiscreteScheduler`),
//! driven by the model's `scheduler_config.json`. The noise an ancestral step adds is the
//! caller's, so the seed's noise source (not the sampler) decides the picture.
//!
//! Arithmetic follows diffusers' order and precision: betas, cumulative alphas and sigmas in
//! float32 as torch computes them, the interpolation of sigmas at the chosen timesteps in float64
//! as numpy does, then float32.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    /// Euler (diffusers `EulerDiscreteScheduler`; A1111 "Euler").
    Euler,
    /// Euler ancestral (diffusers `EulerAncestralDiscreteScheduler`; A1111 "Euler a").
    EulerAncestral,
}

impl Sampler {
    pub fn parse(name: &str) -> Option<Sampler> {
        match name
            .trim()
            .to_ascii_lowercase()
            .replace(['_', '-'], " ")
            .as_str()
        {
            "euler" | "euler discrete" => Some(Sampler::Euler),
            "euler a" | "euler ancestral" | "euler ancestral discrete" => {
                Some(Sampler::EulerAncestral)
            }
            _ => None,
        }
    }

    /// The AUTOMATIC1111 name.
    pub fn a1111_name(self) -> &'static str {
        match self {
            Sampler::Euler => "Euler",
            Sampler::EulerAncestral => "Euler a",
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
    pub spacing: Spacing,
    pub steps_offset: usize,
    pub karras: bool,
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
            spacing: Spacing::Leading,
            steps_offset: 1,
            karras: false,
        }
    }
}

impl SchedulerConfig {
    pub fn from_json(v: &Value) -> Result<SchedulerConfig, DiffusionError> {
        let d = SchedulerConfig::default();
        let bad = |m: String| DiffusionError::Model(format!("scheduler_config.json: {m}"));
        let f = |k: &str, dv: f64| v.get(k).and_then(Value::as_f64).unwrap_or(dv);
        let u = |k: &str, dv: usize| v.get(k).and_then(Value::as_u64).map_or(dv, |x| x as usize);
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
        let spacing = match s("timestep_spacing").unwrap_or("leading") {
            "leading" => Spacing::Leading,
            "trailing" => Spacing::Trailing,
            "linspace" => Spacing::Linspace,
            other => return Err(bad(format!("timestep_spacing {other:?} is not supported"))),
        };
        let c = SchedulerConfig {
            num_train_timesteps: u("num_train_timesteps", d.num_train_timesteps),
            beta_start: f("beta_start", d.beta_start),
            beta_end: f("beta_end", d.beta_end),
            beta_schedule,
            prediction,
            spacing,
            steps_offset: u("steps_offset", 0),
            karras: v
                .get("use_karras_sigmas")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        let plausible = (2..=100_000).contains(&c.num_train_timesteps)
            && c.beta_start > 0.0
            && c.beta_end > c.beta_start
            && c.beta_end < 1.0;
        if !plausible {
            return Err(bad("implausible training schedule".into()));
        }
        Ok(c)
    }

    /// Training sigmas `sqrt((1 - ᾱ) / ᾱ)`, in float32 as torch computes them.
    fn train_sigmas(&self) -> Vec<f32> {
        let n = self.num_train_timesteps;
        let (a, b) = match self.beta_schedule {
            BetaSchedule::ScaledLinear => (self.beta_start.sqrt(), self.beta_end.sqrt()),
            BetaSchedule::Linear => (self.beta_start, self.beta_end),
        };
        let mut cum = 1f32;
        (0..n)
            .map(|i| {
                let x = linspace_at(a as f32, b as f32, n, i);
                let beta = match self.beta_schedule {
                    BetaSchedule::ScaledLinear => x * x,
                    BetaSchedule::Linear => x,
                };
                cum *= 1.0 - beta;
                ((1.0 - cum) / cum).sqrt()
            })
            .collect()
    }

    /// The timesteps and sigmas of an `n`-step run (diffusers `set_timesteps`).
    pub fn schedule(&self, n: usize) -> Result<Schedule, DiffusionError> {
        let t = self.num_train_timesteps;
        if n == 0 || n > t {
            return Err(DiffusionError::Invalid(format!(
                "steps must be between 1 and {t}"
            )));
        }
        let mut timesteps: Vec<f64> = match self.spacing {
            Spacing::Linspace => (0..n)
                .rev()
                .map(|i| {
                    if n == 1 {
                        0.0
                    } else {
                        (t - 1) as f64 * i as f64 / (n - 1) as f64
                    }
                })
                .collect(),
            Spacing::Leading => {
                let ratio = t / n;
                (0..n)
                    .rev()
                    .map(|i| (i * ratio + self.steps_offset) as f64)
                    .collect()
            }
            Spacing::Trailing => {
                let ratio = t as f64 / n as f64;
                // numpy arange(t, 0, -ratio): start + k * step, rounded half to even.
                (0..n)
                    .map(|k| (t as f64 - k as f64 * ratio).round_ties_even() as f32 as f64 - 1.0)
                    .collect()
            }
        };
        let train = self.train_sigmas();
        let mut sigmas: Vec<f64> = timesteps.iter().map(|&ts| interp(ts, &train)).collect();
        if self.karras {
            let log_sigmas: Vec<f64> = train.iter().map(|&s| f64::from(s).ln()).collect();
            let (min, max) = (sigmas[sigmas.len() - 1], sigmas[0]);
            let rho = 7.0;
            let (min_inv, max_inv) = (min.powf(1.0 / rho), max.powf(1.0 / rho));
            sigmas = (0..n)
                .map(|i| {
                    let ramp = if n == 1 {
                        0.0
                    } else {
                        i as f64 / (n - 1) as f64
                    };
                    (max_inv + ramp * (min_inv - max_inv)).powf(rho)
                })
                .collect();
            timesteps = sigmas.iter().map(|&s| sigma_to_t(s, &log_sigmas)).collect();
        }
        let mut sigmas: Vec<f32> = sigmas.into_iter().map(|s| s as f32).collect();
        sigmas.push(0.0);
        let max = sigmas.iter().copied().fold(0f32, f32::max);
        let init_noise_sigma = match self.spacing {
            Spacing::Linspace | Spacing::Trailing => max,
            Spacing::Leading => (max * max + 1.0).sqrt(),
        };
        Ok(Schedule {
            timesteps: timesteps.into_iter().map(|t| t as f32).collect(),
            sigmas,
            init_noise_sigma,
            prediction: self.prediction,
        })
    }
}

/// torch.linspace in float32: computed from the nearer end.
fn linspace_at(a: f32, b: f32, n: usize, i: usize) -> f32 {
    if n == 1 {
        return a;
    }
    let step = (b - a) / (n - 1) as f32;
    if i < n / 2 {
        a + step * i as f32
    } else {
        b - step * (n - 1 - i) as f32
    }
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
    let w = x - i as f64;
    let (a, b) = (f64::from(ys[i]), f64::from(ys[i + 1]));
    if w == 0.0 { a } else { a + (b - a) * w }
}

/// diffusers `_sigma_to_t`: the (fractional) training timestep of a sigma.
fn sigma_to_t(sigma: f64, log_sigmas: &[f64]) -> f64 {
    let ls = sigma.max(1e-10).ln();
    let n = log_sigmas.len();
    let count = log_sigmas.iter().filter(|&&l| ls - l >= 0.0).count();
    let low = count.saturating_sub(1).min(n - 2);
    let (lo, hi) = (log_sigmas[low], log_sigmas[low + 1]);
    let w = ((lo - ls) / (lo - hi)).clamp(0.0, 1.0);
    (1.0 - w) * low as f64 + w * (low + 1) as f64
}

/// One run's timesteps and sigmas (`sigmas` has a final 0).
#[derive(Debug, Clone)]
pub struct Schedule {
    pub timesteps: Vec<f32>,
    pub sigmas: Vec<f32>,
    pub init_noise_sigma: f32,
    pub prediction: Prediction,
}

impl Schedule {
    pub fn len(&self) -> usize {
        self.timesteps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.timesteps.is_empty()
    }

    /// `scale_model_input`: the UNet sees `sample / sqrt(σ² + 1)`.
    pub fn scale_input(&self, sample: &Tensor, i: usize) -> candle::Result<Tensor> {
        let s = self.sigmas[i];
        sample / f64::from((s * s + 1.0).sqrt())
    }

    fn denoised(&self, out: &Tensor, i: usize, sample: &Tensor) -> candle::Result<Tensor> {
        let s = self.sigmas[i];
        match self.prediction {
            Prediction::Epsilon => sample - (out * f64::from(s))?,
            Prediction::V => {
                let c_out = f64::from(-s / (s * s + 1.0).sqrt());
                let c_skip = f64::from(s * s + 1.0);
                (out * c_out)? + (sample / c_skip)?
            }
        }
    }

    /// One sampler step from `sample` at step `i`. Ancestral steps add `noise` (standard normal,
    /// the shape of `sample`), which the caller draws; `None` for deterministic samplers.
    pub fn step(
        &self,
        sampler: Sampler,
        out: &Tensor,
        i: usize,
        sample: &Tensor,
        noise: Option<&Tensor>,
    ) -> candle::Result<Tensor> {
        let sigma = self.sigmas[i];
        let next = self.sigmas[i + 1];
        let x0 = self.denoised(out, i, sample)?;
        let derivative = ((sample - &x0)? / f64::from(sigma))?;
        match sampler {
            Sampler::Euler => sample + (derivative * f64::from(next - sigma))?,
            Sampler::EulerAncestral => {
                let up = (next * next * (sigma * sigma - next * next) / (sigma * sigma)).sqrt();
                let down = (next * next - up * up).sqrt();
                let prev = (sample + (derivative * f64::from(down - sigma))?)?;
                match noise {
                    Some(n) => prev + (n * f64::from(up))?,
                    None => Err(candle::Error::Msg("an ancestral step needs noise".into())),
                }
            }
        }
    }

    /// `add_noise` for img2img: the clean latents noised to step `i`'s sigma.
    pub fn add_noise(&self, original: &Tensor, noise: &Tensor, i: usize) -> candle::Result<Tensor> {
        original + (noise * f64::from(self.sigmas[i]))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_and_trailing_timesteps_match_diffusers() {
        let c = SchedulerConfig::default();
        let s = c.schedule(4).unwrap();
        assert_eq!(s.timesteps, vec![751.0, 501.0, 251.0, 1.0]);
        let t = SchedulerConfig {
            spacing: Spacing::Trailing,
            ..c.clone()
        };
        assert_eq!(
            t.schedule(4).unwrap().timesteps,
            vec![999.0, 749.0, 499.0, 249.0]
        );
        assert_eq!(t.schedule(1).unwrap().timesteps, vec![999.0]);
        // SD-Turbo's one step: sigma ≈ 14.6 and the final 0.
        let one = t.schedule(1).unwrap();
        assert!((one.sigmas[0] - 14.6146).abs() < 1e-3, "{:?}", one.sigmas);
        assert_eq!(one.sigmas[1], 0.0);
    }

    #[test]
    fn samplers_by_name() {
        assert_eq!(Sampler::parse("Euler a"), Some(Sampler::EulerAncestral));
        assert_eq!(Sampler::parse("euler"), Some(Sampler::Euler));
        assert_eq!(Sampler::parse("ddim"), None);
    }
}
