//! The Hopper family's part of the PTX writer: its templates, their context and the wgmma
//! block of one k tile.

use super::{ScheduleKind, WgmmaPlan};
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
        match self.schedule {
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

/// The wgmmas of one k tile: per k step (k16, or k32 of fp8) the B descriptor, then per wgmma row of 64 the A
/// descriptor and the instruction. Each instruction names its N/2 accumulators, so these
/// lines are most of the kernel's text; they are written here rather than through tera for
/// the same reason as [`fma_block`].
fn wgmma_block(plan: &WgmmaPlan) -> String {
    // fp8 wgmma has no transpose immediates: its operands are K-major.
    let transpose = match plan.transpose_immediates {
        Some((a, b)) => format!(", {a}, {b}"),
        None => String::new(),
    };
    let mut text = String::new();
    for (index, step) in plan.k_steps.iter().enumerate() {
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
            let _ = writeln!(
                text,
                "\t{}\t{{ {} }}, %a_desc, %b_desc, {scale_d}, 1, 1{transpose};",
                plan.wgmma_instructions[mma.piece], mma.accumulators
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
