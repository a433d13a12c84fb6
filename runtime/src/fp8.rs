//! The two OCP 8-bit float formats (OCP 8-bit Floating Point Specification (OFP8) rev 1.0),
//! the operand types of the Hopper fp8 wgmma kernels.
//!
//! - [`E4m3`]: 4 exponent bits (bias 7), 3 mantissa bits. No infinities: the top binade holds
//!   finite values up to 448 (`S.1111.110`), and `S.1111.111` is the only NaN.
//! - [`E5m2`]: 5 exponent bits (bias 15), 2 mantissa bits, laid out like IEEE 754: infinities
//!   `S.11111.00`, NaNs `S.11111.{01,10,11}`, largest finite 57344.
//!
//! Both have subnormals and signed zeros. [`E4m3::from_f32`] and [`E5m2::from_f32`] round to
//! nearest even and saturate, as PTX's `cvt.rn.satfinite.e4m3x2.f32` / `.e5m2x2` do, so
//! host-side quantization matches a device-side one.
//!
//! Per-tensor scaling follows cuBLASLt: [`quantize_e4m3`] / [`quantize_e5m2`] store
//! `v / scale`, and the scale handed to the GEMM is the dequantization scale,
//! `D = scale_a * scale_b * (A_q · B_q)`; [`amax_scale`] picks the usual scale.

use std::fmt;

/// An OCP FP8 E4M3 value (bias 7, no infinities, one NaN per sign, largest finite 448).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct E4m3(u8);

/// An OCP FP8 E5M2 value (bias 15, IEEE-like infinities and NaNs, largest finite 57344).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct E5m2(u8);

/// The layout of one format; the codec below is shared by both.
struct Format {
    mantissa_bits: u32,
    bias: i32,
    /// The magnitude bits of the largest finite value.
    max_bits: u8,
    /// Whether an all-ones exponent field means infinity / NaN (E5M2) rather than holding
    /// finite values with only the all-ones mantissa NaN (E4M3).
    ieee_specials: bool,
}

const E4M3_FORMAT: Format = Format {
    mantissa_bits: 3,
    bias: 7,
    max_bits: 0x7E,
    ieee_specials: false,
};

const E5M2_FORMAT: Format = Format {
    mantissa_bits: 2,
    bias: 15,
    max_bits: 0x7B,
    ieee_specials: true,
};

const SIGN: u8 = 0x80;
const CANONICAL_NAN: u8 = 0x7F;

impl Format {
    fn is_nan(&self, bits: u8) -> bool {
        let magnitude = bits & !SIGN;
        if self.ieee_specials {
            magnitude > self.infinity_bits()
        } else {
            magnitude == CANONICAL_NAN
        }
    }

    const fn infinity_bits(&self) -> u8 {
        self.max_bits + 1
    }

    fn decode(&self, bits: u8) -> f32 {
        if self.is_nan(bits) {
            return f32::NAN;
        }
        let negative = bits & SIGN != 0;
        let magnitude = u32::from(bits & !SIGN);
        let m = self.mantissa_bits;
        let exponent = (magnitude >> m) as i32;
        let mantissa = magnitude & ((1 << m) - 1);
        let value = if self.ieee_specials && magnitude == u32::from(self.infinity_bits()) {
            f32::INFINITY
        } else if exponent == 0 {
            // Subnormal: mantissa units of 2^(1 - bias - m), exact in f32 (a small integer
            // times a power of two).
            mantissa as f32 * pow2(1 - self.bias - m as i32)
        } else {
            // Normal: re-bias the exponent and widen the mantissa into f32's fields.
            let f32_exponent = (exponent - self.bias + 127) as u32;
            f32::from_bits(f32_exponent << 23 | mantissa << (23 - m))
        };
        if negative {
            -value
        } else {
            value
        }
    }

