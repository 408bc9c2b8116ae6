//! Fault injection for tests and benchmarks of the real binary: wraps a renderer so that renders
//! can be slowed down or made to fail. Enabled only by the `PICTOR_DEBUG_*` environment variables
//! (see README, "Testing hooks"); never active otherwise.

use std::sync::Arc;
use std::time::Duration;

use super::{EditSpec, GenerateSpec, Picture, RenderControl, RenderError, Renderer};

pub struct FaultInjector {
    pub inner: Arc<dyn Renderer>,
    /// Sleep this long before every render (simulates a slow model).
    pub delay: Duration,
    /// Fail every render whose prompt contains this text.
    pub fail_marker: Option<String>,
}

impl FaultInjector {
    fn check(&self, prompt: &str) -> Result<(), RenderError> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        match &self.fail_marker {
            Some(m) if !m.is_empty() && prompt.contains(m.as_str()) => {
                Err(RenderError::Failed("injected failure".into()))
            }
            _ => Ok(()),
        }
    }
}

impl FaultInjector {
    /// [`FaultInjector::check`] for a controlled render: the delay passes in ten steps, each
    /// reported as progress (up to one half) and each a checkpoint where a cancel stops it, like
    /// a model's denoising loop.
    fn check_controlled(&self, prompt: &str, control: &RenderControl) -> Result<(), RenderError> {
        const STEPS: u32 = 10;
        if !self.delay.is_zero() {
            for step in 1..=STEPS {
                if control.is_cancelled() {
                    return Err(RenderError::Cancelled);
                }
                std::thread::sleep(self.delay / STEPS);
                control.set_progress(0.5 * f64::from(step) / f64::from(STEPS));
            }
        }
        match &self.fail_marker {
            Some(m) if !m.is_empty() && prompt.contains(m.as_str()) => {
                Err(RenderError::Failed("injected failure".into()))
            }
            _ => Ok(()),
        }
    }
}

impl Renderer for FaultInjector {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        self.check(&spec.prompt)?;
        self.inner.generate(spec)
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.check(&spec.instruction)?;
        self.inner.edit(spec)
    }

    fn engine(&self, model: crate::render::Model) -> String {
        self.inner.engine(model)
    }

    fn is_local(&self, model: crate::render::Model) -> bool {
        self.inner.is_local(model)
    }

    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        self.inner.exact_edit(instruction)
    }

    fn apply_exact(
        &self,
        picture: Picture,
        instruction: &str,
        seed: u64,
    ) -> Result<(Picture, Vec<String>), RenderError> {
        self.inner.apply_exact(picture, instruction, seed)
    }

    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        self.check_controlled(&spec.prompt, control)?;
        self.inner.generate_with(spec, control)
    }

    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        self.check_controlled(&spec.instruction, control)?;
        self.inner.edit_with(spec, control)
    }
}

/// Draws generations as a flat colour of the exact size (edits go to `inner`): the job machinery
/// at full speed for soak and load tests of the real binary (`PICTOR_DEBUG_FLAT_RENDER=1`).
pub struct FlatRenderer {
    pub inner: Arc<dyn Renderer>,
}

impl Renderer for FlatRenderer {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        let (w, h) = spec.model.dimensions(spec.ratio.resolve_auto(&spec.prompt));
        let c = spec.seed.to_le_bytes();
        Ok(Picture(image::RgbaImage::from_pixel(
            w,
            h,
            image::Rgba([c[0], c[1], c[2], 255]),
        )))
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.inner.edit(spec)
    }

    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        self.inner.edit_with(spec, control)
    }

    fn engine(&self, model: crate::render::Model) -> String {
        self.inner.engine(model)
    }

    fn is_local(&self, model: crate::render::Model) -> bool {
        self.inner.is_local(model)
    }

    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        self.inner.exact_edit(instruction)
    }

    fn apply_exact(
        &self,
        picture: Picture,
        instruction: &str,
        seed: u64,
    ) -> Result<(Picture, Vec<String>), RenderError> {
        self.inner.apply_exact(picture, instruction, seed)
    }
}
