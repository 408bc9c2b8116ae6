//! Helpers shared by the engine's parity tests.
#![allow(clippy::unwrap_used, dead_code)]

use candle::{DType, Tensor};

/// Relative error of `got` against `want`: (RMS of the difference / RMS of `want`, max abs
/// difference / max |want|).
pub fn relative(got: &Tensor, want: &Tensor) -> (f64, f64) {
    let v = |t: &Tensor| -> Vec<f64> {
        t.to_dtype(DType::F64)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap()
    };
    let (g, w) = (v(got), v(want));
    assert_eq!(g.len(), w.len());
    let rms =
        |x: &mut dyn Iterator<Item = f64>| (x.map(|d| d * d).sum::<f64>() / w.len() as f64).sqrt();
    let err = rms(&mut g.iter().zip(&w).map(|(a, b)| a - b));
    let scale = rms(&mut w.iter().copied());
    let worst = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let largest = w.iter().map(|x| x.abs()).fold(0.0, f64::max);
    (err / scale, worst / largest)
}
