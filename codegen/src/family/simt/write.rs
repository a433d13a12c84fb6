//! The SIMT family's part of the PTX writer: its templates, their context and the FFMA
//! blocks.

use super::{FmaBlock, SimtPlan};
use std::fmt::Write;
use tera::Context;

/// This family's templates, compiled into the binary.
pub const TEMPLATES: &[(&str, &str)] = &[
    (
        "simt/partials.ptx.tera",
        include_str!("../../../templates/simt/partials.ptx.tera"),
    ),
    (
        "simt/kernel.ptx.tera",
        include_str!("../../../templates/simt/kernel.ptx.tera"),
    ),
];

impl SimtPlan {
    /// Fills the kernel template's context; returns the template's name.
    pub fn kernel_template(&self, context: &mut Context) -> &'static str {
        context.insert("fma_text", &self.math_blocks());
        context.insert("consumer", &self.consumer);
        context.insert("epilogue", &self.epilogue);
        "simt/kernel.ptx.tera"
    }

    /// The FFMAs of each k position of a group.
    pub fn math_blocks(&self) -> Vec<String> {
        self.consumer.fma_blocks.iter().map(fma_block).collect()
    }
}

/// The FFMAs of one k step. They are most of a SIMT kernel's text (TM·TN lines per k step)
/// and identical from k group to k group, so each block is written once, here, rather than
/// through tera, whose per-variable lookups would dominate the emit time; the kernel template
/// places the blocks.
fn fma_block(block: &FmaBlock) -> String {
    let mut text = String::with_capacity(block.fmas.len() * 48);
    for fma in &block.fmas {
        let _ = writeln!(
            text,
            "\tfma.rn.f32\t%acc{}, %fa{}, %fb{}, %acc{};",
            fma.acc, fma.a, fma.b, fma.acc
        );
    }
    text.trim_end().to_string()
}
