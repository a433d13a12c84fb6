//! The element types a kernel's operands may have on the Rust side.

use crate::error::Error;
use crate::fp8::{E4m3, E5m2};
use cudarc::driver::sys::CUtensorMapDataType;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use gemm_dsl::abi::KernelInfo;
use gemm_dsl::{self, DType, GemmSpec};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use std::fmt::{self, Debug};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::bf16 {}
    impl Sealed for half::f16 {}
    impl Sealed for crate::fp8::E4m3 {}
    impl Sealed for crate::fp8::E5m2 {}
}

/// `f32`, `half::bf16`, `half::f16`, or the fp8 inputs [`E4m3`] and [`E5m2`]: the types
/// generated kernels read and write.
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
    /// The Tensor Memory Accelerator's name for the type (tensor maps over operands).
    const TENSOR_MAP_TYPE: CUtensorMapDataType;

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
    const TENSOR_MAP_TYPE: CUtensorMapDataType =
        CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
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
    const TENSOR_MAP_TYPE: CUtensorMapDataType =
        CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
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
    const TENSOR_MAP_TYPE: CUtensorMapDataType =
        CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
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

/// fp8 is an input type only: its poison fills the padding of A and B, where a kernel that
/// reads past a line computes NaNs from it. `from_f32` turns every NaN into the canonical
/// `0x7F`, so the poison is the other sign's NaN.
impl Element for E4m3 {
    const NAME: &'static str = "e4m3";
    const BYTES: u32 = 1;
    const STORAGE: Storage = Storage::E4m3;
    const TENSOR_MAP_TYPE: CUtensorMapDataType = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8;
    const ALSO_STORES: &'static [&'static str] = &[];

    fn poison() -> Self {
        E4m3::from_bits(E4M3_POISON)
    }
    fn is_poison(self) -> bool {
        self.to_bits() == E4M3_POISON
    }
    fn from_f32(value: f32) -> Self {
        E4m3::from_f32(value)
    }
    fn to_f32(self) -> f32 {
        E4m3::to_f32(self)
    }
}

impl Element for E5m2 {
    const NAME: &'static str = "e5m2";
    const BYTES: u32 = 1;
    const STORAGE: Storage = Storage::E5m2;
    const TENSOR_MAP_TYPE: CUtensorMapDataType = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8;
    const ALSO_STORES: &'static [&'static str] = &[];

    fn poison() -> Self {
        E5m2::from_bits(E5M2_POISON)
    }
    fn is_poison(self) -> bool {
        self.to_bits() == E5M2_POISON
    }
    fn from_f32(value: f32) -> Self {
        E5m2::from_f32(value)
    }
    fn to_f32(self) -> f32 {
        E5m2::to_f32(self)
    }
}

// Quiet NaNs (exponent all ones, top mantissa bit set) with a distinctive payload. Hardware
// arithmetic returns the canonical NaN (payload zero), so a kernel never writes these.
const F32_POISON: u32 = 0x7FC5_A5A5;
const BF16_POISON: u16 = 0x7FC5;
const F16_POISON: u16 = 0x7E5A;
const E4M3_POISON: u8 = 0xFF;
const E5M2_POISON: u8 = 0xFE;

/// Whether a kernel element type named in a spec (`f32`, `tf32`, `bf16`, `f16`) is stored as `E`.
pub(crate) fn stores<E: Element>(spec_type: &str) -> bool {
    spec_type == E::NAME || E::ALSO_STORES.contains(&spec_type)
}

/// The Rust type an element is stored in: `f32` (for f32 and tf32), `half::bf16`, `half::f16`,
/// [`E4m3`], [`E5m2`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Storage {
    F32,
    Bf16,
    F16,
    E4m3,
    E5m2,
}

impl Storage {
    /// Where a spec type lives: tf32 operands are f32 words (the tensor cores round them).
    pub fn of(dtype: DType) -> Storage {
        match dtype {
            DType::F32 | DType::Tf32 => Storage::F32,
            DType::Bf16 => Storage::Bf16,
            DType::F16 => Storage::F16,
            DType::E4m3 => Storage::E4m3,
            DType::E5m2 => Storage::E5m2,
        }
    }

