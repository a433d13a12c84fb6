//! Plan of the Hopper family (`mma: wgmma`).
//!
//! Warpgroup 0 is the producer: one thread walks the block's k tiles (and, persistent, its
//! output tiles), waits for a free stage of the ring, announces the stage's bytes on its
//! *full* mbarrier (`arrive.expect_tx`) and issues the TMA boxes of A and B into it. Warpgroups
//! 1.. are consumers: each waits for a stage's full barrier, issues the k tile's wgmmas on
//! its rows straight from shared memory ([`descriptor`]), keeps one group in flight, and once
//! the previous k tile's group has retired (`wgmma.wait_group 1`) releases that stage on its
//! *empty* mbarrier, one arrival per warp. The ring's slots and phases are the shared
//! [`Ring`]`<`[`Mbarriers`]`>`; the stores of the accumulators, in [`epilogue`], take a path of
//! [`crate::plan::store`].
//!
//! # How the kernel is composed
//!
//! [`WgmmaPlan`] has four parts, each built by its own short function; they hold numbers,
//! booleans and enums, never PTX text:
//!
//! - [`MainLoop`] ([`main_loop`]): the tile, the ring, the TMA boxes of a stage ([`copy`]),
//!   the wgmma descriptors and k steps ([`descriptor`]), fp8 promotion and block scales
//!   ([`promotion`]), who releases a slot.
//! - [`SchedulePlan`] ([`schedule`]): the [`ScheduleKind`], the persistent walk, a cluster's
//!   multicast, the batch, the ping-pong turns, the stream-K tail.
//! - [`WgmmaEpilogue`] ([`epilogue`]): direct or TMA stores of C, the fused epilogue, C-in.
//! - [`LaunchPlan`] ([`launch`]): threads, registers and their split, the tensor maps, the
//!   kernel's parameters.
//!
//! The writer ([`write`](mod@write)) picks the entry template of the plan's
//! [`ScheduleKind`] and adds the words the templates print that the plan holds as numbers
//! and enums (the wgmma instructions of a k tile, the header's notes). Each schedule's kernel
//! is one entry template under `templates/wgmma/kernel/`, read top to bottom, which calls the
//! partials of its schedule under `templates/wgmma/schedule/` and the partials every schedule
//! shares:
//!
//! | [`ScheduleKind`] | entry template | schedule partials |
//! |---|---|---|
//! | `TilePerBlock` | `kernel/tile_per_block` | none (the tile from the grid: `block::tile_origin`) |
//! | `Persistent` | `kernel/persistent` | `schedule/walk` |
//! | `PingPong` | `kernel/pingpong` | `schedule/walk`, `schedule/pingpong` |
//! | `StreamK` | `kernel/stream_k` | `schedule/walk`, `schedule/stream_k` |
//!
//! The shared partials, by role: `block` (the header, the entry, both roles' registers and
//! setup), `ring` (barrier init, waits, slot steps), `producer` (a tile's TMA fills, batch
//! coordinates, a cluster's drain), `consumer` (registers, descriptors, the wgmma k loop,
//! slot releases), `promotion` (fp8 promotion, block scales of both roles) and `epilogue`
//! (direct and TMA stores, C-in). A schedule's own steps sit in its partial: the ping-pong
//! hand-over is `hand_over` in `schedule/pingpong`, the stream-K fixup `fixup` in
//! `schedule/stream_k`. A new schedule is a [`ScheduleKind`] variant, its entry template
//! and its partial; optional features (cluster, promotion, TMA stores, fused epilogue) stay
//! conditionals inside the partial that owns them.
//!
//! [`Ring`]: crate::plan::Ring
//! [`Mbarriers`]: crate::plan::Mbarriers

pub mod copy;
pub mod descriptor;
pub mod epilogue;
pub mod grouped;
pub mod launch;
pub mod main_loop;
pub mod promotion;
pub mod schedule;

mod explain;
mod probe;
pub mod write;

pub use copy::{BoxLoad, ClusterPlan};
pub use descriptor::{WgmmaKStep, WgmmaOp};
pub use epilogue::{BoxOrigin, CInLoads, CInPrefetch, WgmmaEpilogue};
use gemm_dsl::abi::{Opcode, SassCheck};
use gemm_dsl::family::wgmma::{WgmmaGeometry, WGMMA_M};
use gemm_dsl::{DType, ValidSpec};
pub use launch::{LaunchPlan, RegisterSplit};
pub use main_loop::{MainLoop, SlotRelease};
pub use promotion::Promotion;
pub use schedule::{PartialVector, PingPong, ScheduleKind, SchedulePlan, StreamK};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Every number the wgmma templates print, in the four parts of the kernel.
#[derive(Clone, Debug, Serialize)]
pub struct WgmmaPlan {
    /// The validated geometry the plan was made from (for `explain`; templates never read it).
    #[serde(skip)]
    pub geometry: WgmmaGeometry,
    pub main_loop: MainLoop,
    pub schedule: SchedulePlan,
    pub epilogue: WgmmaEpilogue,
    pub launch: LaunchPlan,
}

