//! From a kernel's spec to the Rust types it is launched with.
//!
//! A spec names its element types (`dtype:` for A and B, `out:` for C); the launcher is
//! generic over the Rust types that hold them. [`KernelTypes`] is the pair from the spec,
//! [`Storage`] the Rust type of each side, and [`AnyKernel`] a kernel loaded with its real
//! types, whichever they are. Code that is generic over the types reaches the typed kernel
//! through [`with_kernel!`](crate::with_kernel):
//!
//! ```no_run
//! # fn main() -> Result<(), runtime::Error> {
//! use runtime::verify::verify;
//! use runtime::{with_kernel, AnyKernel};
//!
//! let ctx = runtime::open_context(0)?;
//! let stream = ctx.default_stream();
//! let entry = codegen::catalog::CATALOG[0];
//! let emitted = codegen::emit_str(entry.spec).expect("catalog specs are valid");
//! let kernel = AnyKernel::from_emitted(&ctx, &emitted)?;
//! // `typed` is a `&GemmKernel<In, Out>` with the kernel's own types in each arm.
//! let report = with_kernel!(&kernel, typed => verify(typed, &stream, 512, 512, 512, 1)?);
//! assert!(report.check(&kernel.types().tolerance(512)).is_ok());
//! # Ok(())
//! # }
//! ```