    fn encode(&self, value: f32) -> u8 {
        if value.is_nan() {
            return CANONICAL_NAN;
        }
        let bits = value.to_bits();
        let sign = if bits >> 31 != 0 { SIGN } else { 0 };
        let abs = bits & 0x7FFF_FFFF;
        let m = self.mantissa_bits;
        // f32 subnormals (biased exponent 0) are far below half the smallest fp8 subnormal,
        // so treating them as normals with a wrong exponent still rounds them to zero.
        let exponent = (abs >> 23) as i32 - 127;
        let significand = abs & 0x007F_FFFF | 0x0080_0000;

        let min_normal_exponent = 1 - self.bias;
        // A magnitude one past the largest exponent field is already beyond any finite value;
        // stopping here also keeps f32 infinities and huge exponents out of the shifts below.
        let max_field = (1 << (7 - m)) - 1;
        let magnitude = if exponent + self.bias > max_field {
            return sign | self.max_bits;
        } else if exponent >= min_normal_exponent {
            // Normal: keep the top m fraction bits above the exponent field. A carry out of
            // the mantissa when rounding up increments the exponent field, which is exactly
            // the next binade.
            let field = ((exponent + self.bias) as u32) << m;
            field + round_shift(abs & 0x007F_FFFF, 23 - m)
        } else {
            // Subnormal: the significand (value = significand * 2^(exponent - 23)) in units of
            // 2^(1 - bias - m). A result of 1 << m is the smallest normal's encoding, so
            // rounding up out of the subnormals needs no special case.
            let shift = (min_normal_exponent - exponent) as u32 + 23 - m;
            if shift > 24 {
                // Under half the smallest subnormal: the significand is below 2^24, so
                // below half of 2^shift.
                return sign;
            }
            round_shift(significand, shift)
        };
        // Rounding past the largest finite value (into E5M2's infinity or E4M3's NaN)
        // saturates, as `cvt.rn.satfinite` does.
        sign | magnitude.min(u32::from(self.max_bits)) as u8
    }
}

/// `x / 2^shift` rounded to nearest, ties to even; `1 <= shift <= 31`.
fn round_shift(x: u32, shift: u32) -> u32 {
    let quotient = x >> shift;
    let remainder = x & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    if remainder > half || (remainder == half && quotient & 1 == 1) {
        quotient + 1
    } else {
        quotient
    }
}

/// 2^e for e in f32's normal exponent range.
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

impl E4m3 {
    /// Largest finite value, 448 (`0.1111.110`).
    pub const MAX: Self = Self(0x7E);
    /// Smallest positive normal value, 2^-6 (`0.0001.000`).
    pub const MIN_POSITIVE: Self = Self(0x08);
    /// Smallest positive subnormal value, 2^-9 (`0.0000.001`).
    pub const MIN_POSITIVE_SUBNORMAL: Self = Self(0x01);
    /// The NaN conversions produce (`0.1111.111`; `1.1111.111` is the other NaN).
    pub const NAN: Self = Self(CANONICAL_NAN);
    /// Positive zero.
    pub const ZERO: Self = Self(0);

    /// The value with this bit pattern.
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u8 {
        self.0
    }

    /// Exact widening; NaN becomes an f32 NaN.
    pub fn to_f32(self) -> f32 {
        E4M3_FORMAT.decode(self.0)
    }

    /// Whether this is one of the two NaN patterns.
    pub fn is_nan(self) -> bool {
        E4M3_FORMAT.is_nan(self.0)
    }

    /// Rounds to nearest, ties to even, saturating: finite values and infinities beyond the
    /// range become ±[`MAX`](Self::MAX) (as PTX `cvt.rn.satfinite.e4m3x2.f32`), NaN becomes
    /// [`NAN`](Self::NAN), and magnitudes up to half the smallest subnormal become a zero of
    /// the same sign.
    pub fn from_f32(value: f32) -> Self {
        Self(E4M3_FORMAT.encode(value))
    }
}

