//! The fuzz target's dictionary (`fuzz/parse_spec.dict`) holds every key and every value of
//! the spec language, and the numbers at the edges of its arithmetic: a key or value added to
//! the language and not to the dictionary fails here. The matches below stop compiling when a
//! variant is added.

use gemm_dsl::{
    Activation, Arch, Aux, Bias, BiasAlong, CLayout, CacheHint, Copy, DType, Epilogue, Groups, Key,
    Layout, Mma, Quant, Raster, RowScale, Scale, Schedule, Swizzle, Tail,
};

/// The dictionary's entries, unquoted (`\"` and `\\` unescaped).
fn entries() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/parse_spec.dict");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|line| line.starts_with('"'))
        .map(|line| {
            let quoted = line.strip_suffix('"').expect("entries end with a quote");
            quoted[1..].replace("\\\"", "\"").replace("\\\\", "\\")
        })
        .collect()
}

fn values() -> Vec<String> {
    let mut values: Vec<String> = Arch::ALL.iter().map(|a| a.name().to_string()).collect();
    values.extend(
        [
            DType::F16,
            DType::Bf16,
            DType::Tf32,
            DType::F32,
            DType::E4m3,
            DType::E5m2,
        ]
        .map(|d| match d {
            DType::F16 | DType::Bf16 | DType::Tf32 | DType::F32 | DType::E4m3 | DType::E5m2 => {
                d.name().to_string()
            }
        }),
    );
    values.extend(
        [
            Layout::RowRow,
            Layout::RowCol,
            Layout::ColRow,
            Layout::ColCol,
        ]
        .map(|l| match l {
            Layout::RowRow | Layout::RowCol | Layout::ColRow | Layout::ColCol => {
                l.name().to_string()
            }
        }),
    );
    values.extend(
        [
            Swizzle::None,
            Swizzle::Pad(16),
            Swizzle::Xor32,
            Swizzle::Xor64,
            Swizzle::Xor128,
        ]
        .map(|s| match s {
            Swizzle::None | Swizzle::Pad(_) | Swizzle::Xor32 | Swizzle::Xor64 | Swizzle::Xor128 => {
                s.to_string()
            }
        }),
    );
    values.extend(
        [
            Copy::SYNC,
            Copy::Sync { vector: 2 },
            Copy::Sync { vector: 4 },
            Copy::Sync { vector: 8 },
            Copy::CP_ASYNC_CG,
            Copy::CP_ASYNC_CA,
            Copy::CpAsync {
                hint: CacheHint::Ca,
                vector: 4,
            },
            Copy::CpAsync {
                hint: CacheHint::Ca,
                vector: 8,
            },
            Copy::Tma { multicast: 1 },
            Copy::Tma { multicast: 2 },
        ]
        .map(|c| match c {
            Copy::Sync { .. }
            | Copy::CpAsync {
                hint: CacheHint::Cg | CacheHint::Ca,
                ..
            }
            | Copy::Tma { .. } => c.to_string(),
        }),
    );
    // `cp_async` alone means `cp_async(cg)`, `persistent` alone its defaults.
    values.extend(["cp_async", "persistent"].map(String::from));
    values.extend([Mma::Fma, Mma::MmaSync, Mma::Wgmma].map(|m| match m {
        Mma::Fma | Mma::MmaSync | Mma::Wgmma => m.name().to_string(),
    }));
    values.extend(
        [
            Schedule::Tile,
            Schedule::Persistent {
                raster: Raster::M,
                group: 8,
                tail: Tail::Whole,
            },
            Schedule::Persistent {
                raster: Raster::N,
                group: 64,
                tail: Tail::Whole,
            },
            Schedule::Persistent {
                raster: Raster::N,
                group: 64,
                tail: Tail::StreamK,
            },
        ]
        .map(|s| match s {
            Schedule::Tile | Schedule::Persistent { .. } => s.to_string(),
        }),
    );
    values.extend([Epilogue::Direct, Epilogue::Tma].map(|e| match e {
        Epilogue::Direct | Epilogue::Tma => e.name().to_string(),
    }));
    values.extend([CLayout::Row, CLayout::Col].map(|c| match c {
        CLayout::Row | CLayout::Col => c.name().to_string(),
    }));
    values.extend(Scale::ALL.map(|scale| match scale {
        Scale::None | Scale::Alpha | Scale::AlphaBeta => scale.name().to_string(),
    }));
    // `row` and `col` alone take the output type.
    values.extend(["row", "col"].map(String::from));
    values.extend(
        [
            Bias::Vector {
                along: BiasAlong::Row,
                dtype: DType::F32,
            },
            Bias::Vector {
                along: BiasAlong::Col,
                dtype: DType::Bf16,
            },
        ]
        .map(|bias| match bias {
            Bias::None | Bias::Vector { .. } => bias.to_string(),
        }),
    );
    values.extend(Activation::ALL.map(|activation| match activation {
        Activation::None
        | Activation::Relu
        | Activation::Gelu
        | Activation::GeluErf
        | Activation::Silu => activation.name().to_string(),
    }));
    values.extend(Aux::ALL.map(|aux| match aux {
        Aux::None | Aux::PreActivation => aux.name().to_string(),
    }));
    values.extend(RowScale::ALL.map(|scale| match scale {
        RowScale::None | RowScale::F32 => scale.name().to_string(),
    }));
    values.extend(Quant::ALL.map(|quant| match quant {
        Quant::None | Quant::Tensor | Quant::Block => quant.name().to_string(),
    }));
    values.extend(Groups::ALL.map(|groups| match groups {
        Groups::None | Groups::Contiguous | Groups::Masked => groups.name().to_string(),
    }));
    // `consumers:` takes a count or this word.
    values.push("pingpong".to_string());
    values
}

#[test]
fn the_fuzz_dictionary_names_every_key_and_value() {
    let entries = entries();
    let missing: Vec<String> = Key::ALL
        .iter()
        .map(|key| format!("{}:", key.name()))
        .chain(values())
        .filter(|wanted| !entries.contains(wanted))
        .collect();
    assert!(
        missing.is_empty(),
        "not in fuzz/parse_spec.dict: {missing:?}"
    );
}

#[test]
fn the_fuzz_dictionary_holds_the_numbers_at_the_edges() {
    let entries = entries();
    for number in [
        u64::from(u16::MAX),
        1 << 16,
        u64::from(i32::MAX as u32),
        1 << 31,
        u64::from(u32::MAX),
        1 << 32,
        u64::MAX,
    ] {
        assert!(entries.contains(&number.to_string()), "{number}");
    }
    assert!(
        entries.contains(&"18446744073709551616".to_string()),
        "2^64"
    );
}
