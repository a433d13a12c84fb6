//! `Matmul` over a kernel set emitted at run time (the `emit` feature): the built-in set for
//! the device, or another, with or without a fused epilogue. Each member's launch shape comes
//! from its plan up front; its PTX is written when it is first picked.

use super::{Matmul, Picker, Source};
use crate::device::DeviceInfo;
use crate::element::{Element, KernelTypes};
use crate::epilogue::FusedSpec;
use crate::error::Error;
use cudarc::driver::CudaContext;
use gemm_dsl::abi::LaunchShape;
use gemm_dsl::pick::sets::{self, KernelSet};
use gemm_dsl::pick::DeviceModel;
use gemm_dsl::{
    check_str, Activation, Aux, CLayout, DType, GemmSpec, Quant, RowScale, Scale, ValidSpec,
};
use std::sync::Arc;

impl<In: Element, Out: Element> Matmul<In, Out> {
    /// The built-in kernel set for the context's device and these element types
    /// ([`sets::for_device`]); reads the tuning cache `GEMM_DSL_TUNE_CACHE` names, if set
    /// (one it cannot use is reported and the model picks: [`Matmul::with_tune_cache`]).
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, Error> {
        Self::new_fused(ctx, FusedSpec::NONE)
    }

    /// Every member of `set` in every layout, emitted at run time when first picked.
    pub fn with_set(ctx: &Arc<CudaContext>, set: &KernelSet) -> Result<Self, Error> {
        Self::with_set_fused(ctx, set, FusedSpec::NONE)
    }

    /// [`Matmul::new`] with a fused epilogue in every kernel: see [`Matmul::with_set_fused`].
    /// fp8 block scales (`quant: Quant::Block`) take the block-scaled fp8 set
    /// ([`sets::for_device_with`]).
    pub fn new_fused(ctx: &Arc<CudaContext>, fused: FusedSpec) -> Result<Self, Error> {
        let device = DeviceInfo::query(ctx)?;
        let cc = device.compute_capability_number();
        let types = element_types::<In, Out>()?;
        let set = sets::for_device_with(cc, types.dtype(), fused.quant).ok_or_else(|| {
            Error::NoKernelSet {
                types: types.to_string(),
                device_cc: cc,
            }
        })?;
        Self::with_set_fused(ctx, set, fused)
    }

    /// Every member of `set` that takes a fused epilogue ([`sets::SetMember::fuses`]; not `sm90`'s
    /// 128x192 ping-pong tile, which would spill) with the fused epilogue `fused` (its
    /// `scale`, `bias` and `activation`; each kernel named `<member>_<epilogue>`, e.g.
    /// `..._ab_colbf16_gelu`), in every layout; run with [`Matmul::run_fused`]. The picker picks as for the plain set:
    /// the epilogue runs once per output tile, the same work for every member.
    pub fn with_set_fused(
        ctx: &Arc<CudaContext>,
        set: &KernelSet,
        fused: FusedSpec,
    ) -> Result<Self, Error> {
        let types = element_types::<In, Out>()?;
        let kernels = set_kernels(set, types, &fused)?;
        let picker = Picker::new(&kernels, DeviceModel::h100_sxm());
        Self::assemble(
            ctx,
            picker,
            kernels
                .into_iter()
                .map(|(valid, _)| Source::Emit(Box::new(valid)))
                .collect(),
        )
    }
}

impl Picker {
    /// The picker [`Matmul::with_set_fused`] starts from, before it models the device in
    /// hand (here the H100's model): every member of `set` for these types in every layout,
    /// with the fused epilogue `fused` ([`FusedSpec::NONE`] for [`Matmul::with_set`]). No GPU
    /// needed: what a `Matmul` would pick, and whether a tuning cache's entries reach it.
    pub fn of_set(set: &KernelSet, types: KernelTypes, fused: &FusedSpec) -> Result<Picker, Error> {
        Ok(Picker::new(
            &set_kernels(set, types, fused)?,
            DeviceModel::h100_sxm(),
        ))
    }
}

