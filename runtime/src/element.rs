//! The element types a kernel's operands may have on the Rust side.

use crate::dispatch::Storage;
use cudarc::cublas::sys::cudaDataType;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};
use std::fmt::Debug;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
}

/// `f32`, `half::bf16` or `half::f16`: the types generated kernels read and write.
///
/// Sealed: the launcher checks a kernel's element sizes and names against these exact types.
pub trait Element:
    sealed::Sealed + DeviceRepr + ValidAsZeroBits + Copy + Debug + PartialEq + Send + Sync + 'static
{
    /// The spec's name for the type (`dtype:` / `out:`).
    const NAME: &'static str;
    /// Size in bytes.
    const BYTES: u32;
    /// Other spec type names stored in this Rust type (tf32 operands live in f32 words).
    const ALSO_STORES: &'static [&'static str];
    /// The same type as a value, for code that picks types at run time.
    const STORAGE: Storage;
    /// cuBLAS's name for the type (the A/B/C types of `cublasGemmEx`).
    const CUBLAS_TYPE: cudaDataType;

    /// A quiet NaN with a payload no arithmetic produces: outputs are filled with it before a
    /// launch, so an element that still holds it afterwards was never written.
    fn poison() -> Self;
    /// Whether this value is bit for bit the poison pattern.
    fn is_poison(self) -> bool;
    /// Rounds an f32 to this type (nearest even).
    fn from_f32(value: f32) -> Self;
    /// Exact widening.
    fn to_f32(self) -> f32;

    fn to_f64(self) -> f64 {
        f64::from(self.to_f32())
    }
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    const BYTES: u32 = 4;
    const STORAGE: Storage = Storage::F32;
    const CUBLAS_TYPE: cudaDataType = cudaDataType::CUDA_R_32F;
    const ALSO_STORES: &'static [&'static str] = &["tf32"];

    fn poison() -> Self {
        f32::from_bits(F32_POISON)
    }
    fn is_poison(self) -> bool {
        self.to_bits() == F32_POISON
    }
    fn from_f32(value: f32) -> Self {
        value
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Element for bf16 {
    const NAME: &'static str = "bf16";
    const BYTES: u32 = 2;
    const STORAGE: Storage = Storage::Bf16;
    const CUBLAS_TYPE: cudaDataType = cudaDataType::CUDA_R_16BF;
    const ALSO_STORES: &'static [&'static str] = &[];

    fn poison() -> Self {
        bf16::from_bits(BF16_POISON)
    }
    fn is_poison(self) -> bool {
        self.to_bits() == BF16_POISON
    }
    fn from_f32(value: f32) -> Self {
        bf16::from_f32(value)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
}

impl Element for f16 {
    const NAME: &'static str = "f16";
    const BYTES: u32 = 2;
    const STORAGE: Storage = Storage::F16;
    const CUBLAS_TYPE: cudaDataType = cudaDataType::CUDA_R_16F;
    const ALSO_STORES: &'static [&'static str] = &[];

    fn poison() -> Self {
        f16::from_bits(F16_POISON)
    }
    fn is_poison(self) -> bool {
        self.to_bits() == F16_POISON
    }
    fn from_f32(value: f32) -> Self {
        f16::from_f32(value)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

// Quiet NaNs (exponent all ones, top mantissa bit set) with a distinctive payload. Hardware
// arithmetic returns the canonical NaN (payload zero), so a kernel never writes these.
const F32_POISON: u32 = 0x7FC5_A5A5;
const BF16_POISON: u16 = 0x7FC5;
const F16_POISON: u16 = 0x7E5A;

/// Whether a kernel element type named in a spec (`f32`, `tf32`, `bf16`, `f16`) is stored as `E`.
pub(crate) fn stores<E: Element>(spec_type: &str) -> bool {
    spec_type == E::NAME || E::ALSO_STORES.contains(&spec_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_poison<E: Element>() {
        let poison = E::poison();
        assert!(poison.to_f32().is_nan(), "{} poison must be a NaN", E::NAME);
        assert!(poison.is_poison());
        // The NaN arithmetic produces is not the poison, and neither are ordinary values.
        let computed_nan = E::from_f32(f32::NAN * 0.0);
        assert!(computed_nan.to_f32().is_nan());
        assert!(!computed_nan.is_poison());
        assert!(!E::from_f32(0.0).is_poison());
        assert!(!E::from_f32(-1.5).is_poison());
        assert_eq!(std::mem::size_of::<E>() as u32, E::BYTES);
    }

    #[test]
    fn poison_is_a_nan_no_arithmetic_makes() {
        check_poison::<f32>();
        check_poison::<bf16>();
        check_poison::<f16>();
    }

    #[test]
    fn conversions_round_trip_representable_values() {
        for value in [0.0f32, 1.0, -2.5, 0.375, 1024.0] {
            assert_eq!(
                <bf16 as Element>::from_f32(value).to_f64(),
                f64::from(value)
            );
            assert_eq!(<f16 as Element>::from_f32(value).to_f64(), f64::from(value));
            assert_eq!(<f32 as Element>::from_f32(value).to_f64(), f64::from(value));
        }
    }

    #[test]
    fn spec_type_names_map_to_storage_types() {
        assert!(stores::<f32>("f32"));
        assert!(stores::<f32>("tf32"));
        assert!(!stores::<f32>("bf16"));
        assert!(stores::<bf16>("bf16"));
        assert!(!stores::<bf16>("f16"));
        assert!(stores::<f16>("f16"));
    }
}
