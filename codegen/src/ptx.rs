//! The PTX writer: renders a [`KernelPlan`] through the family's tera templates (each
//! family's `write` module names its templates, fills their context and writes the
//! instruction blocks that are most of a kernel's text).
//! Templates are compiled into the binary, so emitting needs no files at run time.

use crate::family::{FamilyPlan, KernelPlan};
use crate::plan::math_only::MathOnlyPlan;
use std::sync::OnceLock;
use tera::{Context, Tera};

/// Macros and headers every family's templates import.
const COMMON_TEMPLATES: &[(&str, &str)] = &[
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
        "common/copy.ptx.tera",
        include_str!("../templates/common/copy.ptx.tera"),
    ),
    (
        "common/pipeline.ptx.tera",
        include_str!("../templates/common/pipeline.ptx.tera"),
    ),
    (
        "common/entry.ptx.tera",
        include_str!("../templates/common/entry.ptx.tera"),
    ),
    (
        "common/epilogue.ptx.tera",
        include_str!("../templates/common/epilogue.ptx.tera"),
    ),
    (
        "common/math_only.ptx.tera",
        include_str!("../templates/common/math_only.ptx.tera"),
    ),
];

fn templates() -> &'static Tera {
    static TERA: OnceLock<Tera> = OnceLock::new();
    TERA.get_or_init(|| {
        let mut tera = Tera::default();
        let family_templates = FamilyPlan::TEMPLATES.iter().flat_map(|set| set.iter());
        tera.add_raw_templates(COMMON_TEMPLATES.iter().chain(family_templates).copied())
            .unwrap_or_else(|error| panic!("built-in PTX templates must parse: {error:?}"));
        tera
    })
}

/// Writes the plan as PTX text. Deterministic: the same plan gives byte-identical text.
pub fn write(plan: &KernelPlan) -> String {
    let mut context = Context::new();
    let template = plan.family.kernel_template(&mut context);
    context.insert("plan", plan);
    context.insert("version", env!("CARGO_PKG_VERSION"));
    tidy(&render(template, &context))
}

/// The plan's main-loop math alone (see [`MathOnlyPlan`]): the same instruction blocks the
/// kernel writes, looped with no memory traffic.
pub fn write_math_only(plan: &KernelPlan, math: &MathOnlyPlan) -> String {
    let mut context = Context::new();
    context.insert("blocks", &plan.family.math_blocks());
    context.insert("m", math);
    context.insert("plan", plan);
    context.insert("version", env!("CARGO_PKG_VERSION"));
    tidy(&render(plan.family.math_only_template(), &context))
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

/// The fused epilogue's activation of register `x`, as the kernels print it (for the CPU
/// test that runs it).
#[cfg(test)]
pub(crate) fn activation_text(e: &crate::plan::epilogue::FusedEpilogue, x: &str) -> String {
    let mut tera = templates().clone();
    tera.add_raw_template(
        "activation_test",
        "{% import \"common/epilogue.ptx.tera\" as ep %}{{ ep::activate(e=e, x=x) }}",
    )
    .expect("the test template parses");
    let mut context = Context::new();
    context.insert("e", e);
    context.insert("x", x);
    tera.render("activation_test", &context)
        .expect("the activation renders")
}