/// The members of `set` for these types with the fused epilogue `fused`, validated, with
/// their launch shapes.
fn set_kernels(
    set: &KernelSet,
    types: KernelTypes,
    fused: &FusedSpec,
) -> Result<Vec<(ValidSpec, LaunchShape)>, Error> {
    Ok(set_specs(set, types, fused)?
        .into_iter()
        .map(|valid| {
            let launch = gemm_codegen::emit::launch_of(&valid);
            (valid, launch)
        })
        .collect())
}

/// The members of `set` for these types, with the fused epilogue `fused`, validated. The
/// members that store C column-major run only swapped products: they take the epilogue that
/// computes the same D there ([`FusedSpec::on_swapped_product`]: a column bias along their
/// rows), and are left out where there is none.
fn set_specs(
    set: &KernelSet,
    types: KernelTypes,
    fused: &FusedSpec,
) -> Result<Vec<ValidSpec>, Error> {
    let texts = if fused.is_none() {
        set.specs(types.dtype(), types.out())
    } else {
        set.fused_specs(types.dtype(), types.out())
    };
    let mut specs = Vec::with_capacity(texts.len());
    for text in &texts {
        let refused = |errors: gemm_dsl::SpecErrors, text: &str| Error::SpecText {
            kernel: text.to_string(),
            errors: errors.render(text, set.name),
        };
        let member = check_str(text).map_err(|errors| refused(errors, text))?;
        let epilogue = if member.spec.c_layout == CLayout::Col {
            match fused.on_swapped_product() {
                Some(swapped) => swapped,
                None => continue,
            }
        } else {
            *fused
        };
        if epilogue.is_none() {
            specs.push(member);
            continue;
        }
        let text = with_epilogue(member.spec, &epilogue).to_spec_text();
        specs.push(check_str(&text).map_err(|errors| refused(errors, &text))?);
    }
    Ok(specs)
}

/// A member's spec with the fused epilogue `fused`, named `<member>_<epilogue>`.
pub(crate) fn with_epilogue(member: GemmSpec, fused: &FusedSpec) -> GemmSpec {
    GemmSpec {
        name: format!("{}_{}", member.name, epilogue_suffix(fused)),
        scale: fused.scale,
        bias: fused.bias,
        activation: fused.activation,
        aux: fused.aux,
        row_scale: fused.row_scale,
        quant: fused.quant,
        // Block scales are applied where the partial sums are promoted.
        promote: match fused.quant {
            Quant::Block => Some(Quant::BLOCK),
            Quant::None | Quant::Tensor => member.promote,
        },
        ..member
    }
}

