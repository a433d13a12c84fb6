//! The `gemm-codegen` binary as a user runs it: output, diagnostics and exit codes.

use std::process::{Command, Output};

fn gemm_codegen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gemm-codegen"))
        .args(args)
        .output()
        .expect("gemm-codegen runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn emit_without_a_spec_writes_the_default_kernel() {
    let output = gemm_codegen(&["emit"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let ptx = stdout(&output);
    assert!(ptx.contains(".visible .entry gemm_f32("));
    assert!(ptx.contains("cp.async.cg.shared.global"));
}

#[test]
fn emit_writes_a_file_from_a_spec_file() {
    let dir = std::env::temp_dir().join(format!("gemm-codegen-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("k.spec");
    std::fs::write(
        &spec,
        "// a spec file\nname: from_file, arch: sm_86,\ncopy: sync, stages: 2\n",
    )
    .unwrap();
    let out = dir.join("k.ptx");
    let output = gemm_codegen(&[
        "emit",
        &format!("@{}", spec.display()),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let ptx = std::fs::read_to_string(&out).unwrap();
    assert!(ptx.contains(".target sm_86"));
    assert!(ptx.contains("ld.global.v4.f32"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_spec_prints_the_diagnostic_with_a_caret_and_exits_2() {
    let output = gemm_codegen(&["check", "name: k, arch: sm_80, tile: 128x128x32, stages: 6"]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.starts_with("error: shared memory over budget for sm_80"),
        "{text}"
    );
    assert!(text.contains("1 | name: k, arch: sm_80, tile: 128x128x32, stages: 6"));
    assert!(text.contains("^ 6 stages x 32768 B = 196608 B"), "{text}");
    assert!(text.contains("A tile 128x32 f32 = 16384 B/stage"), "{text}");
    assert!(text.contains("help: stages: 5 fits (163840 B)"), "{text}");
}

#[test]
fn explain_prints_the_ledger_of_an_overflowing_spec_as_an_error() {
    let output = gemm_codegen(&[
        "explain",
        "name: k, arch: sm_86, tile: 128x128x32, stages: 4",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("help: stages: 3 fits"),
        "{}",
        stderr(&output)
    );
}

/// The occupancy line counts the registers ptxas allocated (128 for this kernel with the
/// pinned tools): 256 threads of 128 take half the register file.
#[test]
fn explain_computes_occupancy_from_ptxas_registers() {
    let output = gemm_codegen(&["explain", "simt_128x128x8_cp2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("ptxas: 128 registers"), "{text}");
    assert!(
        text.contains("occupancy: 2 block(s)/SM, 16 warps/SM (limited by registers) at ptxas's 128 registers/thread"),
        "{text}"
    );
}

#[test]
fn check_fills_in_defaults() {
    let output = gemm_codegen(&["check", "name: k, arch: sm_80"]);
    assert!(output.status.success());
    assert!(stdout(&output).contains("tile: 128x128x8, warps: 4x2"));
}

#[test]
fn missing_tools_exit_3_with_one_sentence_on_how_to_install() {
    let output = Command::new(env!("CARGO_BIN_EXE_gemm-codegen"))
        .args(["sass", "simt_128x128x8_cp2"])
        .env("GEMM_DSL_TOOLS", "/nonexistent-gemm-dsl-tools")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stderr(&output).contains("scripts/install-tools"),
        "{}",
        stderr(&output)
    );
}

/// A tool path set through its variable but wrong: the message names the variable, the path
/// and how to install the tools, and the exit status is the missing tools' 3.
#[test]
fn a_wrong_tool_variable_is_named_with_its_path_and_exits_3() {
    for (variable, path) in [
        ("GEMM_DSL_PTXAS", "/nonexistent/ptxas"),
        ("GEMM_DSL_NVDISASM", "/nonexistent/nvdisasm"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_gemm-codegen"))
            .args(["sass", "simt_128x128x8_cp2", "--summary"])
            .env(variable, path)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
        let message = stderr(&output);
        for needle in [
            &format!("{variable} is `{path}`, which is no file"),
            "scripts/install-tools",
        ] {
            assert!(message.contains(needle), "{needle}: {message}");
        }
    }
}

/// `--arch` that cannot run the spec is refused before ptxas runs, with the checks' own
/// diagnostics, or the rule of PTX compiling forward, and exit status 2.
#[test]
fn sass_refuses_an_arch_that_cannot_run_the_spec() {
    for (args, expected) in [
        (
            &[
                "sass",
                "wgmma_bf16_128x256x64_s4_persistent",
                "--arch",
                "sm_80",
            ][..],
            &[
                "`wgmma_bf16_128x256x64_s4_persistent` cannot run on sm_80 (--arch)",
                "`mma: wgmma` needs arch sm_90a, not sm_80",
            ][..],
        ),
        (
            // 163 KB of shared memory: over sm_86's 99 KB per block.
            &[
                "sass",
                "name: k, arch: sm_80, tile: 128x128x32, stages: 5",
                "--arch",
                "sm_86",
            ],
            &["shared memory over budget for sm_86"],
        ),
        (
            &["sass", "simt_128x128x32_cp3_h100", "--arch", "sm_80"],
            &[
                "`simt_128x128x32_cp3_h100`'s PTX (.target sm_90) does not compile for sm_80",
                "help: --arch sm_90 or newer",
            ],
        ),
    ] {
        let output = gemm_codegen(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(!message.contains("ptxas"), "{args:?}: {message}");
        for needle in expected {
            assert!(message.contains(needle), "{args:?}: {needle}: {message}");
        }
    }
    // Forward is fine: the Ampere kernel as Hopper's driver would compile it.
    let output = gemm_codegen(&["sass", "simt_128x128x8_cp2", "--arch", "sm_90", "--summary"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("simt_128x128x8_cp2 for sm_90:"));
}

#[test]
fn sass_highlights_and_checks_the_promise() {
    let output = gemm_codegen(&["sass", "simt_128x128x8_cp2"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("LDGSTS.E.BYPASS.128"), "{text}");
    assert!(text.contains("<=="));
    assert!(text.contains("promised SASS: ok"));
}

/// The summary counts what proves a Hopper kernel's path: HGMMA, the TMA's loads and stores,
/// the mbarriers (SYNCS) and the register split.
#[test]
fn sass_summary_counts_the_hopper_paths() {
    let output = gemm_codegen(&["sass", "wgmma_bf16_128x256x64_s4_persistent", "--summary"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for opcode in ["HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"] {
        let count: usize = text
            .lines()
            .find_map(|line| line.strip_prefix(opcode)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {opcode} line: {text}"));
        assert!(count > 0, "{opcode}: {text}");
    }
}

/// A broken promise is a failure: `nvdisasm` is replaced by one that drops every LDGSTS from
/// the real listing, so the cp.async kernel's SASS breaks its LDGSTS promise.
#[cfg(unix)]
#[test]
fn sass_exits_1_when_the_promise_is_violated() {
    use std::os::unix::fs::PermissionsExt;
    let nvdisasm = gemm_codegen::sass::find_tool("nvdisasm").expect("run scripts/install-tools");
    let dir = std::env::temp_dir().join(format!("gemm-codegen-violated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let without_ldgsts = dir.join("nvdisasm");
    std::fs::write(
        &without_ldgsts,
        format!(
            "#!/bin/sh\nset -e\n'{}' \"$@\" > '{}/listing'\ngrep -v LDGSTS '{}/listing'\n",
            nvdisasm.display(),
            dir.display(),
            dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&without_ldgsts, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_gemm-codegen"))
        .args(["sass", "simt_128x128x8_cp2", "--summary"])
        .env("GEMM_DSL_NVDISASM", &without_ldgsts)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stdout(&output)
            .contains("promised SASS: VIOLATED: expected LDGSTS in the SASS, found none"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output)
            .starts_with("error: simt_128x128x8_cp2's SASS for sm_80 breaks its promise"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn diff_shows_the_ptx_difference() {
    let output = gemm_codegen(&["diff", "simt_128x128x8_cp2", "simt_128x128x8_sync2"]);
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.contains("--- simt_128x128x8_cp2"));
    assert!(
        text.contains("-\t@%p_load cp.async.cg.shared.global"),
        "{text}"
    );
    assert!(text.contains("+\t@%p_load ld.global.v4.f32"));
}

#[test]
fn catalog_lists_every_spec() {
    let output = gemm_codegen(&["catalog"]);
    let text = stdout(&output);
    for entry in gemm_codegen::catalog::CATALOG {
        assert!(text.contains(entry.name));
    }
}

/// The name column is as wide as the longest name (fp8 names pass 28 characters): every
/// summary and spec starts in the same column, one space after the longest name.
#[test]
fn catalog_columns_fit_the_longest_name() {
    use gemm_codegen::catalog::{CATALOG, FP8};
    let text = stdout(&gemm_codegen(&["catalog"]));
    let entries: Vec<_> = CATALOG.iter().chain(FP8).collect();
    let longest = entries.iter().map(|entry| entry.name.len()).max().unwrap();
    assert!(longest > 28, "the test needs a name over the old width");
    for entry in entries {
        for (line, text_in_column) in [
            (format!("{} ", entry.name), entry.summary),
            (" ".repeat(longest + 1), entry.spec),
        ] {
            let expected = format!("{line:<width$}{text_in_column}", width = longest + 1);
            assert!(
                text.lines().any(|shown| shown == expected),
                "{expected:?} in\n{text}"
            );
        }
    }
}

#[test]
fn every_spec_argument_is_described_in_help() {
    for (command, arguments) in [
        ("check", &["<SPEC>"][..]),
        ("explain", &["<SPEC>"]),
        ("sass", &["<SPEC>"]),
        ("diff", &["<SPEC_A>", "<SPEC_B>"]),
        ("emit", &["[SPEC]"]),
    ] {
        let text = stdout(&gemm_codegen(&[command, "--help"]));
        let described: Vec<&str> = text
            .lines()
            .skip_while(|line| *line != "Arguments:")
            .skip(1)
            .take_while(|line| !line.is_empty())
            .collect();
        for argument in arguments {
            let line = described
                .iter()
                .find(|line| line.trim_start().starts_with(argument))
                .unwrap_or_else(|| panic!("{command}: no {argument} in\n{text}"));
            assert!(
                line.trim_start()[argument.len()..].trim().len() > 10,
                "{command}: {argument} has no description: {line:?}"
            );
        }
    }
    let check = stdout(&gemm_codegen(&["check", "--help"]));
    assert!(
        check.contains("Spec text, @FILE, or a catalog name"),
        "{check}"
    );
}

#[test]
fn pick_prints_a_spec_that_check_accepts_then_its_reasons() {
    // (arguments, a key of the spec the model picks)
    for (args, expected) in [
        // Decode: the swapped product's 64x16 tile, in the layout of the swapped problem (an
        // `rr` problem swapped is `cc`), C column-major (results/swap-ab-2026-11-29/).
        (
            &["pick", "16x4096x14336"][..],
            "layout: cc, c_layout: col, tile: 64x16x128",
        ),
        (
            &["pick", "4096x4096x4096", "--layout", "cc"][..],
            "consumers: 2",
        ),
        (
            &[
                "pick",
                "777x4099x2048",
                "--arch",
                "sm_80",
                "--lds",
                "2048,4104,4104",
            ][..],
            "mma: mma_sync",
        ),
        (
            &["pick", "8x512x512x4096", "--dtype", "f32"][..],
            "mma: fma",
        ),
        // fp8: the fp8 set, with the spec's defaults for the rest (bf16 out, layout rc).
        (
            &["pick", "4096x4096x4096", "--dtype", "e4m3"][..],
            "dtype: e4m3, acc: f32, out: bf16, layout: rc",
        ),
    ] {
        let output = gemm_codegen(args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = stdout(&output);
        let spec = text.lines().next().expect("a first line");
        assert!(spec.contains(expected), "{args:?}: {spec}");
        let check = gemm_codegen(&["check", spec]);
        assert!(check.status.success(), "{spec}: {}", stderr(&check));
        assert!(text
            .lines()
            .nth(1)
            .is_some_and(|line| line.contains("predicted")));
        assert!(text.contains("# candidates, fastest predicted first:"));
    }
    // The layout given is the layout picked.
    let cc = stdout(&gemm_codegen(&["pick", "4096x4096x4096", "--layout", "cc"]));
    assert!(cc.lines().next().unwrap().contains("layout: cc"));
}

/// No kernel of the set computes the problem: exit 4, the reason, and the flag that fixes it,
/// which does.
#[test]
fn pick_refuses_what_no_kernel_of_the_set_computes_and_names_the_fix() {
    // Packed C rows of 4099 bf16 (8198 bytes) cannot start 16-byte aligned, and the fp8 set
    // has no narrow copies (its TMA needs 16-byte strides): its swapped product, stored
    // column-major element by element, computes it.
    let output = gemm_codegen(&["pick", "777x4099x2048", "--dtype", "e4m3"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let first = text.lines().next().unwrap();
    assert!(first.contains(", c_layout: col, "), "{text}");
    assert!(
        text.contains("# swapped: Matmul runs Cᵀ = Bᵀ·Aᵀ, 4099x777x2048 rc C column-major"),
        "{text}"
    );
    let checked = gemm_codegen(&["check", first]);
    assert!(checked.status.success(), "{}", stderr(&checked));
    for (args, reason, fix) in [
        (
            &["pick", "777x4099x2050", "--dtype", "e4m3"][..],
            "every member: A's lines (2050 x 1 B) are not 16-byte aligned",
            &["--lds", "2064,2064,4104"][..],
        ),
        (
            &[
                "pick",
                "4096x4096x4096",
                "--dtype",
                "e4m3",
                "--layout",
                "rr",
            ],
            "no kernel of set `sm90_fp8` computes 4096x4096x4096 rr:\n  \
             every member takes layout rc only: the fp8 wgmma reads A and B K-major",
            &["--layout", "rc"],
        ),
    ] {
        let output = gemm_codegen(args);
        assert_eq!(
            output.status.code(),
            Some(4),
            "{args:?}: {}",
            stdout(&output)
        );
        let message = stderr(&output);
        assert!(message.contains(reason), "{args:?}: {message}");
        let help = format!("= help: {}", fix.join(" "));
        assert!(message.contains(&help), "{args:?}: {help}: {message}");
        // The help is a fix: with it (in place of the flag's value given), a kernel is picked.
        let mut fixed: Vec<&str> = args.to_vec();
        match fixed.iter().position(|arg| *arg == fix[0]) {
            Some(flag) => fixed[flag + 1] = fix[1],
            None => fixed.extend(fix),
        }
        let output = gemm_codegen(&fixed);
        assert!(output.status.success(), "{fixed:?}: {}", stderr(&output));
    }
    let output = gemm_codegen(&["pick", "64x64x64", "--arch", "sm_86", "--dtype", "e4m3"]);
    assert_eq!(output.status.code(), Some(4));
    assert!(
        stderr(&output).contains("sets for e4m3: `sm90_fp8` runs on compute capability 9.0 only"),
        "{}",
        stderr(&output)
    );
}

/// Lines and addresses that no 16-byte copy takes get a narrow-copy member of the set, whose
/// spec `check` accepts, and a note of the padding that would let a 16-byte member run.
#[test]
fn pick_answers_misaligned_problems_with_narrow_copies() {
    for (args, member, note) in [
        // Packed B rows of 4099 bf16 (8198 bytes): only 2-byte copies take them.
        (
            &["pick", "777x4099x2048"][..],
            "_sync2_bf16_rr",
            ": --lds 2048,4104,4104 (lines padded) lets one",
        ),
        // Even lines of bf16 that are no multiple of 8 elements: 4-byte cp.async.
        (
            &["pick", "777x4098x2048"],
            "_cp4_bf16_rr",
            ": --lds 2048,4104,4104 (lines padded) lets one",
        ),
        // Only C's rows misaligned (an odd N in layout rc): 16-byte copies, 2-byte stores. (At
        // M = 16 the swapped product, stored column-major element by element, runs it wide:
        // below.)
        (
            &["pick", "777x4099x2048", "--layout", "rc"],
            "sm90_m128x256_c2_bf16_rc",
            ": --lds 2048,2048,4104 (lines padded) lets one",
        ),
        // Odd lines and operands that start at an odd element: both must change.
        (
            &["pick", "777x4099x2048", "--address-align", "2"],
            "_sync2_bf16_rr",
            ": --lds 2048,4104,4104 (lines padded) with operands that start 16-byte aligned \
             lets one",
        ),
        // Aligned lines, operands that start at an odd element.
        (
            &["pick", "4096x4096x4096", "--address-align", "2"],
            "_sync2_bf16_rr",
            ": operands that start 16-byte aligned let one",
        ),
        (
            &["pick", "777x1001x520", "--arch", "sm_80", "--dtype", "f32"],
            "_cp4_f32_rr",
            ": --lds 520,1004,1004 (lines padded) lets one",
        ),
    ] {
        let output = gemm_codegen(args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = stdout(&output);
        let spec = text.lines().next().unwrap();
        assert!(spec.contains(member), "{args:?}: {spec}");
        let checked = gemm_codegen(&["check", spec]);
        assert!(checked.status.success(), "{spec}: {}", stderr(&checked));
        let last = text.lines().last().unwrap();
        assert_eq!(
            last,
            format!(
                "# narrow access: no member with 16-byte copies and whole stores computes \
                 this problem{note}"
            ),
            "{args:?}"
        );
    }
    // A decode problem with C's rows misaligned runs swapped: 16-byte copies of A and B.
    let output = gemm_codegen(&["pick", "16x4099x4096", "--layout", "rc"]);
    let text = stdout(&output);
    assert!(text.starts_with("name: sm90_swap64x16_bf16_rc,"), "{text}");
    assert!(
        text.contains("# swapped: Matmul runs Cᵀ = Bᵀ·Aᵀ, 4099x16x4096 rc C column-major"),
        "{text}"
    );
    assert!(!text.contains("narrow"), "{text}");
    // Aligned problems never get narrow copies.
    let output = gemm_codegen(&["pick", "777x4104x2048"]);
    assert!(!stdout(&output).contains("narrow"), "{}", stdout(&output));
    // A column of C (a matrix times a vector): the one-row problem that `Matmul` runs.
    let output = gemm_codegen(&["pick", "4096x1x4096"]);
    let text = stdout(&output);
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with(
            "# a column of C: Matmul runs it as one row, 1x4096x4096 rc (lds 4096,4096,4096), \
             on sm90_m16x64"
        ),
        "{text}"
    );
}

#[test]
fn pick_refuses_bad_arguments_with_exit_2() {
    for (args, expected) in [
        (&["pick", "16x4096"][..], "not MxNxK or BxMxNxK"),
        (&["pick", "0x4096x4096"][..], "is not a size"),
        (
            &["pick", "64x64x64", "--set", "sm91"][..],
            "no kernel set named `sm91`",
        ),
        (&["pick", "64x64x64", "--lds", "1,2"][..], "three numbers"),
        (
            &["pick", "64x64x64", "--address-align", "3"][..],
            "not a power of two",
        ),
        (&["pick", "64x64x64", "--layout", "rx"][..], "layout"),
    ] {
        let output = gemm_codegen(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains(expected),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

/// A set named for a device it does not run on, or for inputs it does not take, is refused
/// with the set that fits, never picked from.
#[test]
fn pick_refuses_a_set_that_does_not_serve_the_device() {
    for (args, expected) in [
        (
            &["pick", "4096x4096x4096", "--arch", "sm_80", "--set", "sm90"][..],
            &[
                "set `sm90` runs on compute capability 9.0 only, not on 8.0",
                "help: --set sm80, the set for bf16 on sm_80",
            ][..],
        ),
        (
            &["pick", "64x64x64", "--dtype", "f32", "--set", "sm90"],
            &[
                "set `sm90` takes bf16 or f16 inputs, not f32",
                "help: --set f32, the set for f32 on sm_90a",
            ],
        ),
    ] {
        let output = gemm_codegen(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stdout(&output)
        );
        let message = stderr(&output);
        for needle in expected {
            assert!(message.contains(needle), "{args:?}: {needle}: {message}");
        }
    }
    // A set from an older generation runs forward.
    let output = gemm_codegen(&["pick", "4096x4096x4096", "--set", "sm80"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("arch: sm_80"));
}

/// Runs the CLI with a stdout whose reader is already gone, as `gemm-codegen .. | head`
/// leaves it once `head` has read its lines.
fn gemm_codegen_into_a_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_gemm-codegen"))
        .args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("gemm-codegen runs")
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    for args in [
        &["sass", "simt_128x128x8_cp2"][..],
        &["sass", "simt_128x128x8_cp2", "--summary"],
        &["diff", "simt_128x128x8_cp2", "simt_128x128x8_sync2"],
        &["emit", "simt_128x128x8_cp2"],
        &["check", "simt_128x128x8_cp2"],
        &["explain", "simt_128x128x8_cp2"],
        &["catalog"],
    ] {
        let output = gemm_codegen_into_a_closed_pipe(args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), "", "{args:?}");
    }
}

#[test]
fn a_mistyped_catalog_name_offers_the_nearest() {
    let output = gemm_codegen(&["check", "simt_128x128x8_cp3"]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.contains("`simt_128x128x8_cp3` is no catalog spec"),
        "{text}"
    );
    assert!(
        text.contains("did you mean `simt_128x128x8_cp2`?"),
        "{text}"
    );
}

#[test]
fn a_mistyped_preset_offers_the_nearest() {
    let output = gemm_codegen(&["emit", "--preset", "simt_128x128x8_cp3"]);
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(
        text.contains("no catalog spec named `simt_128x128x8_cp3`"),
        "{text}"
    );
    assert!(
        text.contains("did you mean `simt_128x128x8_cp2`?"),
        "{text}"
    );
}

#[test]
fn help_describes_spec() {
    let output = gemm_codegen(&["--help"]);
    let text = stdout(&output);
    for form in ["spec text", "@FILE", "catalog name"] {
        assert!(text.contains(form), "{text}");
    }
}

#[test]
fn a_missing_comma_and_an_overflowing_number_say_so() {
    let output = gemm_codegen(&["check", "name: k arch: sm_80"]);
    assert!(
        stderr(&output).contains("a comma is probably missing"),
        "{}",
        stderr(&output)
    );
    let output = gemm_codegen(&["check", "stages: 99999999999"]);
    assert!(
        stderr(&output).contains("out of range (numbers in a spec are 0 to 4294967295)"),
        "{}",
        stderr(&output)
    );
}
