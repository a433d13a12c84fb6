//! `Matmul` over a kernel set emitted at run time (the `emit` feature): the built-in set for
//! the device, or another, with or without a fused epilogue. Each member's launch shape comes
//! from its plan up front; its PTX is written when it is first picked. A mixed fp8 pair
//! (`Matmul<E4m3, bf16, E5m2>`) takes the set's members with B's type (`b_dtype`).

use super::{Matmul, Picker, Source};
use crate::device::DeviceInfo;
use crate::element::{input_names, Element, KernelTypes};
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

impl<In: Element, Out: Element, InB: Element> Matmul<In, Out, InB> {
    /// The built-in kernel set for the context's device and these element types
    /// ([`sets::for_device`]; a mixed fp8 pair takes the fp8 set, its members with B's type
    /// as [`Matmul::with_set`] says); reads the tuning cache `GEMM_DSL_TUNE_CACHE` names, if
    /// set (one it cannot use is reported and the model picks: [`Matmul::with_tune_cache`]).
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, Error> {
        Self::new_fused(ctx, FusedSpec::NONE)
    }

    /// Every member of `set` in every layout, emitted at run time when first picked. For a
    /// mixed fp8 pair (`InB` is not `In`), each member with `b_dtype` (named
    /// `<member>_b_<type>`), but those that store C column-major: they run only swapped
    /// products, which exchange A and B. A mixed pair of other types is an
    /// [`Error::UnsupportedTypes`].
    pub fn with_set(ctx: &Arc<CudaContext>, set: &KernelSet) -> Result<Self, Error> {
        Self::with_set_fused(ctx, set, FusedSpec::NONE)
    }

