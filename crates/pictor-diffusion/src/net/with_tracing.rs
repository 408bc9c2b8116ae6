//! A convolution with a tracing span (as candle-transformers' `with_tracing`), so that
//! `RUST_LOG=trace` profiles show where a step spends its time.
use candle::{Module, Result, Tensor};
use candle_nn::VarBuilder;

#[derive(Debug, Clone)]
pub struct Conv2d {
    inner: super::conv::Conv2d,
    span: tracing::Span,
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        self.inner.forward(x)
    }
}

pub fn conv2d(
    in_channels: usize,
    out_channels: usize,
    kernel_size: usize,
    cfg: candle_nn::Conv2dConfig,
    vs: VarBuilder,
) -> Result<Conv2d> {
    let span = tracing::span!(tracing::Level::TRACE, "conv2d");
    let inner = super::conv::Conv2d::new(candle_nn::conv2d(
        in_channels,
        out_channels,
        kernel_size,
        cfg,
        vs,
    )?)?;
    Ok(Conv2d { inner, span })
}
