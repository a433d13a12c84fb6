//! The mma.sync family's part of the PTX writer: its templates, their context and the
//! mma.sync instruction blocks.

use super::{MmaOp, MmaSyncPlan};
use std::fmt::Write;
use tera::Context;

/// This family's templates, compiled into the binary.
pub const TEMPLATES: &[(&str, &str)] = &[
    (
        "mma_sync/partials.ptx.tera",
        include_str!("../../../templates/mma_sync/partials.ptx.tera"),
    ),
    (
        "mma_sync/kernel.ptx.tera",
        include_str!("../../../templates/mma_sync/kernel.ptx.tera"),
    ),
];

impl MmaSyncPlan {
    /// Fills the kernel template's context; returns the template's name.
    pub fn kernel_template(&self, context: &mut Context) -> &'static str {
        context.insert("mma_text", &self.math_blocks());
        context.insert("k_steps", &self.k_steps_plan);
        context.insert("epilogue", &self.epilogue);
        "mma_sync/kernel.ptx.tera"
    }

    /// The mma.sync instructions of each k step.
    pub fn math_blocks(&self) -> Vec<String> {
        self.k_steps_plan
            .iter()
            .map(|step| mma_block(&self.mma_instruction, &step.mmas))
            .collect()
    }
}

/// The mma.sync instructions of one k step: a warp tile's worth (up to 32 per step), written
/// here rather than through tera for the same reason as [`fma_block`].
fn mma_block(instruction: &str, mmas: &[MmaOp]) -> String {
    let mut text = String::with_capacity(mmas.len() * 120);
    for mma in mmas {
        let _ = writeln!(
            text,
            "\t{instruction}\t{{ {} }}, {{ {} }}, {{ {} }}, {{ {} }};",
            mma.d, mma.a, mma.b, mma.d
        );
    }
    text.trim_end().to_string()
}