use crate::error::Error;
use crate::kernel::{intern, GemmKernel};
use crate::verify::Tolerance;
use codegen::gemm_dsl::{DType, GemmSpec};
use codegen::sass::SassReport;
use codegen::{Emitted, KernelInfo};
use cudarc::driver::CudaContext;
use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The Rust type an element is stored in: `f32` (for f32 and tf32), `half::bf16`, `half::f16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Storage {
    F32,
    Bf16,
    F16,
}

impl Storage {
    /// Where a spec type lives: tf32 operands are f32 words (the tensor cores round them).
    pub fn of(dtype: DType) -> Storage {
        match dtype {
            DType::F32 | DType::Tf32 => Storage::F32,
            DType::Bf16 => Storage::Bf16,
            DType::F16 => Storage::F16,
        }
    }

    /// The Rust type's name (`f32`, `bf16`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            Storage::F32 => "f32",
            Storage::Bf16 => "bf16",
            Storage::F16 => "f16",
        }
    }

    pub fn bytes(self) -> u32 {
        match self {
            Storage::F32 => 4,
            Storage::Bf16 | Storage::F16 => 2,
        }
    }
}

impl fmt::Display for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A kernel's element types as its spec names them: `dtype` (A and B) and `out` (C).
///
/// Only pairs the runtime has a launcher for exist: f32 or tf32 in with f32 out, and bf16 or
/// f16 in with the same type or f32 out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelTypes {
    dtype: DType,
    out: DType,
}

impl KernelTypes {
    /// The pair, or `None` where no launcher takes it.
    pub fn new(dtype: DType, out: DType) -> Option<KernelTypes> {
        let supported = match (Storage::of(dtype), out) {
            (_, DType::Tf32) => false,
            (Storage::F32, out) => out == DType::F32,
            (_, DType::F32) => true,
            (_, out) => out == dtype,
        };
        supported.then_some(KernelTypes { dtype, out })
    }

    /// The types of a validated spec.
    pub fn of_spec(spec: &GemmSpec) -> Result<KernelTypes, Error> {
        KernelTypes::new(spec.dtype, spec.out).ok_or_else(|| Error::UnsupportedTypes {
            kernel: spec.name.clone(),
            dtype: spec.dtype.name().to_string(),
            out: spec.out.name().to_string(),
        })
    }

    /// The types a kernel's spec text names (`dtype: bf16, out: f32, ..`); where the text leaves
    /// a key out, the spec defaults apply (dtype f32; out f32 for f32 and tf32, else the dtype).
    pub fn of_info(info: &KernelInfo<'_>) -> Result<KernelTypes, Error> {
        let unsupported = || Error::UnsupportedTypes {
            kernel: info.name.to_string(),
            dtype: spec_value(info.spec, "dtype").unwrap_or("f32").to_string(),
            out: spec_value(info.spec, "out")
                .unwrap_or("(default)")
                .to_string(),
        };
        let dtype = match spec_value(info.spec, "dtype") {
            Some(name) => dtype_named(name).ok_or_else(unsupported)?,
            None => DType::F32,
        };
        let out = match spec_value(info.spec, "out") {
            Some(name) => dtype_named(name).ok_or_else(unsupported)?,
            None if Storage::of(dtype) == Storage::F32 => DType::F32,
            None => dtype,
        };
        KernelTypes::new(dtype, out).ok_or_else(unsupported)
    }

    pub fn dtype(self) -> DType {
        self.dtype
    }

    pub fn out(self) -> DType {
        self.out
    }

    /// The Rust type of A and B.
    pub fn input(self) -> Storage {
        Storage::of(self.dtype)
    }

    /// The Rust type of C.
    pub fn output(self) -> Storage {
        Storage::of(self.out)
    }

    /// The error bounds a correct kernel of these types meets for depth `k` (against float64).
    pub fn tolerance(self, k: u32) -> Tolerance {
        Tolerance::for_dtype(self.dtype, k)
    }
}

impl fmt::Display for KernelTypes {
    /// `dtype->out`, e.g. `bf16->f32`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.dtype.name(), self.out.name())
    }
}

/// The value of `key` in a spec's text (`dtype: bf16, out: f32, ...`).
pub(crate) fn spec_value<'s>(spec: &'s str, key: &str) -> Option<&'s str> {
    spec.split(',').find_map(|entry| {
        let (name, value) = entry.split_once(':')?;
        (name.trim() == key).then(|| value.trim())
    })
}

fn dtype_named(name: &str) -> Option<DType> {
    [DType::F32, DType::Tf32, DType::Bf16, DType::F16]
        .into_iter()
        .find(|dtype| dtype.name() == name)
}

/// A kernel loaded with the Rust types its spec names, one variant per (input, output) pair.
#[derive(Debug)]
pub enum TypedKernel {
    /// f32 SIMT and tf32 tensor-core kernels.
    F32(GemmKernel<f32, f32>),
    Bf16(GemmKernel<bf16, bf16>),
    Bf16F32(GemmKernel<bf16, f32>),
    F16(GemmKernel<f16, f16>),
    F16F32(GemmKernel<f16, f32>),
}

/// A kernel of any element types, loaded with its real ones. Use
/// [`with_kernel!`](crate::with_kernel) to run generic code on the typed kernel.
#[derive(Debug)]
pub struct AnyKernel {
    types: KernelTypes,
    kernel: TypedKernel,
}

impl AnyKernel {
    /// [`GemmKernel::load`] with the types the kernel's spec text names.
    pub fn load(ctx: &Arc<CudaContext>, info: &KernelInfo<'static>) -> Result<AnyKernel, Error> {
        AnyKernel::load_as(ctx, info, KernelTypes::of_info(info)?)
    }

    /// [`GemmKernel::from_emitted`] with the types of the emitted spec.
    pub fn from_emitted(ctx: &Arc<CudaContext>, emitted: &Emitted) -> Result<AnyKernel, Error> {
        let types = KernelTypes::of_spec(&emitted.spec)?;
        AnyKernel::load_as(ctx, intern(emitted), types)
    }

    fn load_as(
        ctx: &Arc<CudaContext>,
        info: &KernelInfo<'static>,
        types: KernelTypes,
    ) -> Result<AnyKernel, Error> {
        let kernel = match (types.input(), types.output()) {
            (Storage::F32, Storage::F32) => TypedKernel::F32(GemmKernel::load(ctx, info)?),
            (Storage::Bf16, Storage::Bf16) => TypedKernel::Bf16(GemmKernel::load(ctx, info)?),
            (Storage::Bf16, Storage::F32) => TypedKernel::Bf16F32(GemmKernel::load(ctx, info)?),
            (Storage::F16, Storage::F16) => TypedKernel::F16(GemmKernel::load(ctx, info)?),
            (Storage::F16, Storage::F32) => TypedKernel::F16F32(GemmKernel::load(ctx, info)?),
            // KernelTypes::new admits no other pair.
            _ => unreachable!("no launcher for {types}"),
        };
        Ok(AnyKernel { types, kernel })
    }

    pub fn types(&self) -> KernelTypes {
        self.types
    }

    /// The typed kernel; [`with_kernel!`](crate::with_kernel) matches on it.
    pub fn typed(&self) -> &TypedKernel {
        &self.kernel
    }

    pub fn info(&self) -> &KernelInfo<'static> {
        crate::with_kernel!(self, kernel => kernel.info())
    }

    /// [`GemmKernel::sass`].
    pub fn sass(&self) -> Result<SassReport, Error> {
        crate::with_kernel!(self, kernel => kernel.sass())
    }
}

/// Runs `$body` with `$kernel` bound to the typed [`GemmKernel`] inside an [`AnyKernel`]: the
/// body is compiled once per (input, output) pair, so it may call generic functions.
///
/// `with_kernel!(&any, kernel => verify(kernel, &stream, m, n, k, seed))`
#[macro_export]
macro_rules! with_kernel {
    ($any:expr, $kernel:ident => $body:expr) => {
        match $crate::AnyKernel::typed($any) {
            $crate::TypedKernel::F32($kernel) => $body,
            $crate::TypedKernel::Bf16($kernel) => $body,
            $crate::TypedKernel::Bf16F32($kernel) => $body,
            $crate::TypedKernel::F16($kernel) => $body,
            $crate::TypedKernel::F16F32($kernel) => $body,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Element;
    use codegen::catalog::CATALOG;
    use codegen::gemm_dsl::Mma;

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
        for storage in [Storage::F32, Storage::Bf16, Storage::F16] {
            let bytes = match storage {
                Storage::F32 => <f32 as Element>::BYTES,
                Storage::Bf16 => <bf16 as Element>::BYTES,
                Storage::F16 => <f16 as Element>::BYTES,
            };
            assert_eq!(storage.bytes(), bytes);
        }
    }

    #[test]
    fn tolerances_follow_the_input_type() {
        let of = |dtype, out| {
            KernelTypes::new(dtype, out)
                .unwrap()
                .tolerance(1024)
                .rel_frobenius
        };
        assert_eq!(of(DType::F32, DType::F32), 1e-5);
        assert_eq!(of(DType::Tf32, DType::F32), 5e-3);
        assert_eq!(of(DType::Bf16, DType::Bf16), 1e-2);
        assert_eq!(of(DType::Bf16, DType::F32), 1e-2);
        assert_eq!(of(DType::F16, DType::F16), 1e-2);
    }

    fn info_with_spec(spec: &'static str) -> KernelInfo<'static> {
        let emitted = codegen::emit_str(CATALOG[0].spec).unwrap();
        let info = *crate::kernel::intern(&emitted);
        KernelInfo {
            name: "probe",
            spec,
            ..info
        }
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
             bf16 -> bf16 or f32, f16 -> f16 or f32"
        );
        assert!(matches!(
            types("name: a, dtype: f64"),
            Err(Error::UnsupportedTypes { .. })
        ));
    }

    #[test]
    fn every_catalog_kernel_has_launcher_types_of_its_element_sizes() {
        for entry in CATALOG {
            let emitted = codegen::emit_str(entry.spec).unwrap();
            let types = KernelTypes::of_spec(&emitted.spec)
                .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(types, KernelTypes::of_info(&emitted.info()).unwrap());
            assert_eq!(
                (types.input().bytes(), types.output().bytes()),
                (
                    emitted.launch.input_element_bytes,
                    emitted.launch.output_element_bytes
                ),
                "{}",
                entry.name
            );
            if emitted.spec.mma == Mma::Fma {
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
            let Ok(emitted) = codegen::emit_str(&spec) else {
                continue;
            };
            let types = KernelTypes::of_spec(&emitted.spec).unwrap();
            assert_eq!((types.input(), types.output()), (input, output), "{spec}");
            assert_eq!(types.to_string(), format!("{dtype}->{out}"));
            assert_eq!(
                (input.bytes(), output.bytes()),
                (
                    emitted.launch.input_element_bytes,
                    emitted.launch.output_element_bytes
                )
            );
        }
    }
}
