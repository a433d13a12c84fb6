//! `GroupedMatmul`: grouped GEMM for mixture-of-experts layers through one entry point (the
//! `emit` feature). It holds the Hopper grouped set ([`sm90_grouped_specs`], or for fp8
//! experts with block scales [`sm90_grouped_fp8_specs`]) for one grouped layout and one layout
//! of A and B, with one fused epilogue in every member if asked ([`GroupedMatmul::new_fused`]:
//! each expert's bias, an activation, the router's weight per row), picks a kernel per launch
//! from what the host knows (the experts, the rows in all, N, K: [`GroupedShape::pick`] prices
//! the walk as the strided batch of the experts expected to hold rows, a masked one at several
//! fills of its capacity) and loads each kernel the first time it is picked.
//!
//! ```no_run
//! # fn main() -> Result<(), gemm_runtime::Error> {
//! use gemm_runtime::half::bf16;
//! use gemm_runtime::{GroupedDims, GroupedMatmul, Groups, Layout};
//!
//! let ctx = gemm_runtime::open_context(0)?;
//! let stream = ctx.default_stream();
//! // Eight experts, B as nn.Linear's weights ([G, N, K]), rows ending at `offsets`.
//! let experts = GroupedMatmul::<bf16, bf16>::new(&ctx, Groups::Contiguous, Layout::RowCol)?;
//! let dims = GroupedDims { groups: 8, rows: 4096, n: 14336, k: 4096 };
//! let a = stream.alloc_zeros::<bf16>(4096 * 4096).unwrap();
//! let w = stream.alloc_zeros::<bf16>(8 * 14336 * 4096).unwrap();
//! let mut d = stream.alloc_zeros::<bf16>(4096 * 14336).unwrap();
//! let offsets = stream.clone_htod(&[512i32, 1024, 1536, 2048, 2560, 3072, 3584, 4096]).unwrap();
//! experts.run(&stream, &a, &w, &mut d, &offsets, dims)?;
//! println!("ran {}", experts.pick(&dims)?);
//! # Ok(())
//! # }
//! ```

use super::emitted::with_epilogue;
use super::{device_model, element_types, KernelSlots};
use crate::capture::StreamCapture;
use crate::check::{GroupedDims, LeadingDims};
use crate::device::DeviceInfo;
use crate::element::Element;
use crate::epilogue::{Epilogue, FusedSpec};
use crate::error::Error;
use crate::kernel::GemmKernel;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut};
use gemm_dsl::grouped::{sm90_grouped_fp8_specs, sm90_grouped_specs};
use gemm_dsl::pick::GroupedShape;
use gemm_dsl::pick::{self, Candidate, DeviceModel};
use gemm_dsl::{check_str, Aux, DType, Groups, Layout, Quant, ValidSpec};
use std::sync::Arc;

/// One entry point for grouped products: picks the kernel per launch, loads it once.
#[derive(Debug)]
pub struct GroupedMatmul<In, Out> {
    ctx: Arc<CudaContext>,
    groups: Groups,
    layout: Layout,
    device: DeviceModel,
    specs: Vec<ValidSpec>,
    candidates: Vec<Candidate>,
    kernels: KernelSlots<In, Out>,
}

impl<In: Element, Out: Element> GroupedMatmul<In, Out> {
    /// The grouped set for `groups` (contiguous or masked) and `layout` (`rc`: B as
    /// `[G, N, K]`; `rr`: `[G, K, N]`), on a Hopper device (compute capability 9.0), bf16 or
    /// f16 in and the same type out (fp8 experts take block scales: [`GroupedMatmul::new_fused`]).
    pub fn new(ctx: &Arc<CudaContext>, groups: Groups, layout: Layout) -> Result<Self, Error> {
        Self::new_fused(ctx, groups, layout, FusedSpec::NONE)
    }

