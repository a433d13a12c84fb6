//! The Hopper family's part of the PTX writer: its templates, the entry template of each
//! schedule, the words the templates print that the plan holds as numbers and enums, and
//! the wgmma block of one k tile.

use super::{MainLoop, ScheduleKind, WgmmaPlan};
use gemm_dsl::family::wgmma::WGMMA_M;
use gemm_dsl::DType;
use serde::Serialize;
use std::fmt::Write;
use tera::Context;

/// This family's templates, compiled into the binary.
pub const TEMPLATES: &[(&str, &str)] = &[
    (
        "wgmma/kernel/tile_per_block.ptx.tera",
        include_str!("../../../templates/wgmma/kernel/tile_per_block.ptx.tera"),
    ),
    (
        "wgmma/kernel/persistent.ptx.tera",
        include_str!("../../../templates/wgmma/kernel/persistent.ptx.tera"),
    ),
    (
        "wgmma/kernel/pingpong.ptx.tera",
        include_str!("../../../templates/wgmma/kernel/pingpong.ptx.tera"),
    ),
    (
        "wgmma/kernel/stream_k.ptx.tera",
        include_str!("../../../templates/wgmma/kernel/stream_k.ptx.tera"),
    ),
    (
        "wgmma/block.ptx.tera",
        include_str!("../../../templates/wgmma/block.ptx.tera"),
    ),
    (
        "wgmma/ring.ptx.tera",
        include_str!("../../../templates/wgmma/ring.ptx.tera"),
    ),
    (
        "wgmma/producer.ptx.tera",
        include_str!("../../../templates/wgmma/producer.ptx.tera"),
    ),
    (
        "wgmma/consumer.ptx.tera",
        include_str!("../../../templates/wgmma/consumer.ptx.tera"),
    ),
    (
        "wgmma/promotion.ptx.tera",
        include_str!("../../../templates/wgmma/promotion.ptx.tera"),
    ),
    (
        "wgmma/epilogue.ptx.tera",
        include_str!("../../../templates/wgmma/epilogue.ptx.tera"),
    ),
    (
        "wgmma/schedule/walk.ptx.tera",
        include_str!("../../../templates/wgmma/schedule/walk.ptx.tera"),
    ),
    (
        "wgmma/schedule/grouped.ptx.tera",
        include_str!("../../../templates/wgmma/schedule/grouped.ptx.tera"),
    ),
    (
        "wgmma/schedule/pingpong.ptx.tera",
        include_str!("../../../templates/wgmma/schedule/pingpong.ptx.tera"),
    ),
    (
        "wgmma/schedule/stream_k.ptx.tera",
        include_str!("../../../templates/wgmma/schedule/stream_k.ptx.tera"),
    ),
    (
        "wgmma/math_only.ptx.tera",
        include_str!("../../../templates/wgmma/math_only.ptx.tera"),
    ),
];

impl WgmmaPlan {
    /// Fills the kernel template's context; returns the name of its schedule's entry
    /// template.
    pub fn kernel_template(&self, context: &mut Context) -> &'static str {
        context.insert("math_text", &wgmma_block(self));
        context.insert("text", &KernelText::of(self));
        match self.schedule.kind {
            ScheduleKind::TilePerBlock => "wgmma/kernel/tile_per_block.ptx.tera",
            ScheduleKind::Persistent => "wgmma/kernel/persistent.ptx.tera",
            ScheduleKind::PingPong => "wgmma/kernel/pingpong.ptx.tera",
            ScheduleKind::StreamK => "wgmma/kernel/stream_k.ptx.tera",
        }
    }

    /// The wgmmas of one k tile.
    pub fn math_blocks(&self) -> Vec<String> {
        vec![wgmma_block(self)]
    }
}

/// The words of the kernel's header that the plan holds as numbers and enums (`text` in the
/// entry templates' context).
#[derive(Serialize)]
struct KernelText {
    /// The wgmma instruction of each piece of a row's columns.
    wgmma_instructions: Vec<String>,
    /// `bf16`, or `e5m2 (A) and e4m3 (B)`.
    input_types: String,
    /// The storage orders of A, B and C.
    layout_note: String,
    /// The operands' swizzles: one span, or A's and B's.
    swizzle_note: String,
}

