//! The PTX writer: renders a [`KernelPlan`] through the family's tera templates.
//! Templates are compiled into the binary, so emitting needs no files at run time.

use crate::plan::math_only::MathOnlyPlan;
use crate::plan::mma_sync::MmaOp;
use crate::plan::simt::FmaBlock;
use crate::plan::wgmma::WgmmaPlan;
use crate::plan::{FamilyPlan, KernelPlan};
use std::fmt::Write;
use std::sync::OnceLock;
use tera::{Context, Tera};

const TEMPLATES: &[(&str, &str)] = &[
    (
        "common/header.ptx.tera",
        include_str!("../templates/common/header.ptx.tera"),
    ),
    (
        "common/schedule.ptx.tera",
        include_str!("../templates/common/schedule.ptx.tera"),
    ),
    (
        "common/batch.ptx.tera",
        include_str!("../templates/common/batch.ptx.tera"),
    ),
    (
        "common/entry.ptx.tera",
        include_str!("../templates/common/entry.ptx.tera"),
    ),
    (
        "common/math_only.ptx.tera",
        include_str!("../templates/common/math_only.ptx.tera"),
    ),
    (
        "simt/partials.ptx.tera",
        include_str!("../templates/simt/partials.ptx.tera"),
    ),
    (
        "simt/kernel.ptx.tera",
        include_str!("../templates/simt/kernel.ptx.tera"),
    ),
    (
        "mma_sync/partials.ptx.tera",
        include_str!("../templates/mma_sync/partials.ptx.tera"),
    ),
    (
        "mma_sync/kernel.ptx.tera",
        include_str!("../templates/mma_sync/kernel.ptx.tera"),
    ),
    (
        "wgmma/partials.ptx.tera",
        include_str!("../templates/wgmma/partials.ptx.tera"),
    ),
    (
        "wgmma/kernel.ptx.tera",
        include_str!("../templates/wgmma/kernel.ptx.tera"),
    ),
    (
        "wgmma/math_only.ptx.tera",
        include_str!("../templates/wgmma/math_only.ptx.tera"),
    ),
];

fn templates() -> &'static Tera {
    static TERA: OnceLock<Tera> = OnceLock::new();
    TERA.get_or_init(|| {
        let mut tera = Tera::default();
        tera.add_raw_templates(TEMPLATES.iter().copied())
            .unwrap_or_else(|error| panic!("built-in PTX templates must parse: {error:?}"));
        tera
    })
}

/// Writes the plan as PTX text. Deterministic: the same plan gives byte-identical text.
pub fn write(plan: &KernelPlan) -> String {
    let mut context = Context::new();
    let template = match &plan.family {
        FamilyPlan::Simt(simt) => {
            context.insert("fma_text", &math_blocks(plan));
            context.insert("consumer", &simt.consumer);
            context.insert("epilogue", &simt.epilogue);
            "simt/kernel.ptx.tera"
        }
        FamilyPlan::MmaSync(mma) => {
            context.insert("mma_text", &math_blocks(plan));
            context.insert("k_steps", &mma.k_steps_plan);
            context.insert("epilogue", &mma.epilogue);
            "mma_sync/kernel.ptx.tera"
        }
        FamilyPlan::Wgmma(wgmma) => {
            context.insert("math_text", &wgmma_block(wgmma));
            "wgmma/kernel.ptx.tera"
        }
    };
    context.insert("plan", plan);
    context.insert("version", env!("CARGO_PKG_VERSION"));
    tidy(&render(template, &context))
}

/// The plan's main-loop math alone (see [`MathOnlyPlan`]): the same instruction blocks the
/// kernel writes, looped with no memory traffic.
pub fn write_math_only(plan: &KernelPlan, math: &MathOnlyPlan) -> String {
    let mut context = Context::new();
    context.insert("blocks", &math_blocks(plan));
    context.insert("m", math);
    context.insert("plan", plan);
    context.insert("version", env!("CARGO_PKG_VERSION"));
    let template = match &plan.family {
        FamilyPlan::Wgmma(_) => "wgmma/math_only.ptx.tera",
        FamilyPlan::Simt(_) | FamilyPlan::MmaSync(_) => "common/math_only.ptx.tera",
    };
    tidy(&render(template, &context))
}

/// The family's math blocks: the FFMAs of each k position of a group (SIMT) or the mma.sync
/// instructions of each k step.
fn math_blocks(plan: &KernelPlan) -> Vec<String> {
    match &plan.family {
        FamilyPlan::Simt(simt) => simt.consumer.fma_blocks.iter().map(fma_block).collect(),
        FamilyPlan::MmaSync(mma) => mma
            .k_steps_plan
            .iter()
            .map(|step| mma_block(mma.mma_instruction, &step.mmas))
            .collect(),
        FamilyPlan::Wgmma(wgmma) => vec![wgmma_block(wgmma)],
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

/// The wgmmas of one k tile: per k16 step the B descriptor, then per wgmma row of 64 the A
/// descriptor and the instruction. Each instruction names its N/2 accumulators, so these
/// lines are most of the kernel's text; they are written here rather than through tera for
/// the same reason as [`fma_block`].
fn wgmma_block(plan: &WgmmaPlan) -> String {
    let transpose = (plan.a_major.transpose_flag(), plan.b_major.transpose_flag());
    let mut text = String::new();
    for (index, step) in plan.k_steps.iter().enumerate() {
        let scale_d = if step.first { "%p_accumulate" } else { "1" };
        let _ = writeln!(text, "\t// k step {index}");
        descriptor(
            &mut text,
            "%b_desc",
            "%b_stage",
            step.b_offset_units,
            "%b_hi",
        );
        for mma in &step.mmas {
            descriptor(
                &mut text,
                "%a_desc",
                "%a_stage",
                mma.a_offset_units,
                "%a_hi",
            );
            let _ = writeln!(
                text,
                "\t{}\t{{ {} }}, %a_desc, %b_desc, {scale_d}, 1, 1, {}, {};",
                plan.wgmma_instruction, mma.accumulators, transpose.0, transpose.1
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

fn render(template: &str, context: &Context) -> String {
    templates()
        .render(template, context)
        .unwrap_or_else(|error| panic!("rendering {template} failed: {error:?}"))
}

/// Drops trailing spaces and runs of blank lines that template control flow leaves behind.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            if !blank && !out.is_empty() {
                out.push('\n');
            }
            blank = true;
        } else {
            out.push_str(line);
            out.push('\n');
            blank = false;
        }
    }
    out
}