impl E5m2 {
    /// Largest finite value, 57344 (`0.11110.11`).
    pub const MAX: Self = Self(0x7B);
    /// Smallest positive normal value, 2^-14 (`0.00001.00`).
    pub const MIN_POSITIVE: Self = Self(0x04);
    /// Smallest positive subnormal value, 2^-16 (`0.00000.01`).
    pub const MIN_POSITIVE_SUBNORMAL: Self = Self(0x01);
    /// The NaN conversions produce (`0.11111.11`).
    pub const NAN: Self = Self(CANONICAL_NAN);
    /// Positive zero.
    pub const ZERO: Self = Self(0);
    /// Positive infinity (`0.11111.00`); conversions saturate and never produce it.
    pub const INFINITY: Self = Self(0x7C);
    /// Negative infinity (`1.11111.00`).
    pub const NEG_INFINITY: Self = Self(0xFC);

    /// The value with this bit pattern.
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits)
    }

    /// The bit pattern.
    pub const fn to_bits(self) -> u8 {
        self.0
    }

    /// Exact widening; NaNs become an f32 NaN, infinities f32 infinities.
    pub fn to_f32(self) -> f32 {
        E5M2_FORMAT.decode(self.0)
    }

    /// Whether this is one of the six NaN patterns.
    pub fn is_nan(self) -> bool {
        E5M2_FORMAT.is_nan(self.0)
    }

    /// Rounds to nearest, ties to even, saturating: finite values and infinities beyond the
    /// range become ±[`MAX`](Self::MAX) (as PTX `cvt.rn.satfinite.e5m2x2.f32`), NaN becomes
    /// [`NAN`](Self::NAN), and magnitudes up to half the smallest subnormal become a zero of
    /// the same sign.
    pub fn from_f32(value: f32) -> Self {
        Self(E5M2_FORMAT.encode(value))
    }
}

impl fmt::Debug for E4m3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "E4m3({:?}, {:#04x})", self.to_f32(), self.0)
    }
}

impl fmt::Debug for E5m2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "E5m2({:?}, {:#04x})", self.to_f32(), self.0)
    }
}

impl fmt::Display for E4m3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Through f32's Display, so precision and width flags apply.
        fmt::Display::fmt(&self.to_f32(), f)
    }
}

impl fmt::Display for E5m2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_f32(), f)
    }
}

// SAFETY: `E4m3` is `repr(transparent)` over a `u8`: one byte, no padding, any bit pattern
// valid, so it may be copied to and from the device as is.
unsafe impl cudarc::driver::DeviceRepr for E4m3 {}
// SAFETY: all-zero bits are a valid `E4m3`, +0.0.
unsafe impl cudarc::driver::ValidAsZeroBits for E4m3 {}
// SAFETY: `E5m2` is `repr(transparent)` over a `u8`: one byte, no padding, any bit pattern
// valid, so it may be copied to and from the device as is.
unsafe impl cudarc::driver::DeviceRepr for E5m2 {}
// SAFETY: all-zero bits are a valid `E5m2`, +0.0.
unsafe impl cudarc::driver::ValidAsZeroBits for E5m2 {}

/// Quantizes to E4M3 with a dequantization scale: element `i` is
/// `E4m3::from_f32(values[i] / scale)`, standing for `q.to_f32() * scale` (cuBLASLt's
/// convention, `D = scale_a * scale_b * (A_q · B_q)`).
///
/// # Panics
///
/// If `scale` is not positive and finite.
pub fn quantize_e4m3(values: &[f32], scale: f32) -> Vec<E4m3> {
    quantize(values, scale, E4m3::from_f32)
}

/// Quantizes to E5M2 with a dequantization scale: element `i` is
/// `E5m2::from_f32(values[i] / scale)`, standing for `q.to_f32() * scale` (cuBLASLt's
/// convention, `D = scale_a * scale_b * (A_q · B_q)`).
///
/// # Panics
///
/// If `scale` is not positive and finite.
pub fn quantize_e5m2(values: &[f32], scale: f32) -> Vec<E5m2> {
    quantize(values, scale, E5m2::from_f32)
}

fn quantize<T>(values: &[f32], scale: f32, from_f32: fn(f32) -> T) -> Vec<T> {
    assert!(
        scale > 0.0 && scale.is_finite(),
        "fp8 scale must be positive and finite, got {scale}"
    );
    values.iter().map(|&v| from_f32(v / scale)).collect()
}