impl KernelText {
    fn of(plan: &WgmmaPlan) -> KernelText {
        let main_loop = &plan.main_loop;
        let (a_swizzle, b_swizzle) = (
            main_loop.a_descriptor.swizzle_bytes,
            main_loop.b_descriptor.swizzle_bytes,
        );
        KernelText {
            wgmma_instructions: wgmma_instructions(main_loop),
            input_types: input_types(main_loop.dtype, main_loop.b_dtype),
            layout_note: crate::plan::layout_note(
                main_loop.layout,
                match plan.epilogue.columns {
                    Some(_) => gemm_dsl::CLayout::Col,
                    None => gemm_dsl::CLayout::Row,
                },
            ),
            // B's columns may take a narrower span than A's.
            swizzle_note: if a_swizzle == b_swizzle {
                format!("{a_swizzle}-byte swizzle")
            } else {
                format!("{a_swizzle}-byte swizzle for A, {b_swizzle}-byte for B")
            },
        }
    }
}

/// The wgmma instruction of each piece of a row's columns ([`WgmmaOp::piece`]).
///
/// [`WgmmaOp::piece`]: super::WgmmaOp::piece
pub(super) fn wgmma_instructions(main_loop: &MainLoop) -> Vec<String> {
    let (k, a, b) = (main_loop.wgmma_k, main_loop.dtype, main_loop.b_dtype);
    main_loop
        .wgmma_widths
        .iter()
        .map(|n| {
            format!(
                "wgmma.mma_async.sync.aligned.m{WGMMA_M}n{n}k{k}.f32.{}.{}",
                a.name(),
                b.name()
            )
        })
        .collect()
}

/// The input types: `bf16`, or A's and B's of a mixed fp8 pair.
pub(super) fn input_types(a: DType, b: DType) -> String {
    if a == b {
        a.name().to_string()
    } else {
        format!("{} (A) and {} (B)", a.name(), b.name())
    }
}

/// The wgmmas of one k tile: per k step (k16, or k32 of fp8) the B descriptor, then per wgmma row of 64 the A
/// descriptor and the instruction. Each instruction names its N/2 accumulators, so these
/// lines are most of the kernel's text; they are written here rather than through tera for
/// the same reason as [`fma_block`].
fn wgmma_block(plan: &WgmmaPlan) -> String {
    let main_loop = &plan.main_loop;
    let instructions = wgmma_instructions(main_loop);
    // fp8 wgmma has no transpose immediates: its operands are K-major.
    let transpose = match main_loop.transpose_immediates {
        Some((a, b)) => format!(", {a}, {b}"),
        None => String::new(),
    };
    let mut text = String::new();
    for (index, step) in main_loop.k_steps.iter().enumerate() {
        let scale_d = if step.first { "%p_accumulate" } else { "1" };
        let _ = writeln!(text, "\t// k step {index}");
        for mma in &step.mmas {
            // Each piece of the row's columns reads B from its first column on.
            if mma.row == 0 {
                if mma.piece > 0 {
                    let _ = writeln!(
                        text,
                        "\t// columns {} .. {}",
                        mma.n_start,
                        mma.n_start + mma.n
                    );
                }
                descriptor(
                    &mut text,
                    "%b_desc",
                    "%b_stage",
                    mma.b_offset_units,
                    "%b_hi",
                );
            }
            descriptor(
                &mut text,
                "%a_desc",
                "%a_stage",
                mma.a_offset_units,
                "%a_hi",
            );
            let accumulators: Vec<String> = mma
                .accumulators
                .clone()
                .map(|i| format!("%acc{i}"))
                .collect();
            let _ = writeln!(
                text,
                "\t{}\t{{ {} }}, %a_desc, %b_desc, {scale_d}, 1, 1{transpose};",
                instructions[mma.piece],
                accumulators.join(", ")
            );
        }
    }
    text.trim_end().to_string()
}

/// A 64-bit descriptor from a stage's low word plus `units` and the high word.
fn descriptor(text: &mut String, register: &str, low: &str, units: u32, high: &str) {
    if units == 0 {
        let _ = writeln!(text, "\tmov.b64\t{register}, {{ {low}, {high} }};");
    } else {
        let _ = writeln!(text, "\tadd.u32\t%desc_lo, {low}, {units};");
        let _ = writeln!(text, "\tmov.b64\t{register}, {{ %desc_lo, {high} }};");
    }
}