    /// The grouped set with the fused epilogue `fused` in every member (each kernel named
    /// `<member>_<epilogue>`), run with [`GroupedMatmul::run_with`]: α, each expert's column
    /// bias (`bias: col`, strided by the expert), an activation and the rows' factors
    /// (`row_scale: f32`, the router's weights). fp8 experts (e4m3 in, bf16 out, `layout: rc`)
    /// take block scales: `fused.quant` must be [`Quant::Block`]. C-in (`scale: alpha_beta`)
    /// and the aux output are not in the set (with both, its 128x256 tile spills): launch a
    /// grouped kernel with them through [`GemmKernel::launch_grouped_with`].
    pub fn new_fused(
        ctx: &Arc<CudaContext>,
        groups: Groups,
        layout: Layout,
        fused: FusedSpec,
    ) -> Result<Self, Error> {
        let info = DeviceInfo::query(ctx)?;
        let types = element_types::<In, Out, In>()?;
        let cc = info.compute_capability_number();
        let sixteen_bit =
            matches!(types.dtype(), DType::Bf16 | DType::F16) && types.out() == types.dtype();
        let fp8 = types.dtype() == DType::E4m3 && types.out() == DType::Bf16;
        if cc != 90 || !(sixteen_bit || fp8) || !groups.is_grouped() {
            return Err(Error::NoKernelSet {
                types: format!("grouped ({}) {types}", groups.name()),
                device_cc: cc,
            });
        }
        let unsupported = |problem: String| {
            Err(Error::EpilogueArguments {
                kernel: format!("GroupedMatmul ({} {types})", groups.name()),
                problem,
            })
        };
        match (fp8, fused.quant) {
            (true, Quant::Block) if layout == Layout::RowCol => {}
            (true, Quant::Block) => {
                return unsupported(format!(
                    "fp8 experts are read K-major: layout rc (B as [G, N, K]), not {}",
                    layout.name()
                ))
            }
            (true, quant) => {
                return unsupported(format!(
                    "fp8 experts take block scales (quant: block), not `quant: {}`",
                    quant.name()
                ))
            }
            (false, Quant::None) => {}
            (false, quant) => {
                return unsupported(format!(
                    "`quant: {}` scales fp8 operands; these experts are {}",
                    quant.name(),
                    types.dtype().name()
                ))
            }
        }
        if fused.scale.reads_c() || fused.aux != Aux::None {
            return unsupported(
                "the grouped set takes α, a bias per expert, an activation and the rows' factors; \
                 for C-in or the aux output launch a grouped kernel with `GemmKernel::launch_grouped_with`"
                    .to_string(),
            );
        }
        let texts = if fp8 {
            sm90_grouped_fp8_specs(groups)
        } else {
            sm90_grouped_specs(groups, layout, types.dtype())
        };
        // The members as written: fp8 ones scale by blocks already.
        let as_written = FusedSpec {
            quant: fused.quant,
            ..FusedSpec::NONE
        };
        let specs = texts
            .iter()
            .map(|text| {
                let refused = |errors: gemm_dsl::SpecErrors, text: &str| Error::SpecText {
                    kernel: text.to_string(),
                    errors: errors.render(text, "sm90 grouped"),
                };
                let member = check_str(text).map_err(|errors| refused(errors, text))?;
                if fused == as_written {
                    return Ok(member);
                }
                let text = with_epilogue(member.spec, &fused).to_spec_text();
                check_str(&text).map_err(|errors| refused(errors, &text))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let candidates = specs
            .iter()
            .map(|valid| Candidate::of(valid, gemm_codegen::emit::launch_of(valid)))
            .collect();
        Ok(GroupedMatmul {
            ctx: ctx.clone(),
            groups,
            layout,
            device: device_model(&info, &DeviceModel::h100_sxm()),
            kernels: KernelSlots::new(specs.len()),
            specs,
            candidates,
        })
    }

    /// The name of the kernel [`GroupedMatmul::run`] would launch for `dims`.
    pub fn pick(&self, dims: &GroupedDims) -> Result<&str, Error> {
        Ok(&self.candidates[self.pick_index(dims)?].name)
    }

    fn pick_index(&self, dims: &GroupedDims) -> Result<usize, Error> {
        let shape = GroupedShape {
            groups: dims.groups,
            rows: dims.rows,
            n: dims.n,
            k: dims.k,
            layout: self.layout,
            masked: self.groups == Groups::Masked,
        };
        shape.pick(&self.candidates, &self.device).ok_or_else(|| {
            // The last priced problem is the tallest: the one a member would refuse.
            let priced = *shape
                .priced_as()
                .last()
                .expect("one priced problem or more");
            Error::NoKernelFor {
                problem: format!(
                    "{} experts, {} rows, N {}, K {} (priced as {priced})",
                    dims.groups, dims.rows, dims.n, dims.k
                ),
                refused: pick::rank(&self.candidates, &priced, &self.device)
                    .refused
                    .iter()
                    .map(|(index, reason)| format!("{}: {reason}", self.candidates[*index].name))
                    .collect::<Vec<_>>()
                    .join("; "),
            }
        })
    }

    /// The set's kernels by name, in the order [`GroupedMatmul::kernel`] numbers them.
    pub fn names(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.name.as_str()).collect()
    }

    /// Kernel `index` of the set, loaded on first use (to measure every member).
    pub fn kernel(&self, index: usize) -> Result<&GemmKernel<In, Out>, Error> {
        self.kernels.get_or_load(index, || {
            GemmKernel::from_emitted(&self.ctx, &gemm_codegen::emit(&self.specs[index]))
        })
    }

    /// The picked kernel for `dims`, loaded: call it before capturing a CUDA graph, which
    /// cannot hold a load.
    pub fn kernel_for(&self, dims: &GroupedDims) -> Result<&GemmKernel<In, Out>, Error> {
        self.kernel(self.pick_index(dims)?)
    }

    /// The grouped product with packed operands (A `rows x K`; B `groups` matrices as the
    /// layout says; D `rows x N`) and the experts' row table, by the picked kernel: see
    /// [`GemmKernel::launch_grouped`] for the layouts, the checks and what a bad table does.
    /// During a CUDA-graph capture a kernel not yet loaded is refused
    /// ([`Error::CaptureLoadsKernel`]).
    pub fn run<A, B, C, R>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        d: &mut C,
        group_rows: &R,
        dims: GroupedDims,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<In>,
        C: DevicePtrMut<Out>,
        R: DevicePtr<i32>,
    {
        self.run_with(stream, a, b, d, group_rows, dims, &mut Epilogue::none())
    }

    /// [`GroupedMatmul::run`] with the epilogue's arguments (a set from
    /// [`GroupedMatmul::new_fused`]): fp8 block scales, α, each expert's bias, the rows'
    /// factors; checked as [`GemmKernel::launch_grouped_with`] checks them.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with<A, B, C, R>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        d: &mut C,
        group_rows: &R,
        dims: GroupedDims,
        epilogue: &mut Epilogue<'_, Out>,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<In>,
        C: DevicePtrMut<Out>,
        R: DevicePtr<i32>,
    {
        let index = self.pick_index(&dims)?;
        if self.kernels.loaded(index).is_none() && StreamCapture::of(stream)?.is_capturing() {
            return Err(Error::CaptureLoadsKernel {
                kernel: self.candidates[index].name.clone(),
            });
        }
        let lds = LeadingDims {
            lda: dims.k,
            ldb: if self.layout.b_row_major() {
                dims.n
            } else {
                dims.k
            },
            ldc: dims.n,
        };
        self.kernel(index)?
            .launch_grouped_with(stream, a, b, d, group_rows, dims, lds, epilogue)
    }
}

#[cfg(test)]
mod tests {
    use gemm_dsl::grouped::{sm90_grouped_fp8_specs, sm90_grouped_specs};
    use gemm_dsl::pick::GroupedShape;
    use gemm_dsl::pick::{Candidate, DeviceModel};
    use gemm_dsl::{check_str, DType, Groups, Layout};

