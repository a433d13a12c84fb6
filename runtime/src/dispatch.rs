//! A kernel loaded with the Rust types its spec names, whichever they are.
//!
//! The launcher is generic over the Rust types that hold a spec's element types
//! ([`KernelTypes`](crate::KernelTypes)); [`AnyKernel`] is a kernel loaded with its real
//! types. Code that is generic over the types reaches the typed kernel
//! through [`with_kernel!`](crate::with_kernel):
//!
//! ```no_run
//! use gemm_runtime::{with_kernel, AnyKernel, CudaStream, Element, Error, GemmKernel};
//! use std::sync::Arc;
//!
//! /// One launch on zero-filled `n x n` operands, whatever the kernel's element types.
//! fn on_zeros<In: Element, Out: Element>(
//!     kernel: &GemmKernel<In, Out>,
//!     stream: &Arc<CudaStream>,
//!     n: u32,
//! ) -> Result<Vec<Out>, Error> {
//!     let len = (n * n) as usize;
//!     let a = stream.alloc_zeros::<In>(len).expect("A");
//!     let b = stream.alloc_zeros::<In>(len).expect("B");
//!     let mut c = stream.alloc_zeros::<Out>(len).expect("C");
//!     kernel.launch(stream, &a, &b, &mut c, n, n, n)?;
//!     Ok(stream.clone_dtoh(&c).expect("C"))
//! }
//!
//! # fn main() -> Result<(), Error> {
//! let ctx = gemm_runtime::open_context(0)?;
//! let stream = ctx.default_stream();
//! let entry = gemm_codegen::catalog::CATALOG[0];
//! let emitted = gemm_codegen::emit_str(entry.spec).expect("catalog specs are valid");
//! let kernel = AnyKernel::from_emitted(&ctx, &emitted)?;
//! // `typed` is a `&GemmKernel<In, Out>` with the kernel's own types in each arm.
//! let zeros = with_kernel!(&kernel, typed => on_zeros(typed, &stream, 512)?.len());
//! assert_eq!(zeros, 512 * 512);
//! # Ok(())
//! # }
//! ```

use crate::element::{KernelTypes, Storage};
use crate::error::Error;
use crate::jit::DriverSass;
#[cfg(feature = "emit")]
use crate::kernel::intern;
use crate::kernel::GemmKernel;
use cudarc::driver::CudaContext;
#[cfg(feature = "emit")]
use gemm_codegen::Emitted;
use gemm_dsl::abi::KernelInfo;
use half::{bf16, f16};
use std::sync::Arc;

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
    #[cfg(feature = "emit")]
    pub fn from_emitted(ctx: &Arc<CudaContext>, emitted: &Emitted) -> Result<AnyKernel, Error> {
        let types = KernelTypes::of_spec(emitted.spec())?;
        AnyKernel::load_as(ctx, &intern(emitted), types)
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
            (Storage::E4m3 | Storage::E5m2, _) => {
                return Err(Error::Fp8NotDispatched {
                    kernel: info.name().to_string(),
                    types: types.to_string(),
                })
            }
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

    /// [`GemmKernel::balance_grid`].
    pub fn balance_grid(&mut self, on: bool) {
        match &mut self.kernel {
            TypedKernel::F32(kernel) => kernel.balance_grid(on),
            TypedKernel::Bf16(kernel) => kernel.balance_grid(on),
            TypedKernel::Bf16F32(kernel) => kernel.balance_grid(on),
            TypedKernel::F16(kernel) => kernel.balance_grid(on),
            TypedKernel::F16F32(kernel) => kernel.balance_grid(on),
        }
    }

    /// [`GemmKernel::limit_grid`].
    pub fn limit_grid(&mut self, blocks: u32) -> u32 {
        match &mut self.kernel {
            TypedKernel::F32(kernel) => kernel.limit_grid(blocks),
            TypedKernel::Bf16(kernel) => kernel.limit_grid(blocks),
            TypedKernel::Bf16F32(kernel) => kernel.limit_grid(blocks),
            TypedKernel::F16(kernel) => kernel.limit_grid(blocks),
            TypedKernel::F16F32(kernel) => kernel.limit_grid(blocks),
        }
    }

    /// [`GemmKernel::sass`].
    pub fn sass(&self) -> Result<DriverSass, Error> {
        crate::with_kernel!(self, kernel => kernel.sass())
    }

    /// [`GemmKernel::check_sass`].
    pub fn check_sass(&self) -> Result<DriverSass, Error> {
        crate::with_kernel!(self, kernel => kernel.check_sass())
    }
}

/// Runs `$body` with `$kernel` bound to the typed [`GemmKernel`] inside an [`AnyKernel`]: the
/// body is compiled once per (input, output) pair, so it may call generic functions.
///
/// `with_kernel!(&any, kernel => on_zeros(kernel, &stream, n))`, with `on_zeros` generic over
/// the kernel's `In, Out`.
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
