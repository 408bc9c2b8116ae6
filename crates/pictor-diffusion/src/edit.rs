//! Edits with a model: instruction editing (InstructPix2Pix) and masked edits (an inpainting
//! UNet, or masked img2img on a plain one), each as diffusers' pipeline computes it.

use candle::{DType, Tensor};

use super::noise::NoiseSource;
use super::{
    Blend, Denoise, DiffusionError, Guide, Pipeline, Request, StepControl, UnetKind, to_rgb8,
};

/// A mask as the engine takes it: one byte a pixel of the picture, 128 and above = change
/// (diffusers binarizes `value / 255` at 0.5).
pub fn mask_bit(v: u8) -> bool {
    v >= 128
}

impl Pipeline {
    /// Instruction editing (diffusers `StableDiffusionInstructPix2PixPipeline`): `image` is RGB8
    /// of `req.width`×`req.height`, `req.prompt` the instruction. With `req.guidance` > 1 and
    /// `image_guidance` ≥ 1 three evaluations a step: how much to follow the words, and how
    /// closely to keep the picture.
    pub fn instruct(
        &self,
        req: &Request,
        image: &[u8],
        image_guidance: f64,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Vec<u8>, DiffusionError> {
        let latents = self.instruct_latents(req, image, image_guidance, noise, control)?;
        to_rgb8(&self.decode_raw(&latents)?)
    }

    /// [`Pipeline::instruct`] up to the final latents.
    pub fn instruct_latents(
        &self,
        req: &Request,
        image: &[u8],
        image_guidance: f64,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        self.check(req)?;
        if self.unet_kind() != UnetKind::Instruct {
            return Err(DiffusionError::Invalid(
                "this model does not take instructions (it is not an InstructPix2Pix model)".into(),
            ));
        }
        if !image_guidance.is_finite() || image_guidance < 0.0 {
            return Err(DiffusionError::Invalid(
                "the image guidance must be a number ≥ 0".into(),
            ));
        }
        let pixels = self.pixels(image, req.width, req.height)?;
        let guided = req.guidance > 1.0 && image_guidance >= 1.0;
        let cond = self.encode_text(&req.prompt, &req.negative_prompt, guided)?;
        let schedule = self.schedule(req)?;
        // The source's latents are the posterior's mode, unscaled (diffusers'
        // `retrieve_latents(..., sample_mode="argmax")`): no noise is drawn for them.
        let source = self.vae().encode(&pixels)?.mean().clone();
        let shape = self.latent_shape(req.width, req.height);
        let latents = (self.randn(noise, &shape)? * f64::from(schedule.init_noise_sigma))?;
        let guide = Guide::Instruct {
            image: source,
            image_guidance,
        };
        let run = Denoise {
            cond: &cond,
            schedule: &schedule,
            start: 0,
            guidance: req.guidance,
            guide: &guide,
            blend: None,
            size: (req.height, req.width),
        };
        self.denoise_with(&run, latents, noise, control)
    }

    /// A masked edit (diffusers `StableDiffusionInpaintPipeline`): `mask` is one byte a pixel
    /// ([`mask_bit`]); an inpainting UNet sees the mask and the masked picture, a plain one is
    /// kept to the source outside the mask after every step. `strength` in (0, 1] as for img2img
    /// (1: the masked area is drawn from pure noise).
    pub fn inpaint(
        &self,
        req: &Request,
        image: &[u8],
        mask: &[u8],
        strength: f64,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Vec<u8>, DiffusionError> {
        let latents = self.inpaint_latents(req, image, mask, strength, noise, control)?;
        to_rgb8(&self.decode_raw(&latents)?)
    }

    /// [`Pipeline::inpaint`] up to the final latents.
    pub fn inpaint_latents(
        &self,
        req: &Request,
        image: &[u8],
        mask: &[u8],
        strength: f64,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        self.check(req)?;
        let kind = self.unet_kind();
        if kind == UnetKind::Instruct {
            return Err(DiffusionError::Invalid(
                "an instruction-editing model cannot repaint a masked area".into(),
            ));
        }
        let (w, h) = (req.width, req.height);
        if mask.len() != w * h {
            return Err(DiffusionError::Invalid(
                "the mask has the wrong size".into(),
            ));
        }
        if !(strength > 0.0 && strength <= 1.0) {
            return Err(DiffusionError::Invalid(
                "the edit strength must be in (0, 1]".into(),
            ));
        }
        let pixels = self.pixels(image, w, h)?;
        let guided = req.guidance > 1.0;
        let cond = self.encode_text(&req.prompt, &req.negative_prompt, guided)?;
        let schedule = self.schedule(req)?;
        let init = ((req.steps as f64 * strength) as usize).min(req.steps);
        if init == 0 {
            return Err(DiffusionError::Invalid(
                "the edit strength leaves no step to run".into(),
            ));
        }
        let begin = schedule.begin(req.steps - init);
        let full = strength == 1.0;
        let device = pixels.device().clone();

        // The draws in diffusers' order: the source's posterior sample (a plain UNet, or a
        // partial strength), the initial noise, the masked picture's posterior sample.
        let clean = if kind == UnetKind::Text || !full {
            Some(self.encode_image(&pixels, noise)?)
        } else {
            None
        };
        let shape = self.latent_shape(w, h);
        let eps = self.randn(noise, &shape)?;
        let latents = match &clean {
            Some(clean) if !full => schedule.add_noise(clean, &eps, begin)?,
            _ => (&eps * f64::from(schedule.init_noise_sigma))?,
        };
        let bits: Vec<f32> = mask
            .iter()
            .map(|&v| if mask_bit(v) { 1.0 } else { 0.0 })
            .collect();
        let keep = Tensor::from_vec(
            bits.iter().map(|b| 1.0 - b).collect::<Vec<f32>>(),
            (1, 1, h, w),
            &device,
        )?;
        let masked = pixels.broadcast_mul(&keep)?;
        let masked_latents = self.encode_image(&masked, noise)?;
        // torch's `interpolate(mode="nearest")` to the latent size: the pixel at 8·(row, col).
        let (lh, lw) = (shape[2], shape[3]);
        let scale_h = h as f64 / lh as f64;
        let scale_w = w as f64 / lw as f64;
        let mut small = Vec::with_capacity(lh * lw);
        for y in 0..lh {
            let sy = ((y as f64 * scale_h) as usize).min(h - 1);
            for x in 0..lw {
                let sx = ((x as f64 * scale_w) as usize).min(w - 1);
                small.push(bits[sy * w + sx]);
            }
        }
        let mask_latent = Tensor::from_vec(small, (1, 1, lh, lw), &device)?.to_dtype(DType::F32)?;

        let (guide, blend) = if kind == UnetKind::Inpaint {
            let extra = Tensor::cat(&[&mask_latent, &masked_latents], 1)?;
            (Guide::Concat(extra), None)
        } else {
            // (A plain UNet draws the masked picture's sample too, unused, as diffusers does:
            // the ancestral steps' noise then comes from the same place in the stream.)
            let clean = clean.ok_or_else(|| {
                DiffusionError::Model("a plain UNet needs the source's latents".into())
            })?;
            let blend = Blend {
                mask: mask_latent,
                clean,
                noise: eps,
            };
            (Guide::Plain, Some(blend))
        };
        let run = Denoise {
            cond: &cond,
            schedule: &schedule,
            start: begin,
            guidance: req.guidance,
            guide: &guide,
            blend: blend.as_ref(),
            size: (h, w),
        };
        self.denoise_with(&run, latents, noise, control)
    }
}
