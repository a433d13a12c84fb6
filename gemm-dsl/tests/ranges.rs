//! Numbers out of range are errors at their token with the legal range, never a panic (debug
//! builds) or a product that wraps into range (release builds).

use gemm_dsl::{check_str, SpecError};

/// The spec's only error, checked to sit exactly on `token`.
fn error_at(text: &str, token: &str) -> SpecError {
    let errors = check_str(text).expect_err("spec must be invalid").0;
    assert_eq!(errors.len(), 1, "{text}: {errors:?}");
    let error = errors.into_iter().next().unwrap();
    let column = text.find(token).expect("token is in the spec");
    assert_eq!(error.span.start().line, 1, "{text}");
    assert_eq!(
        error.span.start().column,
        column,
        "{text}: {}",
        error.message
    );
    assert_eq!(error.span.end().column, column + token.len(), "{text}");
    error
}

#[test]
fn warp_grids_too_large_to_count() {
    for warps in ["65536x65536", "33x1", "1x4294967295"] {
        let e = error_at(&format!("name: k, arch: sm_80, warps: {warps}"), warps);
        assert_eq!(
            e.message,
            format!("a block holds 1 to 32 warps (1024 threads), not {warps}")
        );
        assert_eq!(
            e.help.as_deref(),
            Some(
                "leave `warps:` out for the family's grid for the tile, \
                 or warps: ROWSxCOLS with ROWS x COLS from 1 to 32"
            )
        );
    }
    // Within the side bound, the family's own rule names the warp count and a grid that fits.
    let e = error_at("name: k, arch: sm_80, warps: 8x8", "8x8");
    assert_eq!(
        e.message,
        "a block holds 1 to 32 warps (1024 threads), not 64 (8x8)"
    );
}

#[test]
fn tiles_whose_bytes_overflow() {
    // The example is the family's default tile.
    for (tile, mma, example) in [
        ("128x128x1073741824", "fma", "128x128x8"),
        ("128x128x4294967295", "mma_sync", "128x128x32"),
        ("4294967295x128x32", "mma_sync", "128x128x32"),
        ("128x65536x32", "fma", "128x128x8"),
        ("128x128x16385", "fma", "128x128x8"),
    ] {
        let e = error_at(
            &format!("name: k, arch: sm_80, tile: {tile}, mma: {mma}, dtype: tf32"),
            tile,
        );
        assert_eq!(
            e.message,
            format!("tile dimensions must be 1 to 16384, not {tile}")
        );
        assert_eq!(
            e.help,
            Some(format!(
                "BM, BN and BK are each 1 to 16384, e.g. tile: {example}"
            ))
        );
    }
}

#[test]
fn the_largest_tile_side_is_rejected_by_the_budget_not_the_range() {
    let errors = check_str("name: k, arch: sm_90, tile: 16384x128x8")
        .expect_err("no block holds a 16384-row tile")
        .0;
    assert!(
        errors.iter().all(|e| !e.message.contains("must be 1 to")),
        "{errors:?}"
    );
}

#[test]
fn clusters_too_large_to_count() {
    for cluster in ["65536x65536", "4294967295x1", "17x1"] {
        let e = error_at(
            &format!("name: k, arch: sm_90, cluster: {cluster}"),
            cluster,
        );
        assert_eq!(
            e.message,
            format!("a cluster holds 1 to 16 blocks, not {cluster}")
        );
        assert_eq!(e.help.as_deref(), Some("cluster: 1x1"));
    }
}

#[test]
fn padding_too_large_to_add() {
    let e = error_at("name: k, swizzle: pad(4294967295)", "pad(4294967295)");
    assert_eq!(e.message, "row padding is 0 to 1024 bytes, not 4294967295");
    assert_eq!(
        e.help.as_deref(),
        Some("swizzle: pad(16), or another multiple of 16 up to 1024")
    );
    let e = error_at("name: k, swizzle: pad(1040)", "pad(1040)");
    assert_eq!(e.message, "row padding is 0 to 1024 bytes, not 1040");
}

#[test]
fn every_other_number_at_its_limits() {
    for (text, token, message) in [
        (
            "name: k, stages: 4294967295",
            "4294967295",
            "stages must be between 1 and 8, not 4294967295",
        ),
        (
            "name: k, arch: sm_90a, mma: wgmma, consumers: 4294967295",
            "4294967295",
            "consumers must be 1 to 4 warpgroups, not 4294967295",
        ),
        (
            "name: k, arch: sm_90, copy: tma(multicast = 4294967295)",
            "tma(multicast = 4294967295)",
            "TMA multicast reaches 1 to 16 blocks, not 4294967295",
        ),
        (
            "name: k, mma: mma_sync, schedule: persistent(group = 4294967295)",
            "persistent(group = 4294967295)",
            "a raster group holds 1 to 64 tiles, not 4294967295",
        ),
    ] {
        let e = error_at(text, token);
        assert_eq!(e.message, message);
        assert!(e.help.is_some(), "{text}");
    }
}

#[test]
fn numbers_beyond_u32_are_not_numbers() {
    for (text, token) in [
        ("name: k, tile: 4294967296x128x8", "4294967296x128x8"),
        (
            "name: k, warps: 99999999999999999999x1",
            "99999999999999999999x1",
        ),
        ("name: k, stages: 4294967296", "4294967296"),
        (
            "name: k, cluster: 1x18446744073709551616",
            "1x18446744073709551616",
        ),
    ] {
        let errors = gemm_dsl::parse_str(text).expect_err("does not parse").0;
        let e = &errors[0];
        assert_eq!(e.span.start().column, text.find(token).unwrap(), "{text}");
        assert!(
            e.message.contains("is not a valid"),
            "{text}: {}",
            e.message
        );
        assert!(e.help.is_some(), "{text}");
    }
}

/// Defaults derived from out-of-range numbers (the swizzle from BK, wgmma's warps from
/// `consumers`) are computed without overflow, and the number itself is the error.
#[test]
fn defaults_derived_from_huge_numbers() {
    let e = error_at(
        "name: k, arch: sm_90a, mma: mma_sync, tile: 128x128x4294967295",
        "128x128x4294967295",
    );
    assert!(e.message.starts_with("tile dimensions must be 1 to 16384"));
    let errors = check_str("name: k, arch: sm_90a, mma: wgmma, tile: 128x256x4294967295")
        .expect_err("invalid")
        .0;
    assert!(errors[0]
        .message
        .starts_with("tile dimensions must be 1 to 16384"));
}