/// The epilogue in a kernel name: `ab_colbf16_gelu` for `scale: alpha_beta, bias: col(bf16),
/// activation: gelu` (and `_aux` with `aux: pre_activation`, `_rows` with `row_scale: f32`).
fn epilogue_suffix(fused: &FusedSpec) -> String {
    let scale = match fused.scale {
        Scale::None => String::new(),
        Scale::Alpha => "a".to_string(),
        Scale::AlphaBeta => "ab".to_string(),
    };
    let bias = match fused.bias.vector() {
        None => String::new(),
        Some((along, dtype)) => format!("{}{}", along.name(), dtype.name()),
    };
    let activation = match fused.activation {
        Activation::None => String::new(),
        other => other.name().to_string(),
    };
    let aux = match fused.aux {
        Aux::None => String::new(),
        Aux::PreActivation => "aux".to_string(),
    };
    let rows = match fused.row_scale {
        RowScale::None => String::new(),
        RowScale::F32 => "rows".to_string(),
    };
    let quant = match fused.quant {
        Quant::None => String::new(),
        Quant::Tensor => "qt".to_string(),
        Quant::Block => "qb".to_string(),
    };
    [quant, scale, bias, activation, aux, rows]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

/// The spec types a set is instantiated with for these Rust types (f32 words hold f32, not
/// tf32).
pub(crate) fn element_types<In: Element, Out: Element>() -> Result<KernelTypes, Error> {
    let named = |name: &str| match name {
        "bf16" => DType::Bf16,
        "f16" => DType::F16,
        "e4m3" => DType::E4m3,
        "e5m2" => DType::E5m2,
        _ => DType::F32,
    };
    let (dtype, out) = (named(In::NAME), named(Out::NAME));
    KernelTypes::new(dtype, out).ok_or_else(|| Error::UnsupportedTypes {
        kernel: "Matmul".to_string(),
        dtype: dtype.name().to_string(),
        out: out.name().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_sets_put_the_epilogue_in_every_member_that_fuses() {
        let fused = FusedSpec {
            scale: Scale::AlphaBeta,
            bias: gemm_dsl::Bias::Vector {
                along: gemm_dsl::BiasAlong::Col,
                dtype: DType::F32,
            },
            activation: Activation::Gelu,
            aux: Aux::PreActivation,
            quant: gemm_dsl::Quant::None,
            row_scale: RowScale::F32,
        };
        for (set, dtype, out) in [
            (&sets::SM90_16BIT, DType::Bf16, DType::Bf16),
            (&sets::SM80_16BIT, DType::F16, DType::F32),
            (&sets::SM80_F32, DType::F32, DType::F32),
        ] {
            let types = KernelTypes::new(dtype, out).unwrap();
            let plain = set_specs(set, types, &FusedSpec::NONE).unwrap();
            let specs = set_specs(set, types, &fused).unwrap();
            // The plain members that fuse (SetMember::fuses), in the same order, but those
            // that store C column-major: C-in, aux and the row factors have no form on the
            // swapped product.
            let fusing: Vec<_> = set
                .fused_specs(dtype, out)
                .iter()
                .map(|text| check_str(text).unwrap().spec)
                .filter(|spec| spec.c_layout == CLayout::Row)
                .map(|spec| plain.iter().find(|p| p.spec.name == spec.name).unwrap())
                .collect();
            assert!(fusing.len() < plain.len() || set.members.iter().all(|m| m.fuses));
            assert_eq!(specs.len(), fusing.len());
            for (plain, fused_member) in fusing.into_iter().zip(&specs) {
                assert_eq!(
                    fused_member.spec.name,
                    format!("{}_ab_colf32_gelu_aux_rows", plain.spec.name)
                );
                assert_eq!(
                    (fused_member.spec.tile, fused_member.spec.schedule),
                    (plain.spec.tile, plain.spec.schedule)
                );
                assert_eq!(
                    FusedSpec::of_spec(&fused_member.spec),
                    fused,
                    "{}",
                    fused_member.spec.name
                );
            }
        }
    }

    /// The fp8 set's swapped-product members (C column-major) stay in the set with per-tensor
    /// scales, α and an activation, and with a column bias, which they read along their rows
    /// (the swapped product's). With them, decode problems run swapped where the model says
    /// so, and large ones as given.
    #[test]
    fn decode_problems_run_swapped_where_the_model_predicts_it_faster() {
        use super::super::Routes;
        use gemm_dsl::pick::Problem;
        let types = KernelTypes::new(DType::E4m3, DType::Bf16).unwrap();
        let per_tensor = FusedSpec {
            quant: Quant::Tensor,
            ..FusedSpec::NONE
        };
        let swapped_members = |fused: &FusedSpec| {
            set_specs(&sets::SM90_FP8, types, fused)
                .unwrap()
                .iter()
                .filter(|valid| valid.spec.c_layout == CLayout::Col)
                .count()
        };
        let gelu = FusedSpec {
            scale: Scale::Alpha,
            activation: Activation::Gelu,
            ..per_tensor
        };
        let biased = FusedSpec {
            bias: gemm_dsl::Bias::Vector {
                along: gemm_dsl::BiasAlong::Col,
                dtype: DType::Bf16,
            },
            ..per_tensor
        };
        assert_eq!(swapped_members(&per_tensor), 2);
        assert_eq!(swapped_members(&gelu), 2);
        assert_eq!(swapped_members(&biased), 2);
        let biased_specs = set_specs(&sets::SM90_FP8, types, &biased).unwrap();
        let mut fused_of: Vec<Option<FusedSpec>> = biased_specs
            .iter()
            .map(|valid| Some(FusedSpec::of_spec(&valid.spec)))
            .collect();
        for (valid, fused) in biased_specs.iter().zip(&fused_of) {
            let expected = if valid.spec.c_layout == CLayout::Col {
                biased.on_swapped_product()
            } else {
                Some(biased)
            };
            assert_eq!(*fused, expected, "{}", valid.spec.name);
        }
        let biased_picker = Picker::of_set(&sets::SM90_FP8, types, &biased).unwrap();
        assert!(super::super::swapped_epilogues_agree(
            biased_picker.candidates(),
            &fused_of
        ));
        // Its column-major members carry a row bias: a problem whose own C is column-major
        // (and wants the column bias) has no kernel; with per-tensor scales alone it has.
        assert!(super::super::epilogues_differ_by_c_order(
            biased_picker.candidates(),
            &fused_of
        ));
        let per_tensor_of: Vec<Option<FusedSpec>> = set_specs(&sets::SM90_FP8, types, &per_tensor)
            .unwrap()
            .iter()
            .map(|valid| Some(FusedSpec::of_spec(&valid.spec)))
            .collect();
        assert!(!super::super::epilogues_differ_by_c_order(
            Picker::of_set(&sets::SM90_FP8, types, &per_tensor)
                .unwrap()
                .candidates(),
            &per_tensor_of
        ));
        // A swapped member that read the bias along its columns (the problem's epilogue as
        // given) would compute another D: no swapped route then.
        for (valid, fused) in biased_specs.iter().zip(&mut fused_of) {
            if valid.spec.c_layout == CLayout::Col {
                *fused = Some(biased);
            }
        }
        assert!(!super::super::swapped_epilogues_agree(
            biased_picker.candidates(),
            &fused_of
        ));

        let picker = Picker::of_set(&sets::SM90_FP8, types, &per_tensor).unwrap();
        let routes = Routes {
            one_row: false,
            swapped: true,
        };
        for (m, n, k) in [
            (1, 4096, 4096),
            (16, 8192, 8192),
            (16, 28672, 4096),
            (1, 10240, 8192),
        ] {
            let problem = Problem::new(m, n, k, gemm_dsl::Layout::RowCol);
            let route = picker.route(&problem, routes).unwrap();
            assert!(route.swaps_operands, "{problem}");
            assert_eq!(route.problem, problem.swapped());
            assert!(picker.candidates()[route.pick.index].name.contains("swap"));
        }
        let large = Problem::new(4096, 4096, 4096, gemm_dsl::Layout::RowCol);
        let route = picker.route(&large, routes).unwrap();
        assert!(!route.swaps_operands);
        assert_eq!(route.problem, large);
    }

    /// Every member of the block-scaled fp8 set builds with block scales (and with a bias
    /// beside them), promoting every 128 k; the plain fp8 set's large tiles do not fit them.
    #[test]
    fn the_block_scaled_fp8_set_builds_with_block_scales() {
        let block = FusedSpec {
            quant: gemm_dsl::Quant::Block,
            ..FusedSpec::NONE
        };
        let biased = FusedSpec {
            bias: gemm_dsl::Bias::Vector {
                along: gemm_dsl::BiasAlong::Col,
                dtype: DType::Bf16,
            },
            ..block
        };
        let types = KernelTypes::new(DType::E4m3, DType::Bf16).unwrap();
        for fused in [block, biased] {
            let specs = set_specs(&sets::SM90_FP8_BLOCK, types, &fused).unwrap();
            assert_eq!(specs.len(), sets::SM90_FP8_BLOCK.members.len());
            for valid in &specs {
                assert_eq!(valid.spec.promote, Some(gemm_dsl::Quant::BLOCK));
                assert_eq!(FusedSpec::of_spec(&valid.spec), fused);
            }
        }
        let refused = set_specs(&sets::SM90_FP8, types, &block).unwrap_err();
        assert!(refused.to_string().contains("registers"), "{refused}");
    }
}
