//! Per-node random streams derived from `(seed, node id)`.
//!
//! Each node owns its stream, so the numbers a node draws depend only on the
//! root seed, its id and its own history, never on which shard or thread runs
//! it. The generator is xoshiro256++ seeded through SplitMix64, both fixed
//! here so results stay reproducible across versions of outside crates.

use crate::NodeId;

/// SplitMix64 step: a good 64-bit mixer, used to expand seeds.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++ stream of one node.
#[derive(Clone, Debug)]
pub struct NodeRng {
    s: [u64; 4],
}

impl NodeRng {
    /// The stream of `node` under the root `seed`.
    pub fn new(seed: u64, node: NodeId) -> NodeRng {
        let mut state = seed ^ (u64::from(node.0) + 1).wrapping_mul(0xD134_2543_DE82_EF95);
        // Mix once more so neighbouring ids give unrelated streams.
        let mut state = splitmix64(&mut state);
        let s = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        NodeRng { s }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `[0, n)` (Lemire's multiply-shift; the bias is
    /// below 2^-32 for any `n` under 2^32, far under simulation noise).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Exponentially distributed with the given mean.
    ///
    /// Marsaglia and Tsang's ziggurat: 99% of draws cost one random number,
    /// a table look-up and a multiply instead of a logarithm.
    #[inline]
    pub fn exponential(&mut self, mean: f64) -> f64 {
        let z = ziggurat();
        let bits = self.next_u64();
        let layer = (bits >> 56) as usize;
        let j = bits as u32;
        if j < z.k[layer] {
            return mean * f64::from(j) * z.w[layer];
        }
        mean * self.exponential_slow(z, layer, j)
    }

    #[cold]
    fn exponential_slow(&mut self, z: &Ziggurat, mut layer: usize, mut j: u32) -> f64 {
        loop {
            if layer == 0 {
                // The tail beyond the base strip is again exponential.
                return ZIGGURAT_R - (1.0 - self.next_f64()).ln();
            }
            let x = f64::from(j) * z.w[layer];
            let f_low = z.f[layer];
            let f_high = z.f[layer - 1];
            if f_low + self.next_f64() * (f_high - f_low) < (-x).exp() {
                return x;
            }
            let bits = self.next_u64();
            layer = (bits >> 56) as usize;
            j = bits as u32;
            if j < z.k[layer] {
                return f64::from(j) * z.w[layer];
            }
        }
    }
}

/// Right edge of the ziggurat's base layer for the unit exponential.
const ZIGGURAT_R: f64 = 7.697_117_470_131_487;
/// Area of each of the 256 layers.
const ZIGGURAT_V: f64 = 3.949_659_822_581_572e-3;

/// Tables of the exponential ziggurat (Marsaglia & Tsang, 2000).
struct Ziggurat {
    /// Acceptance thresholds on a 32-bit draw.
    k: [u32; 256],
    /// Scale from a 32-bit draw to x.
    w: [f64; 256],
    /// Density at each layer's right edge.
    f: [f64; 256],
}

fn ziggurat() -> &'static Ziggurat {
    static TABLES: std::sync::OnceLock<Ziggurat> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let m = 4_294_967_296.0_f64;
        let mut z = Ziggurat {
            k: [0; 256],
            w: [0.0; 256],
            f: [0.0; 256],
        };
        let mut d = ZIGGURAT_R;
        let mut t = d;
        let q = ZIGGURAT_V / (-d).exp();
        z.k[0] = ((d / q) * m) as u32;
        z.k[1] = 0;
        z.w[0] = q / m;
        z.w[255] = d / m;
        z.f[0] = 1.0;
        z.f[255] = (-d).exp();
        for i in (1..=254).rev() {
            d = -(ZIGGURAT_V / d + (-d).exp()).ln();
            z.k[i + 1] = ((d / t) * m) as u32;
            t = d;
            z.f[i] = (-d).exp();
            z.w[i] = d / m;
        }
        z
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_depend_on_seed_and_node_only() {
        let a: Vec<u64> = (0..4)
            .map(|_| NodeRng::new(1, NodeId(5)).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut x = NodeRng::new(1, NodeId(5));
        let mut y = NodeRng::new(1, NodeId(6));
        let mut z = NodeRng::new(2, NodeId(5));
        let (xs, ys, zs): (Vec<_>, Vec<_>, Vec<_>) = (0..8)
            .map(|_| (x.next_u64(), y.next_u64(), z.next_u64()))
            .fold((vec![], vec![], vec![]), |mut acc, (a, b, c)| {
                acc.0.push(a);
                acc.1.push(b);
                acc.2.push(c);
                acc
            });
        assert_ne!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn below_and_exponential_have_the_right_mean() {
        let mut rng = NodeRng::new(42, NodeId(0));
        let n = 200_000;
        let sum: u64 = (0..n).map(|_| rng.below(10)).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 4.5).abs() < 0.05, "mean of below(10) = {mean}");
        let draws: Vec<f64> = (0..n).map(|_| rng.exponential(3.0)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.05, "mean of exponential(3) = {mean}");
        // The tail must match too: P(X > 3 * mean) = e^-3.
        let tail = draws.iter().filter(|&&x| x > 9.0).count() as f64 / n as f64;
        assert!((tail - (-3.0f64).exp()).abs() < 0.003, "P(X > 9) = {tail}");
    }
}