    /// [`Matmul::new`] with a fused epilogue in every kernel: see [`Matmul::with_set_fused`].
    /// fp8 block scales (`quant: Quant::Block`) take the block-scaled fp8 set
    /// ([`sets::for_device_with`]).
    pub fn new_fused(ctx: &Arc<CudaContext>, fused: FusedSpec) -> Result<Self, Error> {
        let device = DeviceInfo::query(ctx)?;
        let cc = device.compute_capability_number();
        let types = element_types::<In, Out, InB>()?;
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
    /// the epilogue runs once per output tile, the same work for every member. A mixed fp8
    /// pair's members carry B's type, as [`Matmul::with_set`] says.
    pub fn with_set_fused(
        ctx: &Arc<CudaContext>,
        set: &KernelSet,
        fused: FusedSpec,
    ) -> Result<Self, Error> {
        let types = element_types::<In, Out, InB>()?;
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
/// rows), and are left out where there is none. A mixed pair's members carry B's type
/// ([`with_b_dtype`]).
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
        // The swapped product `Cᵀ = Bᵀ·Aᵀ` exchanges A and B at launch: for a mixed pair the
        // column-major members would need a kernel typed `GemmKernel<InB, Out, In>`, which a
        // `Matmul<In, Out, InB>` does not hold. Its problems run on the other members.
        if member.spec.c_layout == CLayout::Col && types.is_mixed() {
            continue;
        }
        let epilogue = if member.spec.c_layout == CLayout::Col {
            match fused.on_swapped_product() {
                Some(swapped) => swapped,
                None => continue,
            }
        } else {
            *fused
        };
        if epilogue.is_none() && !types.is_mixed() {
            specs.push(member);
            continue;
        }
        let mut spec = member.spec;
        if types.is_mixed() {
            spec = with_b_dtype(spec, types.b_dtype());
        }
        if !epilogue.is_none() {
            spec = with_epilogue(spec, &epilogue);
        }
        let text = spec.to_spec_text();
        specs.push(check_str(&text).map_err(|errors| refused(errors, &text))?);
    }
    Ok(specs)
}

/// A member's spec with B of type `b_dtype` (a mixed fp8 pair), named `<member>_b_<type>`:
/// the set's specs name A's type alone.
fn with_b_dtype(member: GemmSpec, b_dtype: DType) -> GemmSpec {
    GemmSpec {
        name: format!("{}_b_{}", member.name, b_dtype.name()),
        b_dtype,
        ..member
    }
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

/// The spec types a set is instantiated with for these Rust types: A's `In`, B's `InB`, C's
/// `Out` (f32 words hold f32, not tf32). A and B differ only as two fp8 types
/// ([`KernelTypes::with_b`]); another mixed pair is an [`Error::UnsupportedTypes`].
pub(crate) fn element_types<In: Element, Out: Element, InB: Element>() -> Result<KernelTypes, Error>
{
    let named = |name: &str| match name {
        "bf16" => DType::Bf16,
        "f16" => DType::F16,
        "e4m3" => DType::E4m3,
        "e5m2" => DType::E5m2,
        _ => DType::F32,
    };
    let (dtype, b_dtype, out) = (named(In::NAME), named(InB::NAME), named(Out::NAME));
    KernelTypes::with_b(dtype, b_dtype, out).ok_or_else(|| Error::UnsupportedTypes {
        kernel: "Matmul".to_string(),
        dtype: input_names(dtype, b_dtype),
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
            stage_inputs: true,
            stage_output: true,
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

    /// A mixed fp8 pair (e4m3 x e5m2 and e5m2 x e4m3) takes every member of the fp8 sets
    /// that keeps A and B in place, in the set's order, with B's type in its spec and name and
    /// the one-type member's tile and epilogue; each emits. Those that store C column-major
    /// (the swapped product's) are left out: they exchange A and B.
    #[test]
    fn mixed_fp8_pairs_take_the_members_that_keep_a_and_b_in_place() {
        let per_tensor = FusedSpec {
            quant: Quant::Tensor,
            ..FusedSpec::NONE
        };
        let block = FusedSpec {
            quant: Quant::Block,
            ..FusedSpec::NONE
        };
        let gelu = FusedSpec {
            scale: Scale::Alpha,
            activation: Activation::Gelu,
            ..per_tensor
        };
        for (a, b) in [(DType::E4m3, DType::E5m2), (DType::E5m2, DType::E4m3)] {
            let mixed = KernelTypes::with_b(a, b, DType::Bf16).unwrap();
            let one_type = KernelTypes::new(a, DType::Bf16).unwrap();
            for (set, fused) in [
                (&sets::SM90_FP8, FusedSpec::NONE),
                (&sets::SM90_FP8, per_tensor),
                (&sets::SM90_FP8, gelu),
                (&sets::SM90_FP8_BLOCK, block),
            ] {
                let specs = set_specs(set, mixed, &fused).unwrap();
                let in_place: Vec<ValidSpec> = set_specs(set, one_type, &fused)
                    .unwrap()
                    .into_iter()
                    .filter(|valid| valid.spec.c_layout == CLayout::Row)
                    .collect();
                assert!(!specs.is_empty(), "{}", set.name);
                assert_eq!(specs.len(), in_place.len(), "{} {mixed}", set.name);
                for (member, same_types) in specs.iter().zip(&in_place) {
                    let spec = &member.spec;
                    assert_eq!((spec.dtype, spec.b_dtype, spec.out), (a, b, DType::Bf16));
                    assert_eq!(spec.c_layout, CLayout::Row, "{}", spec.name);
                    assert_eq!(KernelTypes::of_spec(spec).unwrap(), mixed);
                    let suffix = format!("_b_{}", b.name());
                    assert!(spec.name.contains(&suffix), "{}", spec.name);
                    assert_eq!(spec.name.replacen(&suffix, "", 1), same_types.spec.name);
                    assert_eq!(
                        (spec.tile, spec.schedule, spec.layout),
                        (
                            same_types.spec.tile,
                            same_types.spec.schedule,
                            same_types.spec.layout
                        )
                    );
                    assert_eq!(
                        FusedSpec::of_spec(spec),
                        FusedSpec::of_spec(&same_types.spec)
                    );
                    // The text round-trips and the kernel emits.
                    let text = spec.to_spec_text();
                    assert!(text.contains(&format!("b_dtype: {}", b.name())), "{text}");
                    assert_eq!(check_str(&text).unwrap().spec, *spec);
                    let emitted = gemm_codegen::emit(member);
                    assert_eq!(emitted.launch().input_element_bytes, 1);
                }
            }
            // No member of a mixed pair stores C column-major: no swapped product, no
            // exchanged operands, even for a decode problem, which the one-type set runs
            // swapped.
            let picker = Picker::of_set(&sets::SM90_FP8, mixed, &per_tensor).unwrap();
            assert!(!picker.takes_swapped_products());
            assert!(!picker.exchanges_operands());
            let every_route = super::super::Routes {
                one_row: true,
                swapped: true,
                stage_inputs: true,
                stage_output: true,
            };
            for (m, n, k) in [(1, 4096, 4096), (16, 8192, 8192), (4096, 4096, 4096)] {
                let problem = gemm_dsl::pick::Problem::new(m, n, k, gemm_dsl::Layout::RowCol);
                let route = picker.route(&problem, every_route).unwrap();
                assert!(!route.swaps_operands, "{problem}");
                assert_eq!(route.problem, problem);
            }
        }
    }

    /// Only fp8 pairs mix: A and B of two 16-bit types, or fp8 with a 16-bit B, are refused
    /// with the types named; the fp8 pairs give their mixed types.
    #[test]
    fn only_fp8_pairs_mix() {
        use crate::fp8::{E4m3, E5m2};
        use half::{bf16, f16};
        for (refused, named) in [
            (element_types::<bf16, bf16, f16>(), "bf16xf16"),
            (element_types::<f16, f32, bf16>(), "f16xbf16"),
            (element_types::<E4m3, bf16, bf16>(), "e4m3xbf16"),
            (element_types::<f32, f32, E5m2>(), "f32xe5m2"),
        ] {
            let error = refused.unwrap_err();
            assert!(matches!(error, Error::UnsupportedTypes { .. }), "{error}");
            let message = error.to_string();
            assert!(message.starts_with(&format!("`Matmul` has dtype {named} and out")));
            assert!(message.contains("only as an fp8 pair"), "{message}");
        }
        assert_eq!(
            element_types::<E4m3, bf16, E5m2>().unwrap(),
            KernelTypes::with_b(DType::E4m3, DType::E5m2, DType::Bf16).unwrap()
        );
        assert_eq!(
            element_types::<E5m2, f32, E4m3>().unwrap(),
            KernelTypes::with_b(DType::E5m2, DType::E4m3, DType::F32).unwrap()
        );
        assert_eq!(
            element_types::<bf16, bf16, bf16>().unwrap(),
            KernelTypes::new(DType::Bf16, DType::Bf16).unwrap()
        );
    }

    /// `Matmul<E4m3, bf16, E5m2>` (and the reverse pair) is built from the sets and runs with
    /// A, B and C of their own types: checked by the compiler.
    #[test]
    fn mixed_fp8_matmuls_take_a_and_b_of_their_own_types() {
        use crate::fp8::{E4m3, E5m2};
        use crate::{Epilogue, Problem};
        use cudarc::driver::{CudaSlice, CudaStream};
        use half::bf16;
        type Run<In, InB> = fn(
            &Matmul<In, bf16, InB>,
            &CudaStream,
            &CudaSlice<In>,
            &CudaSlice<InB>,
            &mut CudaSlice<bf16>,
            &Problem,
            &mut Epilogue<'_, bf16>,
        ) -> Result<(), Error>;
        type New<In, InB> =
            fn(&Arc<CudaContext>, FusedSpec) -> Result<Matmul<In, bf16, InB>, Error>;
        let _e4m3_e5m2: (Run<E4m3, E5m2>, New<E4m3, E5m2>) = (Matmul::run_fused, Matmul::new_fused);
        let _e5m2_e4m3: (Run<E5m2, E4m3>, New<E5m2, E4m3>) = (Matmul::run_fused, Matmul::new_fused);
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
