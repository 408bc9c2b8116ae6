//! Arithmetic the compiler vectorises: `exp`, `erf` and the exact GELU without branches or libm
//! calls, and sums in
//! independent lanes (a single running sum is a chain of dependent additions and stays scalar).

/// Whether the CPU has AVX2 and FMA (the packed linear layers' kernel needs them).
#[inline]
pub fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX-512 (F, with AVX2 and FMA): sixteen float32 lanes per vector.
#[inline]
pub fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2_fma() && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `fn $name(args)` that runs `$body(args)` (an `#[inline(always)]` function of loops the
/// compiler vectorises) compiled for the widest vectors the CPU has: AVX-512's sixteen lanes,
/// else AVX2's eight, else the x86-64 baseline's four (the crate is built for the baseline).
/// Element-wise results are the same at every width (no contraction to FMA happens without
/// being written, and the reductions' lanes are [`LANES`] at every width); only the speed
/// changes.
macro_rules! widest_simd {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $body:path) => {
        $crate::net::fast_math::widest_simd! {
            $(#[$meta])* $vis fn $name($($arg: $ty),*) -> () => $body
        }
    };
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $body:path) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn wide_512($($arg: $ty),*) -> $ret {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn wide_256($($arg: $ty),*) -> $ret {
                    $body($($arg),*)
                }
                if $crate::net::fast_math::avx512() {
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA.
                    return unsafe { wide_512($($arg),*) };
                }
                if $crate::net::fast_math::avx2_fma() {
                    // SAFETY: the CPU has AVX2 and FMA.
                    return unsafe { wide_256($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use widest_simd;

/// Lanes of the reductions: partial sums kept in vector registers.
pub const LANES: usize = 16;

/// Elements summed in float32 lanes before the block's total joins a float64 sum.
pub const SUM_BLOCK: usize = 4096;

/// `Σ f(x)` over `xs` in float64: float32 lanes within blocks of [`SUM_BLOCK`] elements, the
/// blocks' totals in float64 (error about that of a pairwise sum).
#[inline(always)]
pub fn sum_f64(xs: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    let mut total = 0f64;
    for block in xs.chunks(SUM_BLOCK) {
        let mut lanes = [0f32; LANES];
        let mut chunks = block.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (s, &x) in lanes.iter_mut().zip(chunk) {
                *s += f(x);
            }
        }
        let rest: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
        total += lanes.iter().map(|&s| f64::from(s)).sum::<f64>() + f64::from(rest);
    }
    total
}

/// `eˣ` in float32 to about 1 ulp (Cephes' `expf`: `x = n·ln 2 + r` with `|r| ≤ ½ ln 2`, a
/// degree-5 polynomial for `eʳ`, and `2ⁿ` made in the exponent bits), branch-free and with
/// integer arithmetic only on bits so loops over it vectorise. Inputs are clamped to
/// `[−87, 88]` (below, the result is at most 1.6e−38; above, 1.65e38 instead of infinity);
/// NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2²³: adding it rounds to the nearest integer n (|n| < 2²²), which then sits in the
    // low bits of the sum's mantissa: bits(sum) = bits(ROUND) + n.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let rounded = x * LOG2E + ROUND;
    let n = rounded - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_2e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    let n_bits = rounded.to_bits().wrapping_sub(ROUND.to_bits());
    e * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// `erf(x)` in float32 within a few ulps: the rational approximation Eigen and XLA use
/// (`x·P(x²)/Q(x²)` on `x` clamped to `[−4, 4]`, beyond which erf is ±1 in float32),
/// branch-free. NaN stays NaN.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_6e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// The exact GELU, `x · Φ(x) = ½ x (1 + erf(x / √2))`, as torch's `gelu` (approximate="none").
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// GELU's tanh approximation, `½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, as torch's
/// `gelu(approximate="tanh")` (FLUX's and SD 3's MLPs), with `tanh(u) = 1 − 2 / (e^{2u} + 1)`
/// on [`exp`]: within about 1e-7 of `tanh` in absolute terms (near 0 the form loses the
/// relative precision, never the absolute), branch-free so loops over it vectorise.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const K: f32 = 0.797_884_6; // √(2/π)
    let u = K * (x + 0.044_715 * x * x * x);
    let t = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
    0.5 * x * (1.0 + t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_tanh_matches_the_formula_with_libm_tanh() {
        let want = |x: f32| {
            let x = f64::from(x);
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + u.tanh())
        };
        let mut x = -60.0f32;
        while x < 60.0 {
            let (w, g) = (want(x), f64::from(gelu_tanh(x)));
            assert!(
                (g - w).abs() <= 4e-7 * w.abs().max(1.0),
                "{x}: {g} against {w}"
            );
            x += 0.0071;
        }
        assert!(gelu_tanh(f32::NAN).is_nan());
        assert_eq!(gelu_tanh(0.0), 0.0);
    }

    #[test]
    fn exp_is_within_two_ulps_of_libm() {
        let mut worst = 0f32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (want, got) = (x.exp(), exp(x));
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 2.5e-7, "relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
        assert!(exp(f32::NAN).is_nan());
        // SiLU's use: y / (1 + e^{−y}) for large |y| stays finite and right.
        let silu = |y: f32| y / (1.0 + exp(-y));
        assert_eq!(silu(200.0), 200.0);
        assert!(silu(-200.0).abs() < 1e-30);
    }

    #[test]
    fn erf_and_gelu_are_within_float32_noise() {
        let mut worst_erf = 0f64;
        let mut worst_gelu = 0f64;
        let mut x = -12.0f32;
        while x < 12.0 {
            let xd = f64::from(x);
            let want = libm::erf(xd);
            worst_erf = worst_erf.max((f64::from(erf(x)) - want).abs());
            // The float32 formula torch and candle evaluate (libm's erff): the same cancellation
            // in 1 + erf for negative x, so the difference is erf's, scaled by |x|.
            let gelu = 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2));
            worst_gelu = worst_gelu.max(f64::from((gelu_erf(x) - gelu).abs() / x.abs().max(1.0)));
            x += 0.000_37;
        }
        assert!(worst_erf < 5e-7, "erf error {worst_erf}"); // 4 ulps of 1.0
        assert!(worst_gelu < 5e-7, "gelu error {worst_gelu}");
        assert!(erf(f32::NAN).is_nan());
        assert_eq!(gelu_erf(0.0), 0.0);
    }

    #[test]
    fn sums_match_float64() {
        let xs: Vec<f32> = (0..100_003)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.001 + 1e3)
            .collect();
        let want: f64 = xs.iter().map(|&x| f64::from(x)).sum();
        let got = sum_f64(&xs, |x| x);
        assert!(((got - want) / want).abs() < 1e-7, "{got} vs {want}");
        assert_eq!(sum_f64(&[], |x| x), 0.0);
        assert_eq!(sum_f64(&[2.0; 5], |x| x * x), 20.0);
    }
}
