//! Host time of picking a kernel: warm (a problem picked before: one lookup) and cold (the cost
//! model over the Hopper set's candidates, every member in four layouts), and of what a warm
//! `Matmul::run` does before the driver's launch call: the memoized pick and the launch checks
//! (sizes, strides, buffer lengths, alignment, the grid) for the picked kernel. The rest of a
//! call is driver work (tensor maps, kept per kernel after the first launch, and
//! `cuLaunchKernel`), which `gemm-bench --host-cost` measures on a GPU. The entry point's
//! budget for a warm pick is 1 µs. Run with `cargo bench -p gemm-runtime --bench pick` (no GPU
//! needed).

use gemm_dsl::abi::LaunchShape;
use gemm_runtime::check::{check_launch, Batch, LaunchArgs, OperandArg};
use gemm_runtime::sets::SM90_16BIT;
use gemm_runtime::{DType, Layout, Picker, Problem};

fn main() {
    divan::main();
}

fn picker() -> Picker {
    picker_and_launches().0
}

/// The Hopper set's picker and each member's launch shape.
fn picker_and_launches() -> (Picker, Vec<LaunchShape>) {
    let specs: Vec<_> = SM90_16BIT
        .specs(DType::Bf16, DType::Bf16)
        .iter()
        .map(|text| {
            let valid = gemm_dsl::check_str(text).expect("valid");
            let launch = gemm_codegen::emit::launch_of(&valid);
            (valid, launch)
        })
        .collect();
    let launches = specs.iter().map(|(_, launch)| *launch).collect();
    (
        Picker::new(&specs, gemm_dsl::pick::DeviceModel::h100_sxm()),
        launches,
    )
}

#[divan::bench]
fn warm(bencher: divan::Bencher) {
    let picker = picker();
    let problem = Problem::new(16, 4096, 14336, Layout::RowRow);
    picker.pick(&problem);
    bencher.bench(|| picker.pick(divan::black_box(&problem)));
}

#[divan::bench]
fn cold_model(bencher: divan::Bencher) {
    let picker = picker();
    let problem = Problem::new(16, 4096, 14336, Layout::RowRow);
    bencher.bench(|| {
        gemm_dsl::pick::pick(
            picker.candidates(),
            divan::black_box(&problem),
            picker.device(),
        )
    });
}

/// Arguments of a packed bf16 `m x n x k` product at 256-byte-aligned addresses.
fn arguments(m: u32, n: u32, k: u32) -> LaunchArgs {
    let operand = |address: u64, rows: u32, cols: u32| OperandArg {
        address,
        len: (rows * cols) as usize,
        ld: cols,
    };
    LaunchArgs {
        m,
        n,
        k,
        a: operand(0x7f00_0000_0000, m, k),
        b: operand(0x7f10_0000_0000, k, n),
        c: operand(0x7f20_0000_0000, m, n),
        batch: Batch::ONE,
    }
}

#[divan::bench(args = [(16, 4096, 4096), (512, 28672, 4096), (4096, 4096, 4096)])]
fn pick_and_check(bencher: divan::Bencher, (m, n, k): (u32, u32, u32)) {
    let (picker, launches) = picker_and_launches();
    let problem = Problem::new(m, n, k, Layout::RowRow);
    picker.pick(&problem).expect("a pick");
    let args = arguments(m, n, k);
    let resident_blocks = 132;
    bencher.bench(|| {
        let pick = picker.pick(divan::black_box(&problem)).expect("a pick");
        check_launch(
            &launches[pick.index],
            divan::black_box(&args),
            resident_blocks,
        )
        .expect("a valid launch")
    });
}