    /// The Rust type's name (`f32`, `bf16`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::Bf16 => "bf16",
            Storage::F16 => "f16",
            Storage::E4m3 => "e4m3",
            Storage::E5m2 => "e5m2",
        }
    }

    pub fn bytes(self) -> u32 {
        match self {
            Storage::F32 => 4,
            Storage::Bf16 | Storage::F16 => 2,
            Storage::E4m3 | Storage::E5m2 => 1,
        }
    }

    /// An 8-bit float: a kernel input only.
    pub fn is_fp8(self) -> bool {
        matches!(self, Storage::E4m3 | Storage::E5m2)
    }
}

impl fmt::Display for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kernel's element types as its spec names them: `dtype` (A, and B unless `b_dtype` differs)
/// and `out` (C).
///
/// Only sets the runtime has a launcher for exist: f32 or tf32 in with f32 out, bf16 or f16
/// in with the same type or f32 out, and fp8 (e4m3, e5m2, or one of each) in with bf16, f16
/// or f32 out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelTypes {
    dtype: DType,
    b_dtype: DType,
    out: DType,
}

impl KernelTypes {
    /// One input type for A and B, or `None` where no launcher takes the pair.
    pub fn new(dtype: DType, out: DType) -> Option<KernelTypes> {
        KernelTypes::with_b(dtype, dtype, out)
    }

    /// A's, B's and C's types, or `None` where no launcher takes them: A and B differ only
    /// as two fp8 types.
    pub fn with_b(dtype: DType, b_dtype: DType, out: DType) -> Option<KernelTypes> {
        let supported = match (Storage::of(dtype), out) {
            _ if b_dtype != dtype => dtype.is_fp8() && b_dtype.is_fp8() && !out.is_fp8(),
            (_, DType::Tf32 | DType::E4m3 | DType::E5m2) => false,
            (Storage::F32, out) => out == DType::F32,
            (Storage::E4m3 | Storage::E5m2, _) => true,
            (_, DType::F32) => true,
            (_, out) => out == dtype,
        };
        supported.then_some(KernelTypes {
            dtype,
            b_dtype,
            out,
        })
    }

    /// The types of a validated spec.
    pub fn of_spec(spec: &GemmSpec) -> Result<KernelTypes, Error> {
        KernelTypes::with_b(spec.dtype, spec.b_dtype, spec.out).ok_or_else(|| {
            Error::UnsupportedTypes {
                kernel: spec.name.clone(),
                dtype: input_names(spec.dtype, spec.b_dtype),
                out: spec.out.name().to_string(),
            }
        })
    }

    /// The types a kernel's spec text names, read by the spec language's own parser: where
    /// the text leaves a key out, the spec's defaults apply (those of the family its `mma`
    /// names).
    pub fn of_info(info: &KernelInfo<'_>) -> Result<KernelTypes, Error> {
        let (dtype, b_dtype, out) = spec_types(info)?;
        KernelTypes::with_b(dtype, b_dtype, out).ok_or_else(|| Error::UnsupportedTypes {
            kernel: info.name().to_string(),
            dtype: input_names(dtype, b_dtype),
            out: out.name().to_string(),
        })
    }

    /// A's type (and B's, unless [`KernelTypes::b_dtype`] differs).
    pub fn dtype(self) -> DType {
        self.dtype
    }

    /// B's type.
    pub fn b_dtype(self) -> DType {
        self.b_dtype
    }

    /// Whether A and B are of two types (an fp8 pair).
    pub fn is_mixed(self) -> bool {
        self.b_dtype != self.dtype
    }

    pub fn out(self) -> DType {
        self.out
    }

    /// The Rust type of A (and of B, unless the pair is mixed).
    pub fn input(self) -> Storage {
        Storage::of(self.dtype)
    }

    /// The Rust type of B.
    pub fn input_b(self) -> Storage {
        Storage::of(self.b_dtype)
    }

    /// The Rust type of C.
    pub fn output(self) -> Storage {
        Storage::of(self.out)
    }
}

impl fmt::Display for KernelTypes {
    /// `dtype->out`, e.g. `bf16->f32`; a mixed pair as `e4m3xe5m2->bf16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_mixed() {
            let (a, b, out) = (self.dtype.name(), self.b_dtype.name(), self.out.name());
            write!(f, "{a}x{b}->{out}")
        } else {
            write!(f, "{}->{}", self.dtype.name(), self.out.name())
        }
    }
}

/// A's and B's types as an error names them: `bf16`, or `e4m3xe5m2` where B's differs (as
/// [`KernelTypes`] displays a mixed pair).
pub(crate) fn input_names(dtype: DType, b_dtype: DType) -> String {
    if b_dtype == dtype {
        dtype.name().to_string()
    } else {
        format!("{}x{}", dtype.name(), b_dtype.name())
    }
}

