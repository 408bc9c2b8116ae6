//! Where a seed's noise comes from: the two sources the tools people share seeds from use.
//!
//! - [`TorchCpu`] (`torch-cpu`): PyTorch's CPU generator (`torch.Generator("cpu").manual_seed(seed)`)
//!   and `torch.randn` on float32 tensors as ATen computes them: for 16 or more elements
//!   `normal_fill` (mt19937 draws one 24-bit uniform per element, then each block of 16 becomes
//!   8 Box–Muller pairs; a tail that is not a multiple of 16 redraws the last 16), for fewer the
//!   scalar path (`at::normal_distribution<double>`, two 53-bit uniforms per pair, the second
//!   value cached on the generator for the next call). Drawing the initial latents and then each
//!   ancestral step's noise from one generator is what diffusers does with a CPU generator,
//!   ComfyUI with its default CPU noise and AUTOMATIC1111 with "RNG: CPU".
//! - [`Philox`] (`a1111-gpu`): what `torch.randn` gives on an NVIDIA GPU (Philox4x32-10 counters,
//!   one Box–Muller value per counter), which AUTOMATIC1111 draws by default ("RNG: GPU", or
//!   "RNG: NV" on any device). Every draw is a fresh counter offset: the initial latents take
//!   offset 0, each ancestral step the next.
//!
//! Float notes: PyTorch has two 16-wide fills. Its x86-64 builds run the AVX2 kernel on every
//! AVX2 CPU (AVX-512 ones too), with Cephes approximations of log, sin and cos ([`TorchFill::X86`],
//! the default here); older x86 CPUs and ARM run the portable kernel with libm's functions
//! ([`TorchFill::Portable`]). They differ in the last bit for about 38 % of values (≤ 1.8e-6).

pub use pictor_core::catalog::NoiseKind;

/// A fresh generator of `kind` for `seed`.
pub fn source(kind: NoiseKind, seed: u64) -> Box<dyn NoiseSource> {
    match kind {
        NoiseKind::TorchCpu => Box::new(TorchCpu::new(seed)),
        NoiseKind::A1111Gpu => Box::new(Philox::new(seed)),
    }
}

/// A source of standard-normal float32 noise.
pub trait NoiseSource: Send {
    /// `n` values, in the tensor's row-major order.
    fn randn(&mut self, n: usize) -> Vec<f32>;
}

/// PyTorch's mt19937 (`at::mt19937`): the standard 32-bit Mersenne Twister.
pub struct Mt19937 {
    state: [u32; 624],
    index: usize,
}

impl Mt19937 {
    /// `at::mt19937(seed)`: seeded with the low 32 bits of the seed.
    pub fn new(seed: u64) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = (seed & 0xffff_ffff) as u32;
        for j in 1..624 {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(j as u32);
        }
        Mt19937 { state, index: 624 }
    }

    fn twist(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        for i in 0..624 {
            let y = (self.state[i] & UPPER) | (self.state[(i + 1) % 624] & LOWER);
            let mut v = self.state[(i + 397) % 624] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= 0x9908_b0df;
            }
            self.state[i] = v;
        }
        self.index = 0;
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }
}

/// Which of ATen's kernels turns 16 uniforms into 16 normals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TorchFill {
    /// The AVX2 kernel (Cephes `log256_ps` / `sincos256_ps` from `avx_mathfun.h`, with the
    /// multiply-adds GCC fuses), which PyTorch runs on every x86-64 CPU with AVX2 — AVX-512
    /// CPUs included, whose dispatch slot falls back to it.
    X86,
    /// The portable kernel (`ATEN_CPU_CAPABILITY=default`, older x86 CPUs, ARM): libm's
    /// `logf`, `cosf`, `sinf` with the angle computed in double. Bit-identical where the libm
    /// is glibc's.
    Portable,
}

/// PyTorch CPU noise (see the module documentation).
pub struct TorchCpu {
    engine: Mt19937,
    fill: TorchFill,
    /// The second value of the scalar path's last Box–Muller pair, kept on the generator as
    /// ATen keeps it (`next_double_normal_sample`) for the next small draw.
    cached: Option<f64>,
}

impl TorchCpu {
    /// As PyTorch on an x86-64 PC (the AVX2 kernel).
    pub fn new(seed: u64) -> TorchCpu {
        TorchCpu::with_fill(seed, TorchFill::X86)
    }

    pub fn with_fill(seed: u64, fill: TorchFill) -> TorchCpu {
        TorchCpu {
            engine: Mt19937::new(seed),
            fill,
            cached: None,
        }
    }