pub fn plan(valid: &ValidSpec, g: &WgmmaGeometry) -> WgmmaPlan {
    let spec = &valid.spec;
    let ring = main_loop::ring(g, spec.dtype.size_bytes(), spec.stages);
    // C-in's mbarriers follow the ring's.
    let epilogue = WgmmaEpilogue::new(g, spec, ring.bytes_with_barriers());
    let main_loop = MainLoop::new(g, spec, ring, &epilogue);
    // A grouped walk's tables follow everything else: the ring's barriers, C-in's barriers
    // (`scale: alpha_beta` under TMA stores) and (fp8) the block scales' slots.
    let c_in_barriers_end = epilogue.c_in_loads.as_ref().map_or(0, |loads| {
        loads.barriers_offset + loads.consumer_bytes * g.consumers
    });
    let block_slots_end = main_loop
        .promotion
        .as_ref()
        .and_then(|promotion| promotion.block.as_ref())
        .map_or(0, |block| {
            block.slots_offset + block.slot_bytes * main_loop.ring.stages
        });
    let tables_offset = [
        main_loop.ring.bytes_with_barriers(),
        c_in_barriers_end,
        block_slots_end,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
    .next_multiple_of(16);
    WgmmaPlan {
        geometry: *g,
        main_loop,
        schedule: SchedulePlan::new(g, spec, tables_offset),
        epilogue,
        launch: LaunchPlan::new(g, spec),
    }
}

impl WgmmaPlan {
    /// The wgmma's SASS opcode with its shape and types as nvdisasm prints it:
    /// `HGMMA.64x256x16.F32.BF16` for bf16, `HGMMA.64x256x16.F32` for f16,
    /// `QGMMA.64x256x32.F32.E4M3.E4M3` for fp8 (A's type, then B's).
    pub fn gmma_variant(&self) -> &'static str {
        let k = self.main_loop.wgmma_k;
        // A row of two pieces promises its first (the wider) one.
        let n = self.main_loop.wgmma_widths[0];
        let (a, b) = (self.main_loop.dtype, self.main_loop.b_dtype);
        let text = match a {
            DType::Bf16 => format!("HGMMA.{WGMMA_M}x{n}x{k}.F32.BF16"),
            DType::F16 => format!("HGMMA.{WGMMA_M}x{n}x{k}.F32"),
            _ => format!(
                "QGMMA.{WGMMA_M}x{n}x{k}.F32.{}.{}",
                a.name().to_uppercase(),
                b.name().to_uppercase()
            ),
        };
        interned(text)
    }
}

/// The Hopper kernel's SASS: TMA loads, mbarrier traffic, the HGMMA shape, `setmaxnreg`
/// where the registers are split.
pub fn sass_promises(plan: &WgmmaPlan) -> Vec<SassCheck> {
    // Operands come by TMA alone; block scales come by `cp.async`.
    let block_scales = plan
        .main_loop
        .promotion
        .as_ref()
        .is_some_and(|promotion| promotion.block.is_some());
    let mut checks = vec![
        SassCheck::Present(Opcode::Utmaldg),
        SassCheck::Present(Opcode::Syncs),
        if block_scales {
            SassCheck::Present(Opcode::Ldgsts)
        } else {
            SassCheck::Absent(Opcode::Ldgsts)
        },
    ];
    checks.extend(math_promises(plan));
    if plan.launch.register_split.is_some() {
        checks.push(SassCheck::Present(Opcode::Usetmaxreg));
    }
    if plan.epilogue.path.tma().is_some() {
        checks.push(SassCheck::Present(Opcode::Stsm));
        checks.push(SassCheck::Present(Opcode::Utmastg));
    }
    checks
}

/// The GMMA of the kernel's exact shape and types: HGMMA for 16-bit inputs (f16 has no type
/// suffix, so only the exact opcode tells it from bf16), QGMMA for fp8.
pub fn math_promises(plan: &WgmmaPlan) -> Vec<SassCheck> {
    let variant = plan.gmma_variant();
    match plan.main_loop.dtype {
        DType::F16 => vec![
            SassCheck::Present(Opcode::Hgmma),
            SassCheck::PresentExact(variant),
        ],
        DType::Bf16 => vec![
            SassCheck::Present(Opcode::Hgmma),
            SassCheck::PresentVariant(variant),
        ],
        _ => vec![
            SassCheck::Present(Opcode::Qgmma),
            SassCheck::PresentVariant(variant),
            SassCheck::Absent(Opcode::Hgmma),
        ],
    }
}

/// `text` as a `'static` string (SASS promises are plain data): each distinct GMMA variant,
/// at most one per legal N and type, is made once per process.
fn interned(text: String) -> &'static str {
    static VARIANTS: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut variants = VARIANTS
        .get_or_init(Default::default)
        .lock()
        .expect("no panics while held");
    variants
        .entry(text.clone())
        .or_insert_with(|| Box::leak(text.into_boxed_str()))
}

/// A wgmma spec of the tests: `text` after a name, `sm_90a` and `mma: wgmma`.
#[cfg(test)]
fn test_spec(text: &str) -> (ValidSpec, WgmmaGeometry) {
    let text = format!("name: w, arch: sm_90a, mma: wgmma, {text}");
    let valid = gemm_dsl::check_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let gemm_dsl::Family::Wgmma(g) = valid.family else {
        panic!("{text} is not a wgmma spec");
    };
    (valid, g)
}

#[cfg(test)]
mod tests;
