//! `gemm! { .. }`: a tile spec in, at build time, a module holding the PTX kernel, its launch
//! geometry, the SASS it promises and a typed loader. Parsing, validation and code generation
//! all live in `gemm-dsl` and `gemm-codegen`; this crate only turns their output into tokens.
//!
//! The expansion refers to the runtime crate, which re-exports this macro: user crates depend
//! on it and write `gemm_runtime::gemm! { .. }`. The expansion finds the runtime under whatever
//! name the user's Cargo.toml gives it.

use gemm_codegen::Emitted;
use gemm_dsl::abi::RustExpr;
use gemm_dsl::DType;
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use proc_macro_crate::{crate_name, FoundCrate};
use quote::{format_ident, quote};

/// The package the expansion's types and loader come from.
const RUNTIME_PACKAGE: &str = "gemm-runtime";

/// Generates a GEMM kernel module from a tile spec: comma-separated `key: value` pairs, every
/// key optional (the keys, their values and defaults: the `gemm-dsl` crate's docs, `cargo doc
/// -p gemm-dsl`). An invalid spec is a compile error at the offending token, with a help.
///
/// `gemm! { name: my_gemm, .. }` expands to a module `my_gemm` holding:
/// - `PTX`, `KERNEL` (the entry's name), `SPEC` (the validated spec, every key explicit);
/// - `SMEM_BYTES`, `THREADS`, `LAUNCH` (the `LaunchShape`: tile, alignments, schedule,
///   cluster, workspace), `PARAMS` (the entry's typed parameters), `EXPECTED_SASS` (what the
///   kernel's SASS must and must not contain), and `INFO`, all of it as one `KernelInfo`;
/// - `Input`, `InputB` and `Output`, the Rust element types of A, B and C (`InputB` is
///   `Input` unless the spec's `b_dtype` pairs two fp8 types);
/// - `grid(m, n, k, resident_blocks)` and `grid_batched(..)`, the launch grid (not for a
///   `groups:` kernel, whose tiles only the device counts: `launch_grouped` sizes its grid);
/// - `load(&ctx)`, which JIT-loads the kernel into a typed `GemmKernel<Input, Output, InputB>` whose
///   `launch` and `launch_strided_batched` check every size, stride and alignment.
///
/// ```text
/// gemm_runtime::gemm! { name: my_gemm, arch: sm_80, dtype: f32, tile: 128x128x8, stages: 2,
///                  copy: cp_async, mma: fma }
/// let kernel = my_gemm::load(&ctx)?;
/// kernel.launch(&stream, &a, &b, &mut c, m, n, k)?;
/// // Eight products C_i = A_i·B_i, matrices back to back in each buffer:
/// let lds = gemm_runtime::LeadingDims::packed(&my_gemm::LAUNCH, m, n, k);
/// let batch = gemm_runtime::Batch::packed(&my_gemm::LAUNCH, 8, (m, n, k), lds);
/// kernel.launch_strided_batched(&stream, &a, &b, &mut c, m, n, k, lds, batch)?;
/// ```
#[proc_macro]
pub fn gemm(input: TokenStream) -> TokenStream {
    let parsed = gemm_dsl::parse_tokens(input.into(), Span::call_site());
    match parsed.and_then(|spec| spec.validate()) {
        Ok(valid) => match runtime_path() {
            Ok(path) => expand(&gemm_codegen::emit(&valid), &path),
            Err(message) => syn::Error::new(Span::call_site(), message).to_compile_error(),
        },
        Err(errors) => errors.to_compile_error(),
    }
    .into()
}

/// Generates a module holding several kernels and their list, for the entry point that picks
/// among them (`gemm_runtime::Matmul::from_kernels`).
///
/// ```text
/// gemm_runtime::gemm_set! {
///     name: llm,
///     { name: big, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4,
///       copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8) },
///     { name: decode, arch: sm_90a, dtype: bf16, tile: 64x64x128, consumers: 1, stages: 6,
///       copy: tma, mma: wgmma },
/// }
/// let matmul = Matmul::<bf16, bf16>::from_kernels(&ctx, llm::KERNELS)?;
/// ```
///
/// expands to a module `llm` with one `gemm!` module per spec (`llm::big`, `llm::decode`) and
/// `KERNELS`, the list of their `INFO`s. Each spec's errors point at its own tokens.
#[proc_macro]
pub fn gemm_set(input: TokenStream) -> TokenStream {
    expand_set(input.into())
        .unwrap_or_else(|error| error.to_compile_error())
        .into()
}

/// `name: <module>`, then one `{ spec }` per kernel, comma separated.
fn parse_set(input: syn::parse::ParseStream) -> syn::Result<(syn::Ident, Vec<proc_macro2::Group>)> {
    let key: syn::Ident = input.parse()?;
    if key != "name" {
        return Err(syn::Error::new(
            key.span(),
            "a kernel set starts with `name: <module>`, then one `{ spec }` per kernel",
        ));
    }
    input.parse::<syn::Token![:]>()?;
    let name: syn::Ident = input.parse()?;
    let mut specs = Vec::new();
    while !input.is_empty() {
        input.parse::<syn::Token![,]>()?;
        if input.is_empty() {
            break;
        }
        match input.parse::<proc_macro2::TokenTree>()? {
            proc_macro2::TokenTree::Group(group)
                if group.delimiter() == proc_macro2::Delimiter::Brace =>
            {
                specs.push(group)
            }
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "expected a kernel spec in braces: `{ name: k, arch: sm_90a, .. }`",
                ))
            }
        }
    }
    if specs.is_empty() {
        return Err(syn::Error::new(
            name.span(),
            "a kernel set needs at least one `{ spec }` after its name",
        ));
    }
    Ok((name, specs))
}