    /// `at::uniform_real_distribution<float>(0, 1)`: the low 24 bits of one draw.
    fn uniform(&mut self) -> f32 {
        (self.engine.next_u32() & 0x00ff_ffff) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// `at::uniform_real_distribution<double>(0, 1)`: 53 bits of `random64()`, whose first
    /// draw is the high word.
    fn uniform_f64(&mut self) -> f64 {
        let hi = u64::from(self.engine.next_u32());
        let lo = u64::from(self.engine.next_u32());
        (((hi << 32) | lo) & ((1u64 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `at::normal_distribution<double>`: the cached value if any, else a new pair (theta from
    /// the first uniform, radius from the second), returning the cosine and caching the sine.
    fn normal_f64(&mut self) -> f64 {
        if let Some(v) = self.cached.take() {
            return v;
        }
        let u1 = self.uniform_f64();
        let u2 = self.uniform_f64();
        let r = (-2.0 * (-u2).ln_1p()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u1;
        self.cached = Some(r * theta.sin());
        r * theta.cos()
    }

    fn fill_16(&self, data: &mut [f32]) {
        for j in 0..8 {
            let u1 = 1.0 - data[j];
            let u2 = data[j + 8];
            let (c, s, radius) = match self.fill {
                TorchFill::X86 => {
                    let radius = (-2.0 * cephes::log(u1)).sqrt();
                    let (s, c) = cephes::sincos(6.283_185_5_f32 * u2);
                    (c, s, radius)
                }
                TorchFill::Portable => {
                    let radius = (-2.0 * u1.ln()).sqrt();
                    let theta = (2.0 * std::f64::consts::PI * f64::from(u2)) as f32;
                    (theta.cos(), theta.sin(), radius)
                }
            };
            // `fma(x, std = 1, mean = 0)`: x, except that -0 becomes +0.
            data[j] = radius * c + 0.0;
            data[j + 8] = radius * s + 0.0;
        }
    }
}

impl NoiseSource for TorchCpu {
    fn randn(&mut self, n: usize) -> Vec<f32> {
        if n < 16 {
            // ATen's scalar path for small (or non-contiguous) tensors.
            return (0..n).map(|_| self.normal_f64() as f32).collect();
        }
        let mut data: Vec<f32> = (0..n).map(|_| self.uniform()).collect();
        let mut i = 0;
        while i + 16 <= n {
            self.fill_16(&mut data[i..i + 16]);
            i += 16;
        }
        if !n.is_multiple_of(16) {
            // The tail: 16 fresh uniforms over the last 16 places, transformed again.
            let start = n - 16;
            for x in data[start..].iter_mut() {
                *x = self.uniform();
            }
            let mut tail = [0f32; 16];
            tail.copy_from_slice(&data[start..]);
            self.fill_16(&mut tail);
            data[start..].copy_from_slice(&tail);
        }
        data
    }
}

/// The Cephes single-precision log and sincos of `avx_mathfun.h` that ATen's AVX2 normal fill
/// calls, one lane at a time, with `mul_add` exactly where GCC fuses the vector code (PyTorch's
/// x86 wheels are built by GCC with FMA enabled; without the fusions about 1 value in 200
/// differs in the last bit). Only inputs the fill produces are handled: `log` of (0, 1] and
/// `sincos` of [0, 2π). The constants are `avx_mathfun.h`'s decimals, rounded to f32 as there.
#[allow(clippy::excessive_precision)]
mod cephes {
    pub fn log(x0: f32) -> f32 {
        let x = x0.max(f32::MIN_POSITIVE);
        let bits = x.to_bits();
        let exponent = (bits >> 23) as i32 - 0x7f;
        let mut x = f32::from_bits((bits & !0x7f80_0000) | 0.5f32.to_bits());
        let mut e = exponent as f32 + 1.0;
        let small = x < std::f32::consts::FRAC_1_SQRT_2;
        let tmp = if small { x } else { 0.0 };
        x -= 1.0;
        if small {
            e -= 1.0;
        }
        x += tmp;
        let z = x * x;
        let mut y = 7.037_683_629_2e-2_f32;
        for c in [
            -1.151_461_031_0e-1_f32,
            1.167_699_874_0e-1,
            -1.242_014_084_6e-1,
            1.424_932_278_7e-1,
            -1.666_805_766_5e-1,
            2.000_071_476_5e-1,
            -2.499_999_399_3e-1,
            3.333_333_117_4e-1,
        ] {
            y = y.mul_add(x, c);
        }
        y *= x;
        y = y.mul_add(z, e * -2.121_944_40e-4);
        y = (-z).mul_add(0.5, y);
        x += y;
        e.mul_add(0.693_359_375, x)
    }

    /// (sin, cos) of `t`.
    pub fn sincos(t: f32) -> (f32, f32) {
        let mut sign_sin = t.to_bits() & 0x8000_0000;
        let mut x = t.abs();
        let mut j = (x * 1.273_239_544_735_16_f32) as i32;
        j = (j + 1) & !1;
        let y = j as f32;
        let swap_sin = ((j & 4) as u32) << 29;
        let poly = j & 2 == 0;
        x = y.mul_add(-0.785_156_25, x);
        x = y.mul_add(-2.418_756_484_985_351_562_5e-4, x);
        x = y.mul_add(-3.774_894_977_445_941_08e-8, x);
        let sign_cos = ((!(j - 2) & 4) as u32) << 29;
        sign_sin ^= swap_sin;
        let z = x * x;
        let mut yc = 2.443_315_711_809_948e-5_f32;
        yc = yc.mul_add(z, -1.388_731_625_493_765e-3);
        yc = yc.mul_add(z, 4.166_664_568_298_827e-2);
        yc *= z;
        yc = yc.mul_add(z, -(z * 0.5));
        yc += 1.0;
        let mut ys = -1.951_529_589_1e-4_f32;
        ys = ys.mul_add(z, 8.332_160_873_6e-3);
        ys = ys.mul_add(z, -1.666_665_461_1e-1);
        ys *= z;
        ys = ys.mul_add(x, x);
        let (ysin2, ysin1) = if poly { (ys, 0.0) } else { (0.0, yc) };
        let (y2, y1) = (ys - ysin2, yc - ysin1);
        let sin = f32::from_bits((ysin1 + ysin2).to_bits() ^ sign_sin);
        let cos = f32::from_bits((y1 + y2).to_bits() ^ sign_cos);
        (sin, cos)
    }
}

/// NVIDIA-GPU noise as PyTorch's CUDA `randn` makes it and AUTOMATIC1111 emulates it on other
/// devices (`rng_philox.py`): element `i` of draw number `offset` is the first Box–Muller value of
/// Philox4x32-10 at counter `(offset, 0, i, 0)` under the key `(seed low, seed high)`.
pub struct Philox {
    key: [u32; 2],
    offset: u32,
}

impl Philox {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;

    pub fn new(seed: u64) -> Philox {
        Philox {
            key: [seed as u32, (seed >> 32) as u32],
            offset: 0,
        }
    }

    /// The four words of Philox4x32-10 for `counter`.
    pub fn block(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
        let (mut c, mut k) = (counter, key);
        for round in 0..10 {
            if round > 0 {
                k[0] = k[0].wrapping_add(Self::W0);
                k[1] = k[1].wrapping_add(Self::W1);
            }
            let p0 = u64::from(c[0]) * Self::M0;
            let p1 = u64::from(c[2]) * Self::M1;
            c = [
                (p1 >> 32) as u32 ^ c[1] ^ k[0],
                p1 as u32,
                (p0 >> 32) as u32 ^ c[3] ^ k[1],
                p0 as u32,
            ];
        }
        c
    }

    /// Box–Muller on two words, as the reference computes it: the scale factors are float32
    /// constants, everything else float64, the result rounded to float32.
    fn normal(x: u32, y: u32) -> f32 {
        let c1 = f64::from(2.328_306_4e-10_f32);
        let c2 = f64::from((2.328_306_4e-10_f64 * 6.283_185_5) as f32);
        let u = f64::from(x) * c1 + f64::from((2.328_306_4e-10_f32) / 2.0);
        let v = f64::from(y) * c2 + f64::from(((2.328_306_4e-10_f64 * 6.283_185_5) as f32) / 2.0);
        ((-2.0 * u.ln()).sqrt() * v.sin()) as f32
    }
}

impl NoiseSource for Philox {
    fn randn(&mut self, n: usize) -> Vec<f32> {
        let offset = self.offset;
        self.offset = self.offset.wrapping_add(1);
        (0..n)
            .map(|i| {
                let w = Self::block([offset, 0, i as u32, 0], self.key);
                Self::normal(w[0], w[1])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_the_standard_sequence() {
        // std::mt19937 with the default seed 5489: the 10000th output is 4123659995.
        let mut mt = Mt19937::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = mt.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn philox_matches_the_reference_for_seed_0() {
        // rng_philox.Generator(0).randn((12,)) as AUTOMATIC1111's numpy code computes it. (The
        // module's docstring prints what a real GPU gave, which differs in the 7th digit: CUDA
        // does the Box–Muller in float32 with fast intrinsics.)
        let v = Philox::new(0).randn(12);
        let expected = [
            -0.924_662_4,
            -0.425_343_96,
            -2.643_845_8,
            0.145_183_88,
            -0.120_866_51,
            -0.579_725_7,
            -0.622_851_3,
            -0.328_387_14,
            -1.074_542,
            -0.363_144_1,
            -1.671_050_4,
            2.265_505,
        ];
        assert_eq!(v, expected);
    }

    #[test]
    fn torch_randn_first_values_for_seed_0() {
        // torch.manual_seed(0); torch.randn(16): the values PyTorch prints for this seed.
        let v = TorchCpu::new(0).randn(16);
        let expected = [
            -1.1258, -1.1524, -0.2506, -0.4339, 0.8487, 0.6920, -0.3160, -2.1152, 0.3223, -1.2633,
            0.3500, 0.3081, 0.1198, 1.2377, 1.1168, -0.2473,
        ];
        for (a, b) in v.iter().zip(expected) {
            assert!((a - b).abs() < 1e-4, "{v:?}");
        }
    }
}
