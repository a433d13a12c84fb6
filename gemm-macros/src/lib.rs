//! `gemm! { .. }`: a tile spec in, at build time, a module holding the PTX kernel, its launch
//! geometry, the SASS it promises and a typed loader. Parsing, validation and code generation
//! all live in `gemm-dsl` and `codegen`; this crate only turns their output into tokens.
//!
//! The expansion refers to `::runtime`, which re-exports this macro: user crates depend on
//! `runtime` and write `runtime::gemm! { .. }`.

use codegen::{
    Emitted, GridSchedule, KernelParam, LaunchShape, Opcode, Operand, ParamKind, SassCheck,
    StorageOrder,
};
use gemm_dsl::DType;
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};

/// Generates a GEMM kernel module from a tile spec. See the `gemm-dsl` crate for the keys.
///
/// ```text
/// runtime::gemm! { name: my_gemm, arch: sm_80, dtype: f32, tile: 128x128x8, stages: 2,
///                  copy: cp_async, mma: fma }
/// let kernel = my_gemm::load(&ctx)?;
/// kernel.launch(&stream, &a, &b, &mut c, m, n, k)?;
/// // Eight products C_i = A_i·B_i, matrices back to back in each buffer:
/// let lds = runtime::LeadingDims::packed(&my_gemm::LAUNCH, m, n, k);
/// let batch = runtime::Batch::packed(&my_gemm::LAUNCH, 8, (m, n, k), lds);
/// kernel.launch_strided_batched(&stream, &a, &b, &mut c, m, n, k, lds, batch)?;
/// ```
#[proc_macro]
pub fn gemm(input: TokenStream) -> TokenStream {
    let parsed = gemm_dsl::parse_tokens(input.into(), Span::call_site());
    match parsed.and_then(|spec| spec.validate()) {
        Ok(valid) => expand(&codegen::emit(&valid)),
        Err(errors) => errors.to_compile_error(),
    }
    .into()
}

fn element_type(dtype: DType) -> TokenStream2 {
    match dtype {
        DType::F32 | DType::Tf32 => quote!(f32),
        DType::Bf16 => quote!(::runtime::half::bf16),
        DType::F16 => quote!(::runtime::half::f16),
    }
}