/// A kernel's A, B and C element types (`dtype`, `b_dtype`, `out`) from its spec text, parsed
/// as the `gemm!` macro and the CLI parse it, defaults included.
pub(crate) fn spec_types(info: &KernelInfo<'_>) -> Result<(DType, DType, DType), Error> {
    match gemm_dsl::parse_str(info.spec()) {
        Ok(parsed) => Ok((parsed.spec.dtype, parsed.spec.b_dtype, parsed.spec.out)),
        Err(errors) => Err(Error::SpecText {
            kernel: info.name().to_string(),
            errors: errors.to_string(),
        }),
    }
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
        check_poison::<E4m3>();
        check_poison::<E5m2>();
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

    use gemm_codegen::catalog::CATALOG;
    use gemm_codegen::Emitted;
    use gemm_dsl::Mma;

    const ALL: [DType; 4] = [DType::F32, DType::Tf32, DType::Bf16, DType::F16];

    #[test]
    fn pairs_with_a_launcher_and_their_storage() {
        let pairs: Vec<(DType, DType)> = ALL
            .iter()
            .flat_map(|&dtype| ALL.iter().map(move |&out| (dtype, out)))
            .filter(|&(dtype, out)| KernelTypes::new(dtype, out).is_some())
            .collect();
        assert_eq!(
            pairs,
            [
                (DType::F32, DType::F32),
                (DType::Tf32, DType::F32),
                (DType::Bf16, DType::F32),
                (DType::Bf16, DType::Bf16),
                (DType::F16, DType::F32),
                (DType::F16, DType::F16),
            ]
        );
        let storage = |dtype, out| {
            let types = KernelTypes::new(dtype, out).unwrap();
            (types.input(), types.output())
        };
        assert_eq!(
            storage(DType::F32, DType::F32),
            (Storage::F32, Storage::F32)
        );
        assert_eq!(
            storage(DType::Tf32, DType::F32),
            (Storage::F32, Storage::F32)
        );
        assert_eq!(
            storage(DType::Bf16, DType::Bf16),
            (Storage::Bf16, Storage::Bf16)
        );
        assert_eq!(
            storage(DType::Bf16, DType::F32),
            (Storage::Bf16, Storage::F32)
        );
        assert_eq!(
            storage(DType::F16, DType::F16),
            (Storage::F16, Storage::F16)
        );
        assert_eq!(
            storage(DType::F16, DType::F32),
            (Storage::F16, Storage::F32)
        );
        assert_eq!(
            KernelTypes::new(DType::Bf16, DType::F32)
                .unwrap()
                .to_string(),
            "bf16->f32"
        );
    }

    #[test]
    fn storage_matches_the_element_types() {
        assert_eq!(<f32 as Element>::STORAGE, Storage::F32);
        assert_eq!(<bf16 as Element>::STORAGE, Storage::Bf16);
        assert_eq!(<f16 as Element>::STORAGE, Storage::F16);
        assert_eq!(<E4m3 as Element>::STORAGE, Storage::E4m3);
        assert_eq!(<E5m2 as Element>::STORAGE, Storage::E5m2);
        for storage in [
            Storage::F32,
            Storage::Bf16,
            Storage::F16,
            Storage::E4m3,
            Storage::E5m2,
        ] {
            let bytes = match storage {
                Storage::F32 => <f32 as Element>::BYTES,
                Storage::Bf16 => <bf16 as Element>::BYTES,
                Storage::F16 => <f16 as Element>::BYTES,
                Storage::E4m3 => <E4m3 as Element>::BYTES,
                Storage::E5m2 => <E5m2 as Element>::BYTES,
            };
            assert_eq!(storage.bytes(), bytes);
        }
    }

    fn info_with_spec(spec: &'static str) -> KernelInfo<'static> {
        let emitted: &'static Emitted = Box::leak(Box::new(
            gemm_codegen::emit_str(CATALOG[0].spec).expect("catalog specs are valid"),
        ));
        let mut parts = emitted.info().parts();
        parts.name = "probe";
        parts.spec = spec;
        // SAFETY: only the spec text is read, the kernel is never loaded.
        unsafe { KernelInfo::from_parts(parts) }
    }

    #[test]
    fn spec_text_names_the_types() {
        let types = |spec| KernelTypes::of_info(&info_with_spec(spec));
        assert_eq!(
            types("name: a, dtype: bf16, acc: f32, out: f32").unwrap(),
            KernelTypes::new(DType::Bf16, DType::F32).unwrap()
        );
        assert_eq!(
            types("name: a, dtype: f16").unwrap(),
            KernelTypes::new(DType::F16, DType::F16).unwrap()
        );
        assert_eq!(
            types("name: a, dtype: tf32").unwrap(),
            KernelTypes::new(DType::Tf32, DType::F32).unwrap()
        );
        assert_eq!(
            types("name: a, arch: sm_80").unwrap(),
            KernelTypes::new(DType::F32, DType::F32).unwrap()
        );
        let error = types("name: a, dtype: bf16, out: f16").unwrap_err();
        assert_eq!(
            error.to_string(),
            "`probe` has dtype bf16 and out f16; the runtime launches f32 or tf32 -> f32, \
             bf16 -> bf16 or f32, f16 -> f16 or f32, e4m3 or e5m2 -> bf16, f16 or f32, and A \
             and B of two types only as an fp8 pair (e4m3xe5m2, e5m2xe4m3)"
        );
        // fp8 goes to the 16-bit floats or f32, never to fp8.
        let fp8 = types("name: a, arch: sm_90a, mma: wgmma, dtype: e4m3").unwrap();
        assert_eq!((fp8.input(), fp8.output()), (Storage::E4m3, Storage::Bf16));
        for out in [DType::Bf16, DType::F16, DType::F32] {
            assert!(KernelTypes::new(DType::E5m2, out).is_some());
        }
        assert!(KernelTypes::new(DType::E4m3, DType::E4m3).is_none());
        assert!(KernelTypes::new(DType::Bf16, DType::E5m2).is_none());
        assert!(matches!(
            types("name: a, dtype: f64"),
            Err(Error::SpecText { .. })
        ));
        // Left out, the types are the family's defaults, as the parser gives them: bf16 for
        // the tensor-core families, f32 for SIMT.
        assert_eq!(
            types("name: a, arch: sm_90a, mma: wgmma").unwrap(),
            KernelTypes::new(DType::Bf16, DType::Bf16).unwrap()
        );
        assert_eq!(
            types("name: a, mma: mma_sync, out: f32").unwrap(),
            KernelTypes::new(DType::Bf16, DType::F32).unwrap()
        );
        // A value holding commas is one value, not several entries.
        assert_eq!(
            types("name: a, copy: cp_async(ca, vector = 4), dtype: f32").unwrap(),
            KernelTypes::new(DType::F32, DType::F32).unwrap()
        );
    }

    #[test]
    fn every_catalog_kernel_has_launcher_types_of_its_element_sizes() {
        for entry in CATALOG {
            let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
            let types = KernelTypes::of_spec(emitted.spec())
                .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(types, KernelTypes::of_info(&emitted.info()).unwrap());
            assert_eq!(
                (types.input().bytes(), types.output().bytes()),
                (
                    emitted.launch().input_element_bytes,
                    emitted.launch().output_element_bytes
                ),
                "{}",
                entry.name
            );
            if emitted.spec().mma == Mma::Fma {
                assert_eq!(types.dtype(), DType::F32, "{}", entry.name);
            }
        }
    }

    #[test]
    fn tensor_core_specs_dispatch_to_their_types() {
        // Specs of the mma.sync family where codegen emits them; plain values otherwise.
        for (dtype, out, input, output) in [
            ("bf16", "bf16", Storage::Bf16, Storage::Bf16),
            ("bf16", "f32", Storage::Bf16, Storage::F32),
            ("f16", "f16", Storage::F16, Storage::F16),
            ("f16", "f32", Storage::F16, Storage::F32),
            ("tf32", "f32", Storage::F32, Storage::F32),
        ] {
            let spec = format!(
                "name: probe, arch: sm_80, mma: mma_sync, dtype: {dtype}, out: {out}, \
                 tile: 128x128x32, warps: 2x2, stages: 3"
            );
            // Every pair is a valid mma.sync spec: none may be skipped.
            let emitted =
                gemm_codegen::emit_str(&spec).unwrap_or_else(|error| panic!("{spec}: {error}"));
            let types = KernelTypes::of_spec(emitted.spec()).unwrap();
            assert_eq!((types.input(), types.output()), (input, output), "{spec}");
            assert_eq!(types.to_string(), format!("{dtype}->{out}"));
            assert_eq!(
                (input.bytes(), output.bytes()),
                (
                    emitted.launch().input_element_bytes,
                    emitted.launch().output_element_bytes
                )
            );
        }
    }
}