    /// The tile height the H100's model picks from `specs` for (experts, rows, N, K), the
    /// experts contiguous.
    fn picked_tile_m(specs: &[String], layout: Layout) -> impl Fn(u32, u32, u32, u32) -> u32 {
        let candidates: Vec<Candidate> = specs
            .iter()
            .map(|text| {
                let valid = check_str(text).unwrap();
                let launch = gemm_codegen::emit::launch_of(&valid);
                Candidate::of(&valid, launch)
            })
            .collect();
        move |groups, rows, n, k| {
            let shape = GroupedShape {
                groups,
                rows,
                n,
                k,
                layout,
                masked: false,
            };
            let index = shape
                .pick(&candidates, &DeviceModel::h100_sxm())
                .expect("a grouped kernel admits every problem");
            candidates[index].launch.tile_m
        }
    }

    /// What the H100's model picks for the problems of `shapes/moe.txt`: 64-row tiles where
    /// the experts hold a few rows each, 128 rows and more where they hold thousands.
    #[test]
    fn the_model_picks_narrow_tiles_for_decode_and_tall_ones_for_prefill() {
        let specs = sm90_grouped_specs(Groups::Contiguous, Layout::RowRow, DType::Bf16);
        let picked = picked_tile_m(&specs, Layout::RowRow);
        assert_eq!(picked(256, 512, 4096, 7168), 64);
        assert_eq!(picked(8, 32, 28672, 4096), 64);
        assert!(picked(8, 32768, 4096, 7168) >= 128);
    }

    /// The fp8 set (block scales) priced the same way: 64-row tiles for a decode step's few
    /// rows per expert, 128 rows for thousands.
    #[test]
    fn the_model_prices_the_fp8_set_like_the_bf16_one() {
        let picked = picked_tile_m(&sm90_grouped_fp8_specs(Groups::Contiguous), Layout::RowCol);
        assert_eq!(picked(256, 512, 4096, 7168), 64);
        assert_eq!(picked(4, 32768, 4096, 7168), 128);
    }
}
