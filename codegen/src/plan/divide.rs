//! Division of a 32-bit register by a constant without a division instruction: ptxas divides by a
//! constant through a reciprocal it computes at run time (`I2F`, `MUFU.RCP`, `F2I` and
//! fix-ups), about ten dependent instructions on the path to a persistent kernel's first copy.

use serde::Serialize;

/// `q = x / divisor` for every 32-bit `x`, the round-up method of Granlund and Montgomery:
/// `t = mul.hi(x, magic)`, `q = (t + ((x - t) >> 1)) >> shift`, where
/// `l = ceil(log2(divisor))`, `magic = floor(2^32 (2^l - divisor) / divisor) + 1` and
/// `shift = l - 1` (the `divide` macro of `templates/common/schedule.ptx.tera`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ConstDivisor {
    pub divisor: u32,
    pub magic: u32,
    pub shift: u32,
    /// A power of two's exponent: the division is one shift (the templates write it so).
    pub log2: Option<u32>,
}

impl ConstDivisor {
    /// The multiplier and shift of `divisor`, which must be at least 2.
    pub fn new(divisor: u32) -> ConstDivisor {
        assert!(divisor >= 2, "a divisor of at least 2, not {divisor}");
        let l = 32 - (divisor - 1).leading_zeros();
        let magic =
            (((1u64 << 32) * ((1u64 << l) - u64::from(divisor))) / u64::from(divisor) + 1) as u32;
        ConstDivisor {
            divisor,
            magic,
            shift: l - 1,
            log2: divisor.is_power_of_two().then_some(l),
        }
    }

    /// What the emitted instructions compute.
    pub fn divide(self, x: u32) -> u32 {
        if let Some(log2) = self.log2 {
            return x >> log2;
        }
        let t = ((u64::from(x) * u64::from(self.magic)) >> 32) as u32;
        (t + ((x - t) >> 1)) >> self.shift
    }
}

#[cfg(test)]
mod tests {
    use super::ConstDivisor;

    #[test]
    fn multiplications_divide_every_32_bit_value() {
        // Tile sizes, stage counts and some odd divisors; the values where a quotient steps,
        // the ends of the range and a spread of others.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for divisor in (2..=1024).chain([4095, 65_537, 1 << 20, u32::MAX / 3, u32::MAX]) {
            let by = ConstDivisor::new(divisor);
            let mut values = vec![0, 1, u32::MAX, u32::MAX - 1, 1 << 31];
            for q in [1u64, 2, 3, 1000, u64::from(u32::MAX / divisor)] {
                let x = q * u64::from(divisor);
                values.extend(
                    [x - 1, x, x + 1]
                        .into_iter()
                        .filter_map(|v| u32::try_from(v).ok()),
                );
            }
            for _ in 0..2000 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                values.push(state as u32);
            }
            for x in values {
                assert_eq!(by.divide(x), x / divisor, "{x} / {divisor}");
                // The multiplications hold for powers of two too (magic 1).
                let t = ((u64::from(x) * u64::from(by.magic)) >> 32) as u32;
                assert_eq!(
                    (t + ((x - t) >> 1)) >> by.shift,
                    x / divisor,
                    "{x} / {divisor}"
                );
            }
        }
    }
}