/// The per-tensor dequantization scale that maps the largest magnitude onto the format's
/// largest finite value: `amax / format_max` (e.g. `E4m3::MAX.to_f32()`), or 1.0 when every
/// value is zero. NaNs are ignored; a scale that would underflow is raised to
/// `f32::MIN_POSITIVE` so it stays usable with [`quantize_e4m3`] / [`quantize_e5m2`].
///
/// # Panics
///
/// If `format_max` is not positive and finite, or a value is infinite.
pub fn amax_scale(values: &[f32], format_max: f32) -> f32 {
    assert!(
        format_max > 0.0 && format_max.is_finite(),
        "fp8 format max must be positive and finite, got {format_max}"
    );
    // `f32::max` ignores NaN operands.
    let amax = values.iter().fold(0.0f32, |amax, v| amax.max(v.abs()));
    assert!(amax.is_finite(), "amax_scale: values include an infinity");
    if amax == 0.0 {
        1.0
    } else {
        (amax / format_max).max(f32::MIN_POSITIVE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pow2(e: i32) -> f32 {
        super::pow2(e)
    }

    /// Every f32 the cross-checks below feed the converters: a prime stride over all bit
    /// patterns, xorshift values, and every fp8 value and midpoint with its f32 neighbours.
    fn probe_values() -> Vec<f32> {
        let mut values = Vec::new();
        let mut bits = 0u32;
        while let Some(next) = bits.checked_add(65_537) {
            values.push(f32::from_bits(bits));
            bits = next;
        }
        let mut state = 0x9E37_79B9u32;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            values.push(f32::from_bits(state));
            // Concentrate some where fp8 values live: exponents within ±24 of 1.
            let exponent = 127 - 24 + (state >> 23) % 48;
            values.push(f32::from_bits(state & 0x807F_FFFF | exponent << 23));
        }
        for decoded in [all_e4m3(), all_e5m2()] {
            let mut finite: Vec<f32> = decoded.into_iter().filter(|v| v.is_finite()).collect();
            finite.sort_by(f32::total_cmp);
            for pair in finite.windows(2) {
                // Exact in f32: fp8 values have at most 4 significant bits.
                let mid = (pair[0] + pair[1]) / 2.0;
                for x in [pair[0], mid] {
                    values.extend([x, next_up(x), next_down(x)]);
                }
            }
        }
        values
    }

    fn next_up(x: f32) -> f32 {
        f32::from_bits(x.to_bits().wrapping_add(1))
    }

    fn next_down(x: f32) -> f32 {
        f32::from_bits(x.to_bits().wrapping_sub(1))
    }

    fn all_e4m3() -> Vec<f32> {
        (0..=255).map(|b| E4m3::from_bits(b).to_f32()).collect()
    }

    fn all_e5m2() -> Vec<f32> {
        (0..=255).map(|b| E5m2::from_bits(b).to_f32()).collect()
    }

    /// The positive finite patterns of a format with their values, ascending.
    fn positive_finite(decode: impl Fn(u8) -> f32) -> Vec<(u8, f64)> {
        (0..SIGN)
            .map(|bits| (bits, f64::from(decode(bits))))
            .filter(|(_, value)| value.is_finite())
            .collect()
    }

    /// The nearest of `candidates` (from [`positive_finite`]) to `value`, ties to the even
    /// pattern, with magnitudes beyond the largest finite value saturated to it.
    fn reference(value: f32, candidates: &[(u8, f64)]) -> u8 {
        let sign = if value.is_sign_negative() { SIGN } else { 0 };
        let target = f64::from(value.abs());
        let &(max_bits, max) = candidates.last().unwrap();
        // Saturate first: far beyond the range, f64 distances to the top values round equal.
        if target >= max {
            return sign | max_bits;
        }
        let mut best = (0, f64::INFINITY);
        for &(bits, candidate) in candidates {
            let distance = (candidate - target).abs();
            if distance < best.1 || (distance == best.1 && best.0 % 2 == 1) {
                best = (bits, distance);
            }
        }
        sign | best.0
    }

    #[test]
    fn every_pattern_decodes_and_round_trips() {
        for bits in 0..=255u8 {
            for (value, nan, encoded) in [
                {
                    let x = E4m3::from_bits(bits);
                    (x.to_f32(), x.is_nan(), E4m3::from_f32(x.to_f32()).to_bits())
                },
                {
                    let x = E5m2::from_bits(bits);
                    (x.to_f32(), x.is_nan(), E5m2::from_f32(x.to_f32()).to_bits())
                },
            ] {
                assert_eq!(value.is_nan(), nan, "{bits:#04x}");
                if nan {
                    assert_eq!(encoded, CANONICAL_NAN);
                } else if value.is_finite() {
                    // Bitwise, so -0 round-trips to -0.
                    assert_eq!(encoded, bits, "{bits:#04x} = {value}");
                    assert_eq!(value.is_sign_negative(), bits & SIGN != 0);
                }
            }
        }
        let nans = |decoded: Vec<f32>| decoded.iter().filter(|v| v.is_nan()).count();
        assert_eq!(nans(all_e4m3()), 2);
        assert_eq!(nans(all_e5m2()), 6);
        assert_eq!(all_e5m2().iter().filter(|v| v.is_infinite()).count(), 2);
    }

    #[test]
    fn spec_values() {
        let e4m3 = |bits| E4m3::from_bits(bits).to_f32();
        assert_eq!(e4m3(0x7E), 448.0);
        assert_eq!(e4m3(0xFE), -448.0);
        assert_eq!(e4m3(0x08), pow2(-6));
        assert_eq!(e4m3(0x01), pow2(-9));
        assert_eq!(e4m3(0x07), 7.0 * pow2(-9));
        assert_eq!(e4m3(0x38), 1.0);
        assert_eq!(e4m3(0xB8), -1.0);
        assert_eq!(e4m3(0x3C), 1.5);
        assert_eq!(e4m3(0x77), 240.0);
        assert_eq!(e4m3(0x00).to_bits(), 0.0f32.to_bits());
        assert_eq!(e4m3(0x80).to_bits(), (-0.0f32).to_bits());
        assert!(e4m3(0x7F).is_nan() && e4m3(0xFF).is_nan());
        assert!(E4m3::from_bits(0x7F).is_nan() && E4m3::from_bits(0xFF).is_nan());

        let e5m2 = |bits| E5m2::from_bits(bits).to_f32();
        assert_eq!(e5m2(0x7B), 57344.0);
        assert_eq!(e5m2(0xFB), -57344.0);
        assert_eq!(e5m2(0x04), pow2(-14));
        assert_eq!(e5m2(0x01), pow2(-16));
        assert_eq!(e5m2(0x03), 3.0 * pow2(-16));
        assert_eq!(e5m2(0x3C), 1.0);
        assert_eq!(e5m2(0xBC), -1.0);
        assert_eq!(e5m2(0x7C), f32::INFINITY);
        assert_eq!(e5m2(0xFC), f32::NEG_INFINITY);
        for bits in [0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF] {
            assert!(e5m2(bits).is_nan() && E5m2::from_bits(bits).is_nan());
        }
        assert!(!E5m2::INFINITY.is_nan());
    }

    #[test]
    fn constants() {
        assert_eq!(E4m3::MAX.to_f32(), 448.0);
        assert_eq!(E4m3::MIN_POSITIVE.to_f32(), pow2(-6));
        assert_eq!(E4m3::MIN_POSITIVE_SUBNORMAL.to_f32(), pow2(-9));
        assert!(E4m3::NAN.is_nan());
        assert_eq!(E4m3::ZERO.to_f32().to_bits(), 0);
        assert_eq!(E4m3::default(), E4m3::ZERO);

        assert_eq!(E5m2::MAX.to_f32(), 57344.0);
        assert_eq!(E5m2::MIN_POSITIVE.to_f32(), pow2(-14));
        assert_eq!(E5m2::MIN_POSITIVE_SUBNORMAL.to_f32(), pow2(-16));
        assert!(E5m2::NAN.is_nan());
        assert_eq!(E5m2::ZERO.to_f32().to_bits(), 0);
        assert_eq!(E5m2::INFINITY.to_f32(), f32::INFINITY);
        assert_eq!(E5m2::NEG_INFINITY.to_f32(), f32::NEG_INFINITY);
        assert_eq!(E5m2::default(), E5m2::ZERO);
    }

    #[test]
    fn saturates() {
        for v in [
            448.0,
            449.0,
            463.9,
            464.0,
            480.0,
            1e6,
            f32::MAX,
            f32::INFINITY,
        ] {
            assert_eq!(E4m3::from_f32(v), E4m3::MAX, "{v}");
            assert_eq!(E4m3::from_f32(-v).to_bits(), 0xFE, "{v}");
        }
        for v in [57344.0, 61440.0, 65536.0, 1e9, f32::MAX, f32::INFINITY] {
            assert_eq!(E5m2::from_f32(v), E5m2::MAX, "{v}");
            assert_eq!(E5m2::from_f32(-v).to_bits(), 0xFB, "{v}");
        }
        assert!(E4m3::from_f32(f32::NAN).is_nan());
        assert!(E4m3::from_f32(-f32::NAN).is_nan());
        assert_eq!(E5m2::from_f32(f32::NAN), E5m2::NAN);
    }

    #[test]
    fn rounds_to_nearest_even() {
        let e4m3 = |v: f32| E4m3::from_f32(v).to_f32();
        let e5m2 = |v: f32| E5m2::from_f32(v).to_f32();
        // Normal midpoints: 1.0 has an even mantissa, 1.125 an odd one.
        assert_eq!(e4m3(1.0625), 1.0);
        assert_eq!(e4m3(next_up(1.0625)), 1.125);
        assert_eq!(e4m3(next_down(1.1875)), 1.125);
        assert_eq!(e4m3(1.1875), 1.25);
        assert_eq!(e4m3(-1.0625), -1.0);
        assert_eq!(e4m3(-1.1875), -1.25);
        assert_eq!(e5m2(1.125), 1.0);
        assert_eq!(e5m2(1.375), 1.5);
        // Across a binade: 1.875 is the top of [1, 2).
        assert_eq!(e4m3(1.9375), 2.0);
        assert_eq!(e4m3(next_down(1.9375)), 1.875);
        assert_eq!(e5m2(1.875), 2.0);
        assert_eq!(e4m3(416.0), 416.0);
        assert_eq!(e4m3(432.0), 448.0);

        // Subnormals, in units of the smallest one.
        let unit = pow2(-9);
        assert_eq!(e4m3(0.5 * unit).to_bits(), 0);
        assert_eq!(e4m3(-0.5 * unit).to_bits(), (-0.0f32).to_bits());
        assert_eq!(e4m3(next_up(0.5 * unit)), unit);
        assert_eq!(e4m3(1.5 * unit), 2.0 * unit);
        assert_eq!(e4m3(next_down(1.5 * unit)), unit);
        assert_eq!(e4m3(2.5 * unit), 2.0 * unit);
        assert_eq!(e4m3(next_up(2.5 * unit)), 3.0 * unit);
        assert_eq!(e4m3(0.25 * unit).to_bits(), 0);
        assert_eq!(e4m3(1e-30).to_bits(), 0);
        assert_eq!(e4m3(f32::from_bits(1)).to_bits(), 0);
        assert_eq!(e4m3(-f32::from_bits(1)).to_bits(), (-0.0f32).to_bits());
        // The largest subnormal (7 units) rounds up to the smallest normal (8 units).
        assert_eq!(e4m3(7.5 * unit), E4m3::MIN_POSITIVE.to_f32());
        assert_eq!(e4m3(next_down(7.5 * unit)), 7.0 * unit);
        assert_eq!(E4m3::from_f32(7.5 * unit), E4m3::MIN_POSITIVE);

        let unit = pow2(-16);
        assert_eq!(e5m2(0.5 * unit).to_bits(), 0);
        assert_eq!(e5m2(next_up(0.5 * unit)), unit);
        assert_eq!(e5m2(1.5 * unit), 2.0 * unit);
        assert_eq!(e5m2(3.5 * unit), E5m2::MIN_POSITIVE.to_f32());
        assert_eq!(e5m2(next_down(3.5 * unit)), 3.0 * unit);
    }

    #[test]
    fn matches_nearest_value_reference() {
        let values = probe_values();
        assert!(values.len() > 400_000);
        let e4m3 = positive_finite(|b| E4m3::from_bits(b).to_f32());
        let e5m2 = positive_finite(|b| E5m2::from_bits(b).to_f32());
        assert_eq!((e4m3.len(), e5m2.len()), (127, 124));
        for value in values {
            if value.is_nan() {
                assert!(E4m3::from_f32(value).is_nan() && E5m2::from_f32(value).is_nan());
                continue;
            }
            let expected = reference(value, &e4m3);
            assert_eq!(
                E4m3::from_f32(value).to_bits(),
                expected,
                "E4M3 of {value:e} ({:#010x})",
                value.to_bits()
            );
            let expected = reference(value, &e5m2);
            assert_eq!(
                E5m2::from_f32(value).to_bits(),
                expected,
                "E5M2 of {value:e} ({:#010x})",
                value.to_bits()
            );
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(format!("{:?}", E4m3::from_f32(1.5)), "E4m3(1.5, 0x3c)");
        assert_eq!(format!("{:?}", E5m2::NEG_INFINITY), "E5m2(-inf, 0xfc)");
        assert_eq!(E4m3::from_f32(-2.5).to_string(), "-2.5");
        assert_eq!(E4m3::NAN.to_string(), "NaN");
        assert_eq!(format!("{:.2}", E5m2::MAX), "57344.00");
    }

    #[test]
    fn quantizes_with_a_dequantization_scale() {
        let mut state = 0x2545_F491u32;
        let values: Vec<f32> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state as f32 / u32::MAX as f32 - 0.5) * 37.0
            })
            .collect();

        for (max, mantissa_bits, min_subnormal, decoded) in [
            (
                E4m3::MAX.to_f32(),
                3,
                E4m3::MIN_POSITIVE_SUBNORMAL.to_f32(),
                quantize_e4m3(&values, amax_scale(&values, E4m3::MAX.to_f32()))
                    .into_iter()
                    .map(E4m3::to_f32)
                    .collect::<Vec<_>>(),
            ),
            (
                E5m2::MAX.to_f32(),
                2,
                E5m2::MIN_POSITIVE_SUBNORMAL.to_f32(),
                quantize_e5m2(&values, amax_scale(&values, E5m2::MAX.to_f32()))
                    .into_iter()
                    .map(E5m2::to_f32)
                    .collect(),
            ),
        ] {
            let scale = amax_scale(&values, max);
            let amax = values.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            assert_eq!(scale, amax / max);
            for (&v, &q) in values.iter().zip(&decoded) {
                assert!(q.abs() <= max);
                // Half a unit in the last place of the result's binade (relative for normals,
                // half the smallest subnormal below), plus slack for the f32 divide/multiply.
                let dequantized = q * scale;
                let bound = (v.abs() * pow2(-mantissa_bits - 1)).max(min_subnormal * 0.5 * scale);
                let error = (dequantized - v).abs();
                assert!(
                    error <= bound * 1.0001,
                    "{v} -> {dequantized} (bound {bound})"
                );
            }
        }

        assert_eq!(amax_scale(&[0.0, -0.0], 448.0), 1.0);
        assert_eq!(amax_scale(&[], 448.0), 1.0);
        assert_eq!(amax_scale(&[1.0, -896.0, f32::NAN], 448.0), 2.0);
        let q = quantize_e4m3(&[896.0, -1.0, 1e9], 2.0);
        assert_eq!(q, [E4m3::MAX, E4m3::from_f32(-0.5), E4m3::MAX]);
    }

    #[test]
    #[should_panic(expected = "positive and finite")]
    fn rejects_a_zero_scale() {
        quantize_e5m2(&[1.0], 0.0);
    }
}
