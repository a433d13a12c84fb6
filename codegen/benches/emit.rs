//! Emit time per catalog kernel (parse + validate + plan + render): the budget is < 1 ms.
//! Run with `cargo bench -p gemm-codegen --bench emit`.

use gemm_codegen::catalog::CATALOG;

fn main() {
    divan::main();
}

#[divan::bench(args = CATALOG.iter().map(|entry| entry.name))]
fn emit(bencher: divan::Bencher, name: &str) {
    let spec = gemm_codegen::catalog::find(name)
        .expect("catalog name")
        .spec;
    // Warm the template cache once, as every process after its first kernel would.
    gemm_codegen::emit_str(spec).expect("catalog specs are valid");
    bencher.bench(|| gemm_codegen::emit_str(divan::black_box(spec)).expect("valid"));
}