fn expand_set(input: TokenStream2) -> syn::Result<TokenStream2> {
    use syn::parse::Parser;
    let (name, specs) = parse_set.parse2(input)?;
    // Every spec's errors first, each at its own tokens.
    let mut valid = Vec::new();
    let mut errors = TokenStream2::new();
    for group in &specs {
        match gemm_dsl::parse_tokens(group.stream(), group.span()).and_then(|spec| spec.validate())
        {
            Ok(spec) => valid.push(spec),
            Err(spec_errors) => errors.extend(spec_errors.to_compile_error()),
        }
    }
    if !errors.is_empty() {
        return Ok(errors);
    }
    let path = runtime_path().map_err(|message| syn::Error::new(Span::call_site(), message))?;
    let runtime = tokens(&path);
    let mut kernels = Vec::new();
    let mut modules = Vec::new();
    for spec in &valid {
        let emitted = gemm_codegen::emit(spec);
        modules.push(format_ident!("{}", emitted.kernel_name()));
        kernels.push(expand(&emitted, &path));
    }
    let doc = format!(
        "Kernel set `{name}`: {} kernels and their list.",
        modules.len()
    );
    Ok(quote! {
        #[doc = #doc]
        #[allow(dead_code)]
        pub mod #name {
            #(#kernels)*
            /// Every kernel of the set, for `Matmul::from_kernels`.
            pub static KERNELS: &[&#runtime::KernelInfo<'static>] = &[#(&#modules::INFO),*];
        }
    })
}

/// The path of the runtime crate as the user's Cargo.toml names it (its package name, or a
/// rename such as `gemm = { package = "runtime", .. }`), so the expansion resolves under any
/// dependency name.
fn runtime_path() -> Result<String, String> {
    match crate_name(RUNTIME_PACKAGE) {
        Ok(FoundCrate::Name(name)) => Ok(format!("::{name}")),
        // Inside the runtime package itself (its tests and binaries), the library is an
        // extern crate of its own name.
        Ok(FoundCrate::Itself) => Ok(format!("::{}", RUNTIME_PACKAGE.replace('-', "_"))),
        Err(error) => Err(format!(
            "gemm! expands to code that uses the `{RUNTIME_PACKAGE}` crate, which this crate's \
             Cargo.toml does not list under [dependencies] ({error})"
        )),
    }
}

/// Parses text this crate wrote from the ABI's own writers ([`RustExpr`]).
fn tokens(text: &str) -> TokenStream2 {
    text.parse()
        .unwrap_or_else(|error| panic!("the ABI writes Rust that parses ({error}): {text}"))
}

fn element_type(dtype: DType, runtime: &TokenStream2) -> TokenStream2 {
    match dtype {
        DType::F32 | DType::Tf32 => quote!(f32),
        DType::Bf16 => quote!(#runtime::half::bf16),
        DType::F16 => quote!(#runtime::half::f16),
        DType::E4m3 => quote!(#runtime::fp8::E4m3),
        DType::E5m2 => quote!(#runtime::fp8::E5m2),
    }
}

fn expand(emitted: &Emitted, path: &str) -> TokenStream2 {
    let runtime = tokens(path);
    let module = format_ident!("{}", emitted.kernel_name());
    let kernel = emitted.kernel_name();
    let ptx = emitted.ptx();
    let spec = emitted.spec_text();
    let smem = emitted.launch().dynamic_smem_bytes;
    let threads = emitted.launch().threads_per_block;
    let launch = tokens(&emitted.launch().rust_expr(path));
    let checks = emitted
        .expected_sass()
        .iter()
        .map(|check| tokens(&check.rust_expr(path)));
    let params = emitted
        .params()
        .iter()
        .map(|param| tokens(&param.rust_expr(path)));
    let input = element_type(emitted.spec().dtype, &runtime);
    let input_b = element_type(emitted.spec().b_dtype, &runtime);
    let output = element_type(emitted.spec().out, &runtime);
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
            pub const LAUNCH: #runtime::LaunchShape = #launch;
            /// Kernel parameters, in order.
            pub const PARAMS: &[#runtime::KernelParam] = &[#(#params),*];
            /// What the kernel's SASS must (not) contain.
            pub const EXPECTED_SASS: &[#runtime::SassCheck] = &[#(#checks),*];
            /// Everything the runtime needs to load and launch the kernel.
            #[allow(unsafe_code)]
            pub static INFO: #runtime::KernelInfo<'static> =
                // SAFETY: every part above was written out from one `gemm_codegen::emit` of this
                // spec, which describes its own PTX.
                unsafe {
                    #runtime::KernelInfo::from_parts(#runtime::KernelParts {
                        name: KERNEL,
                        ptx: PTX,
                        spec: SPEC,
                        launch: LAUNCH,
                        params: PARAMS,
                        expected_sass: EXPECTED_SASS,
                    })
                };
            /// A's element type (and B's, unless the spec pairs two fp8 types).
            pub type Input = #input;
            /// B's element type.
            pub type InputB = #input_b;
            /// C element type.
            pub type Output = #output;

            /// Grid `(x, y, z)` for an `m x n x k` problem on a device that holds
            /// `resident_blocks` blocks of this kernel at once (a persistent schedule launches
            /// no more; see `GemmKernel::resident_blocks`). Not a grouped kernel's (`groups:`):
            /// its walk's tiles are counted on the device, and `launch_grouped` sizes its grid
            /// for the tallest walk the row table can make.
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
                ctx: &::std::sync::Arc<#runtime::CudaContext>,
            ) -> ::std::result::Result<
                #runtime::GemmKernel<Input, Output, InputB>,
                #runtime::Error,
            > {
                #runtime::GemmKernel::load(ctx, &INFO)
            }
        }
    }
}