fn opcode_tokens(opcode: Opcode) -> TokenStream2 {
    let variant = format_ident!("{}", format!("{opcode:?}"));
    quote!(::runtime::Opcode::#variant)
}

fn check_tokens(check: &SassCheck) -> TokenStream2 {
    match *check {
        SassCheck::Present(op) => {
            let op = opcode_tokens(op);
            quote!(::runtime::SassCheck::Present(#op))
        }
        SassCheck::Absent(op) => {
            let op = opcode_tokens(op);
            quote!(::runtime::SassCheck::Absent(#op))
        }
        SassCheck::PresentVariant(variant) => {
            quote!(::runtime::SassCheck::PresentVariant(#variant))
        }
        SassCheck::PresentExact(opcode) => {
            quote!(::runtime::SassCheck::PresentExact(#opcode))
        }
    }
}

fn launch_tokens(launch: &LaunchShape) -> TokenStream2 {
    let LaunchShape {
        threads_per_block,
        tile_m,
        tile_n,
        tile_k,
        dynamic_smem_bytes,
        operand_align_bytes,
        output_align_bytes,
        copy_path,
        input_element_bytes,
        output_element_bytes,
        compute_capability,
        arch_specific,
        schedule,
        cluster: (cluster_x, cluster_y),
        partial_tiles,
        a_order,
        b_order,
        workspace_bytes_per_block,
    } = *launch;
    let (a_order, b_order) = (order_tokens(a_order), order_tokens(b_order));
    let copy_path = format_ident!("{}", format!("{copy_path:?}"));
    let copy_path = quote!(::runtime::CopyPath::#copy_path);
    let schedule = match schedule {
        GridSchedule::Tiles => quote!(::runtime::GridSchedule::Tiles),
        GridSchedule::Persistent { group } => {
            quote!(::runtime::GridSchedule::Persistent { group: #group })
        }
    };
    quote! {
        ::runtime::LaunchShape {
            threads_per_block: #threads_per_block,
            tile_m: #tile_m,
            tile_n: #tile_n,
            tile_k: #tile_k,
            dynamic_smem_bytes: #dynamic_smem_bytes,
            operand_align_bytes: #operand_align_bytes,
            output_align_bytes: #output_align_bytes,
            copy_path: #copy_path,
            input_element_bytes: #input_element_bytes,
            output_element_bytes: #output_element_bytes,
            compute_capability: #compute_capability,
            arch_specific: #arch_specific,
            schedule: #schedule,
            cluster: (#cluster_x, #cluster_y),
            partial_tiles: #partial_tiles,
            a_order: #a_order,
            b_order: #b_order,
            workspace_bytes_per_block: #workspace_bytes_per_block,
        }
    }
}

fn order_tokens(order: StorageOrder) -> TokenStream2 {
    let variant = format_ident!("{}", format!("{order:?}"));
    quote!(::runtime::StorageOrder::#variant)
}

fn operand_tokens(operand: Operand) -> TokenStream2 {
    let variant = format_ident!("{}", operand.name());
    quote!(::runtime::Operand::#variant)
}

fn param_tokens(param: &KernelParam) -> TokenStream2 {
    let KernelParam {
        name,
        kind,
        meaning,
    } = *param;
    let kind = match kind {
        ParamKind::Pointer(operand) => {
            let operand = operand_tokens(operand);
            quote!(::runtime::ParamKind::Pointer(#operand))
        }
        ParamKind::U32(scalar) => {
            let variant = format_ident!("{}", format!("{scalar:?}"));
            quote!(::runtime::ParamKind::U32(::runtime::Scalar::#variant))
        }
        ParamKind::Workspace => quote!(::runtime::ParamKind::Workspace),
        ParamKind::BatchStride(operand) => {
            let operand = operand_tokens(operand);
            quote!(::runtime::ParamKind::BatchStride(#operand))
        }
        ParamKind::TensorMap(tile) => {
            let operand = operand_tokens(tile.operand);
            let (inner, outer, swizzle_bytes) = (tile.inner, tile.outer, tile.swizzle_bytes);
            quote!(::runtime::ParamKind::TensorMap(::runtime::TensorMapBox {
                operand: #operand,
                inner: #inner,
                outer: #outer,
                swizzle_bytes: #swizzle_bytes,
            }))
        }
    };
    quote!(::runtime::KernelParam { name: #name, kind: #kind, meaning: #meaning })
}

fn expand(emitted: &Emitted) -> TokenStream2 {
    let module = format_ident!("{}", emitted.kernel_name());
    let kernel = emitted.kernel_name();
    let ptx = emitted.ptx();
    let spec = emitted.spec_text();
    let smem = emitted.launch().dynamic_smem_bytes;
    let threads = emitted.launch().threads_per_block;
    let launch = launch_tokens(emitted.launch());
    let checks = emitted.expected_sass().iter().map(check_tokens);
    let params = emitted.params().iter().map(param_tokens);
    let input = element_type(emitted.spec().dtype);
    let output = element_type(emitted.spec().out);
    let doc = format!("GEMM kernel `{kernel}` generated from `{spec}`.");
    quote! {
        #[doc = #doc]
        #[allow(dead_code)]
        pub mod #module {
            /// The kernel's PTX text.
            pub const PTX: &str = #ptx;
            /// The PTX entry point.
            pub const KERNEL: &str = #kernel;
            /// The validated spec, every key explicit.
            pub const SPEC: &str = #spec;
            /// Dynamic shared memory per block, bytes.
            pub const SMEM_BYTES: u32 = #smem;
            /// Threads per block.
            pub const THREADS: u32 = #threads;
            /// Launch geometry and argument rules.
            pub const LAUNCH: ::runtime::LaunchShape = #launch;
            /// Kernel parameters, in order.
            pub const PARAMS: &[::runtime::KernelParam] = &[#(#params),*];
            /// What the kernel's SASS must (not) contain.
            pub const EXPECTED_SASS: &[::runtime::SassCheck] = &[#(#checks),*];
            /// Everything the runtime needs to load and launch the kernel.
            #[allow(unsafe_code)]
            pub static INFO: ::runtime::KernelInfo<'static> =
                // SAFETY: every part above was written out from one `codegen::emit` of this
                // spec, which describes its own PTX.
                unsafe {
                    ::runtime::KernelInfo::from_parts(::runtime::KernelParts {
                        name: KERNEL,
                        ptx: PTX,
                        spec: SPEC,
                        launch: LAUNCH,
                        params: PARAMS,
                        expected_sass: EXPECTED_SASS,
                    })
                };
            /// A/B element type.
            pub type Input = #input;
            /// C element type.
            pub type Output = #output;

            /// Grid `(x, y, z)` for an `m x n x k` problem on a device that holds
            /// `resident_blocks` blocks of this kernel at once (a persistent schedule launches
            /// no more; see `GemmKernel::resident_blocks`).
            pub const fn grid(m: u32, n: u32, k: u32, resident_blocks: u32) -> (u32, u32, u32) {
                LAUNCH.grid(m, n, k, resident_blocks)
            }

            /// Grid `(x, y, z)` for a strided batch of `batch` products of `m x n x k` (see
            /// `GemmKernel::launch_strided_batched`): z runs over the products, or a
            /// persistent grid walks the tiles of all of them.
            pub const fn grid_batched(
                m: u32,
                n: u32,
                k: u32,
                batch: u32,
                resident_blocks: u32,
            ) -> (u32, u32, u32) {
                LAUNCH.grid_batched(m, n, k, batch, resident_blocks)
            }

            /// Loads the kernel into `ctx` (JIT-compiling the PTX for the device).
            pub fn load(
                ctx: &::std::sync::Arc<::runtime::CudaContext>,
            ) -> ::std::result::Result<::runtime::GemmKernel<Input, Output>, ::runtime::Error> {
                ::runtime::GemmKernel::load(ctx, &INFO)
            }
        }
    }
}
