//! Where a seed's noise comes from.
//!
//! [`TorchCpu`] is PyTorch's CPU generator (`torch.Generator("cpu").manual_seed(seed)`) and
//! `torch.randn` on float32 tensors as ATen computes them without AVX2 (`normal_fill` in
//! `native/cpu/DistributionTemplates.h`): mt19937 draws one 24-bit uniform per element, then each
//! block of 16 becomes 8 Box–Muller pairs; a tail that is not a multiple of 16 redraws the last 16.
//! Drawing the initial latents and then each ancestral step's noise from one generator is what
//! diffusers does with a CPU generator (and ComfyUI with its default CPU noise), so a seed gives
//! the same starting noise as those tools. (PyTorch builds with AVX2 compute the sines and cosines
//! with vector approximations and can differ in the last bits; the float tolerance covers that.)

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

/// PyTorch CPU noise (see the module documentation).
pub struct TorchCpu {
    engine: Mt19937,
}

impl TorchCpu {
    pub fn new(seed: u64) -> TorchCpu {
        TorchCpu {
            engine: Mt19937::new(seed),
        }
    }

    /// `at::uniform_real_distribution<float>(0, 1)`: 24 random bits.
    fn uniform(&mut self) -> f32 {
        ((self.engine.next_u32() & 0x00ff_ffff) as f64 / (1u64 << 24) as f64) as f32
    }

    fn fill_16(data: &mut [f32]) {
        for j in 0..8 {
            let u1 = 1.0 - data[j];
            let u2 = data[j + 8];
            let radius = (-2.0 * u1.ln()).sqrt();
            let theta = (2.0 * std::f64::consts::PI * f64::from(u2)) as f32;
            data[j] = radius * theta.cos();
            data[j + 8] = radius * theta.sin();
        }
    }
}

impl NoiseSource for TorchCpu {
    fn randn(&mut self, n: usize) -> Vec<f32> {
        if n < 16 {
            // ATen's scalar path (double Box–Muller with a cached second value) is not needed
            // for latents, which always have at least 16 elements; draw a block and cut it.
            let mut v = self.randn(16);
            v.truncate(n);
            return v;
        }
        let mut data: Vec<f32> = (0..n).map(|_| self.uniform()).collect();
        let mut i = 0;
        while i + 16 <= n {
            Self::fill_16(&mut data[i..i + 16]);
            i += 16;
        }
        if !n.is_multiple_of(16) {
            let tail = &mut data[n - 16..];
            for x in tail.iter_mut() {
                *x = self.uniform();
            }
            Self::fill_16(tail);
        }
        data
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
