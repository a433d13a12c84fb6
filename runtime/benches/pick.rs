//! Host time of picking a kernel: warm (a problem picked before: one lookup) and cold (the cost
//! model over the Hopper set's candidates, every member in four layouts). The entry point's
//! budget for a warm pick is 1 µs. Run with `cargo bench -p gemm-runtime --bench pick` (no GPU
//! needed).

use gemm_runtime::sets::SM90_16BIT;
use gemm_runtime::{DType, Layout, Picker, Problem};

fn main() {
    divan::main();
}

fn picker() -> Picker {
    let specs: Vec<_> = SM90_16BIT
        .specs(DType::Bf16, DType::Bf16)
        .iter()
        .map(|text| {
            let valid = gemm_dsl::check_str(text).expect("valid");
            let launch = gemm_codegen::emit::launch_of(&valid);
            (valid, launch)
        })
        .collect();
    Picker::new(&specs, gemm_dsl::pick::DeviceModel::h100_sxm())
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
