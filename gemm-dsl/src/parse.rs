//! The one parser for spec text: `key: value, ...` as tokens, shared by `gemm!` and the CLI.
//!
//! Values are read from the token text of everything up to the next top-level comma, so
//! `128x256x64` (which Rust lexes as the integer `128` with suffix `x256x64`) and
//! `128 x 256 x 64` mean the same. Defaults that depend on other keys (tile, warps, swizzle,
//! stages, copy, dtype) are filled in after every given key is read.

use crate::error::{SpecError, SpecErrors};
use crate::family;
pub use crate::spans::SpecSpans;
use crate::spans::WrittenKey;
use crate::spec::*;
use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use std::collections::BTreeMap;
use std::str::FromStr;

/// A parsed spec: values with defaults filled in, and the spans of what was written.
#[derive(Clone, Debug)]
pub struct ParsedSpec {
    pub spec: GemmSpec,
    pub spans: SpecSpans,
}

/// Parses a spec body from text, as the CLI and tests hand it over.
pub fn parse_str(text: &str) -> Result<ParsedSpec, SpecErrors> {
    let tokens = TokenStream::from_str(text).map_err(|error| {
        SpecError::new(error.span(), format!("cannot tokenize the spec: {error}"))
            .help("a spec is `key: value` pairs separated by commas, e.g. `name: k, arch: sm_80`")
    })?;
    let whole = whole_span(&tokens);
    parse_tokens(tokens, whole)
}

/// Parses a spec body from tokens; `whole` locates errors about defaulted keys.
pub fn parse_tokens(tokens: TokenStream, whole: Span) -> Result<ParsedSpec, SpecErrors> {
    let entries = split_entries(tokens)?;
    let mut given: BTreeMap<Key, Entry> = BTreeMap::new();
    let mut errors = Vec::new();
    for entry in entries {
        let Some(key) = Key::from_name(&entry.key) else {
            errors.push(unknown_key(&entry));
            continue;
        };
        if let Some(first) = given.get(&key) {
            errors.push(
                SpecError::new(entry.key_span, format!("duplicate key `{}`", entry.key))
                    .label("given again here")
                    .note(format!(
                        "`{}` was first given as `{}`",
                        entry.key, first.value_text
                    ))
                    .help("give each key once"),
            );
            continue;
        }
        given.insert(key, entry);
    }

    let mut builder = Builder {
        given: &given,
        errors: &mut errors,
    };
    let mma = builder.value(Key::Mma, Mma::Fma, parse_mma);
    let arch = builder.value(Key::Arch, Arch::Sm80, parse_arch);
    let name = builder.value(Key::Name, "gemm".to_string(), parse_name);
    // Defaults that depend on the family are the family's (`crate::family`).
    let family = family::rules(mma);
    let dtype = builder.value(Key::Dtype, family.dtype(), parse_dtype);
    let b_dtype = builder.value(Key::BDtype, dtype, parse_dtype);
    let acc = builder.value(Key::Acc, DType::F32, parse_dtype);
    // fp8 is an input type only: its products come out as bf16, as cuBLASLt's usual choice.
    let default_out = match dtype {
        DType::Tf32 => DType::F32,
        DType::E4m3 | DType::E5m2 => DType::Bf16,
        _ => dtype,
    };
    let out = builder.value(Key::Out, default_out, parse_dtype);
    // fp8 wgmma reads both operands K-major: A row-major, B column-major.
    let default_layout = if dtype.is_fp8() {
        Layout::RowCol
    } else {
        Layout::RowRow
    };
    let layout = builder.value(Key::Layout, default_layout, parse_layout);
    let c_layout = builder.value(Key::CLayout, CLayout::Row, parse_c_layout);
    let tile = builder.value(Key::Tile, family.tile(dtype), parse_tile);
    let (consumers, pingpong) =
        builder.value(Key::Consumers, (family.consumers(), false), parse_consumers);
    let warps = builder.value(Key::Warps, family.warps(tile, consumers), parse_grid);
    let stages = builder.value(Key::Stages, family.stages(), parse_count);
    let swizzle = builder.value(Key::Swizzle, family.swizzle(dtype, tile), parse_swizzle);
    let copy = builder.value(Key::Copy, family.copy(arch), parse_copy);
    let c_store = builder.value(Key::CStore, None, parse_c_store);
    // A grouped kernel walks every expert's tiles and stores each up to its expert's last
    // row: persistent, with direct stores, unless told otherwise.
    let groups = builder.value(Key::Groups, Groups::None, parse_groups);
    let default_schedule = if groups.is_grouped() {
        Schedule::Persistent {
            raster: Raster::M,
            group: 8,
            tail: Tail::Whole,
        }
    } else {
        Schedule::Tile
    };
    let schedule = builder.value(Key::Schedule, default_schedule, parse_schedule);
    let cluster = builder.value(Key::Cluster, Grid2 { rows: 1, cols: 1 }, parse_grid);
    // A TMA store writes C's rows: a column-major C is stored by the threads.
    let default_epilogue = if groups.is_grouped() || c_layout == CLayout::Col {
        Epilogue::Direct
    } else {
        family.epilogue(out)
    };
    let epilogue = builder.value(Key::Epilogue, default_epilogue, parse_epilogue);
    let scale = builder.value(Key::Scale, Scale::None, parse_scale);
    // `bias: col` is a vector of the output type.
    let bias = match builder.value(Key::Bias, None, parse_bias) {
        None => Bias::None,
        Some((along, dtype)) => Bias::Vector {
            along,
            dtype: dtype.unwrap_or(out),
        },
    };
    let activation = builder.value(Key::Activation, Activation::None, parse_activation);
    let aux = builder.value(Key::Aux, Aux::None, parse_aux);
    let row_scale = builder.value(Key::RowScale, RowScale::None, parse_row_scale);
    let quant = builder.value(Key::Quant, Quant::None, parse_quant);
    // Block scales are applied where the partial sums are promoted: every block of k.
    let default_promote = (quant == Quant::Block).then_some(Quant::BLOCK);
    let promote = builder.value(Key::Promote, default_promote, parse_promote);

    if !errors.is_empty() {
        return Err(SpecErrors(errors));
    }
    let keys = given
        .iter()
        .map(|(&key, entry)| {
            let written = WrittenKey {
                value: entry.value_span,
                value_last: entry.value_last,
            };
            (key, written)
        })
        .collect();
    Ok(ParsedSpec {
        spec: GemmSpec {
            name,
            arch,
            dtype,
            b_dtype,
            acc,
            out,
            layout,
            c_layout,
            tile,
            warps,
            consumers,
            pingpong,
            stages,
            swizzle,
            copy,
            c_store,
            mma,
            schedule,
            cluster,
            epilogue,
            scale,
            bias,
            activation,
            aux,
            row_scale,
            quant,
            promote,
            groups,
        },
        spans: SpecSpans { whole, keys },
    })
}

/// One `key: value` pair as written.
struct Entry {
    key: String,
    key_span: Span,
    /// The value's tokens printed without spaces, e.g. `cp_async(cg)` or `128x128x8`.
    value_text: String,
    value_span: Span,
    value_last: Span,
}

/// Splits `key: value, key: value` at top-level commas.
fn split_entries(tokens: TokenStream) -> Result<Vec<Entry>, SpecErrors> {
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    let mut iter = tokens.into_iter().peekable();
    while iter.peek().is_some() {
        let mut part: Vec<TokenTree> = Vec::new();
        for tree in iter.by_ref() {
            if matches!(&tree, TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
            part.push(tree);
        }
        match entry_from(part) {
            Ok(Some(entry)) => entries.push(entry),
            Ok(None) => {}
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(entries)
    } else {
        Err(SpecErrors(errors))
    }
}

// One error per malformed entry, on the parse path only: its size costs nothing.
#[allow(clippy::result_large_err)]
fn entry_from(part: Vec<TokenTree>) -> Result<Option<Entry>, SpecError> {
    let Some(first) = part.first() else {
        return Ok(None);
    };
    let TokenTree::Ident(key) = first else {
        return Err(SpecError::new(first.span(), "expected a key name")
            .help(format!("keys are: {}", key_list())));
    };
    let key_name = key.to_string();
    let key_span = key.span();
    match part.get(1) {
        Some(TokenTree::Punct(p)) if p.as_char() == ':' => {}
        Some(other) => {
            return Err(
                SpecError::new(other.span(), format!("expected `:` after `{key_name}`"))
                    .help(format!("write `{key_name}: VALUE`")),
            )
        }
        None => {
            return Err(
                SpecError::new(key_span, format!("`{key_name}` has no value"))
                    .help(format!("write `{key_name}: VALUE`")),
            )
        }
    }
    let value = &part[2..];
    // `arch: sm_80 karch: sm_80`: a key and `:` inside a value is the next entry.
    if let Some(next_key) = value.windows(2).skip(1).find_map(|pair| match pair {
        [TokenTree::Ident(ident), TokenTree::Punct(p)] if p.as_char() == ':' => Some(ident),
        _ => None,
    }) {
        let next = next_key.to_string();
        return Err(SpecError::new(
            next_key.span(),
            format!("`{next}:` inside the value of `{key_name}`: a comma is probably missing"),
        )
        .help(format!(
            "separate the entries with a comma: `..., {next}: ...`"
        )));
    }
    if value.is_empty() {
        return Err(
            SpecError::new(part[1].span(), format!("`{key_name}` has no value"))
                .help(format!("write `{key_name}: VALUE`")),
        );
    }
    let value_span = join_spans(value);
    let value_last = value[value.len() - 1].span();
    let value_text = compact(value.iter().cloned());
    Ok(Some(Entry {
        key: key_name,
        key_span,
        value_text,
        value_span,
        value_last,
    }))
}

/// The tokens' text with no whitespace between tokens (string literals keep theirs).
fn compact(trees: impl Iterator<Item = TokenTree>) -> String {
    trees
        .map(|tree| match tree {
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                format!("{open}{}{close}", compact(group.stream().into_iter()))
            }
            other => other.to_string(),
        })
        .collect()
}

fn join_spans(trees: &[TokenTree]) -> Span {
    let first = trees[0].span();
    let last = trees[trees.len() - 1].span();
    first.join(last).unwrap_or(first)
}

fn whole_span(tokens: &TokenStream) -> Span {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    if trees.is_empty() {
        Span::call_site()
    } else {
        join_spans(&trees)
    }
}

fn key_list() -> String {
    Key::ALL
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn unknown_key(entry: &Entry) -> SpecError {
    let closest = Key::ALL
        .iter()
        .map(|k| (edit_distance(&entry.key, k.name()), k.name()))
        .min();
    let error = SpecError::new(entry.key_span, format!("unknown key `{}`", entry.key));
    match closest {
        Some((distance, name)) if distance <= 2 => error.help(format!("did you mean `{name}`?")),
        _ => error.help(format!("keys are: {}", key_list())),
    }
}

/// Levenshtein distance, for did-you-mean (the CLI uses it for catalog names too).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

/// Reads given keys with their parser, or yields the default; collects errors.
struct Builder<'a> {
    given: &'a BTreeMap<Key, Entry>,
    errors: &'a mut Vec<SpecError>,
}

/// A value parser: the value text, or a message and the legal forms.
type ValueResult<T> = Result<T, (String, String)>;

impl Builder<'_> {
    fn value<T>(&mut self, key: Key, default: T, parse: fn(&str) -> ValueResult<T>) -> T {
        let Some(entry) = self.given.get(&key) else {
            return default;
        };
        match parse(&entry.value_text) {
            Ok(value) => value,
            Err((message, legal)) => {
                self.errors.push(
                    SpecError::new(entry.value_span, message)
                        .through(entry.value_last)
                        .help(format!("`{}` takes {legal}", key.name())),
                );
                default
            }
        }
    }
}

fn bad<T>(what: &str, text: &str, legal: &str) -> ValueResult<T> {
    // A number too large to read is out of range, not malformed: say the range.
    let overflowing = text
        .split(|c: char| !c.is_ascii_digit())
        .find(|digits| !digits.is_empty() && digits.parse::<u32>().is_err());
    let message = match overflowing {
        Some(digits) => format!(
            "`{text}` is not a valid {what}: {digits} is out of range (numbers in a spec are 0 to {})",
            u32::MAX
        ),
        None => format!("`{text}` is not a valid {what}"),
    };
    Err((message, legal.to_string()))
}

fn parse_name(text: &str) -> ValueResult<String> {
    const LEGAL: &str = "an identifier of ASCII letters, digits and `_` (it becomes the PTX kernel name and a Rust module name)";
    let mut chars = text.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !starts_well || !rest_ok || text == "_" {
        return bad("kernel name", text, LEGAL);
    }
    if text.len() > 200 {
        return Err((
            format!("kernel name is {} characters long", text.len()),
            "a name of at most 200 characters".into(),
        ));
    }
    if RUST_KEYWORDS.contains(&text) {
        return Err((
            format!("`{text}` is a Rust keyword, and the name becomes a Rust module"),
            format!("an identifier that is not a Rust keyword, e.g. `{text}_gemm`"),
        ));
    }
    Ok(text.to_string())
}

/// Every strict and reserved keyword of every Rust edition (`gen` from 2024; `async`,
/// `await`, `dyn` and `try` from 2018): none can name a module in the crate that expands
/// `gemm!`, whatever its edition.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "gen", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

fn parse_arch(text: &str) -> ValueResult<Arch> {
    Arch::ALL
        .into_iter()
        .find(|arch| arch.name() == text)
        .map_or_else(
            || bad("arch", text, "one of sm_80, sm_86, sm_89, sm_90, sm_90a"),
            Ok,
        )
}

fn parse_dtype(text: &str) -> ValueResult<DType> {
    match text {
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::Bf16),
        "tf32" => Ok(DType::Tf32),
        "f32" => Ok(DType::F32),
        "e4m3" => Ok(DType::E4m3),
        "e5m2" => Ok(DType::E5m2),
        _ => bad(
            "element type",
            text,
            "one of f16, bf16, tf32, f32, e4m3, e5m2",
        ),
    }
}

fn parse_layout(text: &str) -> ValueResult<Layout> {
    match text {
        "rr" => Ok(Layout::RowRow),
        "rc" => Ok(Layout::RowCol),
        "cr" => Ok(Layout::ColRow),
        "cc" => Ok(Layout::ColCol),
        _ => bad(
            "layout",
            text,
            "one of rr, rc, cr, cc (A then B; r = row-major, c = column-major)",
        ),
    }
}

fn parse_c_layout(text: &str) -> ValueResult<CLayout> {
    match text {
        "row" => Ok(CLayout::Row),
        "col" => Ok(CLayout::Col),
        _ => bad(
            "C layout",
            text,
            "row (C row-major) or col (C column-major: the swapped product Cᵀ = Bᵀ·Aᵀ written where C lies)",
        ),
    }
}

fn parse_epilogue(text: &str) -> ValueResult<Epilogue> {
    match text {
        "direct" => Ok(Epilogue::Direct),
        "tma" => Ok(Epilogue::Tma),
        _ => bad(
            "epilogue",
            text,
            "one of direct (threads store C from registers), tma (stmatrix into shared memory, then a TMA store)",
        ),
    }
}

fn parse_scale(text: &str) -> ValueResult<Scale> {
    Scale::ALL
        .into_iter()
        .find(|scale| scale.name() == text)
        .map_or_else(
            || {
                bad(
                    "scale",
                    text,
                    "one of none, alpha (D = α·A·B), alpha_beta (D = α·A·B + β·C, reading C)",
                )
            },
            Ok,
        )
}

/// `none`, or the way the vector runs with its element type if given: `col`, `row(f32)`.
fn parse_bias(text: &str) -> ValueResult<Option<(BiasAlong, Option<DType>)>> {
    const LEGAL: &str = "one of none, row, col (one value per row or per column of D, of the \
                         output type), row(TYPE), col(TYPE) (TYPE: the output type or f32)";
    let along = |name: &str| match name {
        "row" => Some(BiasAlong::Row),
        "col" => Some(BiasAlong::Col),
        _ => None,
    };
    match call_form(text) {
        Some(("none", None)) => Ok(None),
        Some((name, None)) => {
            along(name).map_or_else(|| bad("bias", text, LEGAL), |a| Ok(Some((a, None))))
        }
        Some((name, Some(dtype))) => match (along(name), parse_dtype(dtype)) {
            (Some(a), Ok(dtype)) => Ok(Some((a, Some(dtype)))),
            _ => bad("bias", text, LEGAL),
        },
        None => bad("bias", text, LEGAL),
    }
}

fn parse_activation(text: &str) -> ValueResult<Activation> {
    Activation::ALL
        .into_iter()
        .find(|activation| activation.name() == text)
        .map_or_else(
            || {
                bad(
                    "activation",
                    text,
                    "one of none, relu, gelu (the tanh approximation), gelu_erf, silu",
                )
            },
            Ok,
        )
}

fn parse_quant(text: &str) -> ValueResult<Quant> {
    Quant::ALL
        .into_iter()
        .find(|quant| quant.name() == text)
        .map_or_else(
            || {
                bad(
                    "quantization",
                    text,
                    "one of none, tensor (one f32 dequantization scale each for A and B, in device memory), block (A per row and B per 128x128 block, every 128 k)",
                )
            },
            Ok,
        )
}

/// The bytes of C's widest store.
fn parse_c_store(text: &str) -> ValueResult<Option<u32>> {
    parse_number(text)
        .filter(|&bytes| bytes.is_power_of_two() && (2..=16).contains(&bytes))
        .map_or_else(
            || {
                bad(
                    "C store width",
                    text,
                    "the bytes of C's widest store: 2, 4, 8 or 16",
                )
            },
            |bytes| Ok(Some(bytes)),
        )
}

/// `none`, or the k between promotions.
fn parse_promote(text: &str) -> ValueResult<Option<u32>> {
    match text {
        "none" => Ok(None),
        _ => parse_number(text).filter(|&k| k > 0).map_or_else(
            || {
                bad(
                    "promotion interval",
                    text,
                    "none, or the k between promotions of the partial sums, e.g. `128`",
                )
            },
            |k| Ok(Some(k)),
        ),
    }
}

fn parse_groups(text: &str) -> ValueResult<Groups> {
    Groups::ALL
        .into_iter()
        .find(|groups| groups.name() == text)
        .map_or_else(
            || {
                bad(
                    "grouped layout",
                    text,
                    "one of none, contiguous (each expert's rows follow the last's, ends in an int32 prefix sum), masked (each expert owns `capacity` rows, an int32 count of them used)",
                )
            },
            Ok,
        )
}

fn parse_aux(text: &str) -> ValueResult<Aux> {
    Aux::ALL
        .into_iter()
        .find(|aux| aux.name() == text)
        .map_or_else(
            || {
                bad(
                    "aux output",
                    text,
                    "one of none, pre_activation (also store the values before the activation)",
                )
            },
            Ok,
        )
}

fn parse_row_scale(text: &str) -> ValueResult<RowScale> {
    RowScale::ALL
        .into_iter()
        .find(|scale| scale.name() == text)
        .map_or_else(
            || {
                bad(
                    "row scale",
                    text,
                    "one of none, f32 (a factor per row of D in f32, applied last)",
                )
            },
            Ok,
        )
}

fn parse_number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn parse_dims<const N: usize>(text: &str) -> Option<[u32; N]> {
    let parts: Vec<&str> = text.split('x').collect();
    if parts.len() != N {
        return None;
    }
    let mut dims = [0; N];
    for (dim, part) in dims.iter_mut().zip(parts) {
        *dim = parse_number(part)?;
    }
    Some(dims)
}

fn parse_tile(text: &str) -> ValueResult<Tile> {
    match parse_dims::<3>(text) {
        Some([m, n, k]) => Ok(Tile { m, n, k }),
        None => bad("tile", text, "`BMxBNxBK`, e.g. `128x128x8`"),
    }
}

fn parse_grid(text: &str) -> ValueResult<Grid2> {
    match parse_dims::<2>(text) {
        Some([rows, cols]) => Ok(Grid2 { rows, cols }),
        None => bad("grid", text, "`ROWSxCOLS`, e.g. `2x4`"),
    }
}

/// A count of consumer warpgroups, or `pingpong` (two that take alternate tiles).
fn parse_consumers(text: &str) -> ValueResult<(u32, bool)> {
    if text == "pingpong" {
        return Ok((2, true));
    }
    parse_number(text).map_or_else(
        || {
            bad(
                "consumers value",
                text,
                "a whole number, e.g. `2`, or `pingpong`",
            )
        },
        |count| Ok((count, false)),
    )
}

fn parse_count(text: &str) -> ValueResult<u32> {
    parse_number(text).map_or_else(|| bad("count", text, "a whole number, e.g. `2`"), Ok)
}

/// Splits `head(args)` into `head` and `Some(args)`; plain `head` gives `None`.
fn call_form(text: &str) -> Option<(&str, Option<&str>)> {
    match text.find('(') {
        None => Some((text, None)),
        Some(open) => {
            let args = text[open + 1..].strip_suffix(')')?;
            Some((&text[..open], Some(args)))
        }
    }
}

/// Parses `a = 1, b = x` into pairs.
fn named_args(args: &str) -> Option<Vec<(&str, &str)>> {
    args.split(',')
        .filter(|part| !part.is_empty())
        .map(|part| part.split_once('='))
        .collect()
}

fn parse_swizzle(text: &str) -> ValueResult<Swizzle> {
    const LEGAL: &str = "one of none, pad(BYTES), 32B, 64B, 128B";
    match call_form(text) {
        Some(("none", None)) => Ok(Swizzle::None),
        Some(("32B", None)) => Ok(Swizzle::Xor32),
        Some(("64B", None)) => Ok(Swizzle::Xor64),
        Some(("128B", None)) => Ok(Swizzle::Xor128),
        Some(("pad", Some(bytes))) => parse_number(bytes)
            .map(Swizzle::Pad)
            .map_or_else(|| bad("padding", text, "pad(BYTES), e.g. pad(16)"), Ok),
        _ => bad("swizzle", text, LEGAL),
    }
}

fn parse_copy(text: &str) -> ValueResult<Copy> {
    const LEGAL: &str = "one of sync, sync(vector = N), cp_async, cp_async(cg), cp_async(ca), \
                         cp_async(ca, vector = N), tma, tma(multicast = N)";
    match call_form(text) {
        Some(("sync", None)) => Ok(Copy::SYNC),
        Some(("sync", Some(args))) => match named_args(args).as_deref() {
            Some([("vector", n)]) => {
                parse_vector(n, text, LEGAL).map(|vector| Copy::Sync { vector })
            }
            _ => bad("copy", text, LEGAL),
        },
        Some(("cp_async", None)) => Ok(Copy::CP_ASYNC_CG),
        Some(("cp_async", Some(args))) => {
            // A cache hint first (`cg` when left out), then an optional `vector = N`.
            let (hint, rest) = match args.split_once(',') {
                Some((hint, rest)) => (hint, Some(rest)),
                None if args.contains('=') => ("cg", Some(args)),
                None => (args, None),
            };
            let hint = match hint {
                "cg" => CacheHint::Cg,
                "ca" => CacheHint::Ca,
                _ => return bad("copy", text, LEGAL),
            };
            let vector = match rest.map(named_args) {
                None => Copy::WIDEST_VECTOR,
                Some(Some(pairs)) => match pairs.as_slice() {
                    [("vector", n)] => parse_vector(n, text, LEGAL)?,
                    _ => return bad("copy", text, LEGAL),
                },
                Some(None) => return bad("copy", text, LEGAL),
            };
            Ok(Copy::CpAsync { hint, vector })
        }
        Some(("tma", None)) => Ok(Copy::Tma { multicast: 1 }),
        Some(("tma", Some(args))) => match named_args(args).as_deref() {
            Some([("multicast", n)]) => parse_number(n)
                .map(|multicast| Copy::Tma { multicast })
                .map_or_else(|| bad("multicast count", text, LEGAL), Ok),
            Some(pairs) if pairs.iter().any(|(name, _)| *name == "vector") => Err((
                format!(
                    "`{text}`: the TMA copies whole boxes and needs 16-byte row strides, so it \
                     takes no `vector`"
                ),
                "tma or tma(multicast = N); for leading dimensions that are not 16-byte \
                 multiples, an mma.sync spec with `copy: cp_async(ca, vector = 4)`"
                    .to_string(),
            )),
            _ => bad("copy", text, LEGAL),
        },
        _ => bad("copy", text, LEGAL),
    }
}

/// A copy's `vector = N` (bytes); validation checks which widths the copy and type take.
fn parse_vector(n: &str, text: &str, legal: &str) -> ValueResult<u32> {
    parse_number(n).map_or_else(|| bad("copy vector", text, legal), Ok)
}

fn parse_mma(text: &str) -> ValueResult<Mma> {
    match text {
        "fma" => Ok(Mma::Fma),
        "mma_sync" => Ok(Mma::MmaSync),
        "wgmma" => Ok(Mma::Wgmma),
        _ => bad("mma", text, "one of fma, mma_sync, wgmma"),
    }
}

fn parse_schedule(text: &str) -> ValueResult<Schedule> {
    const LEGAL: &str =
        "one of tile, persistent, persistent(raster = m|n, group = N, tail = whole|stream_k)";
    let persistent = |raster, group, tail| Schedule::Persistent {
        raster,
        group,
        tail,
    };
    match call_form(text) {
        Some(("tile", None)) => Ok(Schedule::Tile),
        Some(("persistent", None)) => Ok(persistent(Raster::M, 8, Tail::Whole)),
        Some(("persistent", Some(args))) => {
            let Some(pairs) = named_args(args) else {
                return bad("schedule", text, LEGAL);
            };
            let (mut raster, mut group, mut tail) = (Raster::M, 8, Tail::Whole);
            for (name, value) in pairs {
                match (name, value) {
                    ("raster", "m") => raster = Raster::M,
                    ("raster", "n") => raster = Raster::N,
                    ("group", n) => match parse_number(n) {
                        Some(n) => group = n,
                        None => return bad("schedule", text, LEGAL),
                    },
                    ("tail", "whole") => tail = Tail::Whole,
                    ("tail", "stream_k") => tail = Tail::StreamK,
                    _ => return bad("schedule", text, LEGAL),
                }
            }
            Ok(persistent(raster, group, tail))
        }
        _ => bad("schedule", text, LEGAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> GemmSpec {
        parse_str(text).expect("spec parses").spec
    }

    fn first_error(text: &str) -> SpecError {
        parse_str(text)
            .expect_err("spec must not parse")
            .0
            .remove(0)
    }

    #[test]
    fn empty_spec_is_all_defaults() {
        let s = spec("");
        assert_eq!(s.name, "gemm");
        assert_eq!(s.arch, Arch::Sm80);
        assert_eq!(s.mma, Mma::Fma);
        assert_eq!(s.dtype, DType::F32);
        assert_eq!(
            s.tile,
            Tile {
                m: 128,
                n: 128,
                k: 8
            }
        );
        assert_eq!(s.warps, Grid2 { rows: 4, cols: 2 });
        assert_eq!(s.copy, Copy::CP_ASYNC_CG);
        assert_eq!(s.stages, 2);
    }

    #[test]
    fn tile_and_grids_parse_with_or_without_spaces() {
        assert_eq!(
            spec("tile: 64x128x16").tile,
            spec("tile: 64 x 128 x 16").tile
        );
        assert_eq!(spec("warps: 2x4").warps, Grid2 { rows: 2, cols: 4 });
        assert_eq!(spec("cluster: 2x1").cluster, Grid2 { rows: 2, cols: 1 });
    }

    #[test]
    fn every_value_form_of_the_design_parses() {
        let s = spec(
            "name: hopper_bf16, arch: sm_90a, dtype: bf16, acc: f32, out: bf16, layout: rr, \
             tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, \
             copy: tma(multicast = 2), mma: wgmma, \
             schedule: persistent(raster = n, group = 16, tail = stream_k), cluster: 2x1,",
        );
        assert_eq!(s.copy, Copy::Tma { multicast: 2 });
        assert_eq!(
            s.schedule,
            Schedule::Persistent {
                raster: Raster::N,
                group: 16,
                tail: Tail::StreamK,
            }
        );
        assert_eq!(spec("swizzle: pad(16)").swizzle, Swizzle::Pad(16));
        assert_eq!(spec("copy: cp_async(ca)").copy, Copy::CP_ASYNC_CA);
        assert_eq!(spec("copy: sync").copy, Copy::SYNC);
    }

    #[test]
    fn errors_reach_through_the_whole_value() {
        // A macro cannot join spans: its error underlines from the value's first token
        // through its last.
        let text = "name: k, copy: cp_async(cg, vector = 4)";
        let errors = crate::check_str(text).unwrap_err();
        let error = errors.iter().next().unwrap();
        assert_eq!(error.span.start().column, text.find("cp_async").unwrap());
        assert_eq!(error.last.end().column, text.len());
        // One token: the range is that token.
        let text = "name: k, stages: 99";
        let errors = crate::check_str(text).unwrap_err();
        let error = errors.iter().next().unwrap();
        assert_eq!(error.last.start().column, text.find("99").unwrap());
    }

    #[test]
    fn canonical_text_round_trips() {
        for text in [
            "",
            "name: k, arch: sm_86, tile: 64x64x16, stages: 3, swizzle: pad(16)",
            "arch: sm_90a, mma: wgmma, consumers: 1, copy: tma(multicast = 2), cluster: 2x1",
            "mma: mma_sync, dtype: tf32, tile: 128x128x16, stages: 4",
            "arch: sm_90a, mma: wgmma, schedule: persistent(raster = n, tail = stream_k)",
            "schedule: persistent(tail = whole)",
        ] {
            let s = spec(text);
            assert_eq!(spec(&s.to_spec_text()), s, "{text}");
        }
        // Valid specs stay valid when written back.
        for text in [
            "",
            "mma: mma_sync",
            "mma: mma_sync, tile: 96x96x32, warps: 3x2",
            "arch: sm_90a, mma: wgmma, schedule: persistent(tail = stream_k)",
        ] {
            let valid = crate::check_str(text).unwrap();
            assert!(
                crate::check_str(&valid.spec.to_spec_text()).is_ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn copy_vectors_parse_and_print_back() {
        for (text, copy) in [
            (
                "cp_async(ca, vector = 4)",
                Copy::CpAsync {
                    hint: CacheHint::Ca,
                    vector: 4,
                },
            ),
            (
                "cp_async(ca,vector=8)",
                Copy::CpAsync {
                    hint: CacheHint::Ca,
                    vector: 8,
                },
            ),
            ("sync(vector = 2)", Copy::Sync { vector: 2 }),
            ("sync(vector = 16)", Copy::SYNC),
            ("cp_async(ca, vector = 16)", Copy::CP_ASYNC_CA),
            // The hint defaults to `cg` (validation then asks for `ca`).
            (
                "cp_async(vector = 4)",
                Copy::CpAsync {
                    hint: CacheHint::Cg,
                    vector: 4,
                },
            ),
        ] {
            assert_eq!(spec(&format!("copy: {text}")).copy, copy, "{text}");
        }
        assert_eq!(
            Copy::CpAsync {
                hint: CacheHint::Ca,
                vector: 4
            }
            .to_string(),
            "cp_async(ca, vector = 4)"
        );
        assert_eq!(Copy::Sync { vector: 2 }.to_string(), "sync(vector = 2)");
        // The default vector prints as before: spec text (and PTX headers) unchanged.
        assert_eq!(Copy::CP_ASYNC_CA.to_string(), "cp_async(ca)");
        for bad in [
            "sync(vector = x)",
            "sync(width = 4)",
            "cp_async(ca, vector = 4, vector = 8)",
            "cp_async(ca, 4)",
            "cp_async(xx, vector = 4)",
        ] {
            assert!(parse_str(&format!("copy: {bad}")).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_tma_takes_no_vector() {
        let e = first_error("arch: sm_90a, mma: wgmma, copy: tma(vector = 4)");
        assert_eq!(
            e.message,
            "`tma(vector=4)`: the TMA copies whole boxes and needs 16-byte row strides, so it \
             takes no `vector`"
        );
        assert_eq!(
            e.help.as_deref(),
            Some(
                "`copy` takes tma or tma(multicast = N); for leading dimensions that are not \
                 16-byte multiples, an mma.sync spec with `copy: cp_async(ca, vector = 4)`"
            )
        );
        assert_eq!(e.span.start().column, 32);
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let e = first_error("stagse: 2");
        assert_eq!(e.message, "unknown key `stagse`");
        assert_eq!(e.help.as_deref(), Some("did you mean `stages`?"));
    }

    #[test]
    fn duplicate_key_is_an_error_at_the_second() {
        let e = first_error("stages: 2, stages: 3");
        assert_eq!(e.message, "duplicate key `stages`");
        assert_eq!(e.span.start().column, 11);
    }

    #[test]
    fn bad_values_point_at_the_value() {
        let e = first_error("name: k, tile: 128x128");
        assert_eq!(e.message, "`128x128` is not a valid tile");
        assert_eq!(e.span.start().column, 15);
        let e = first_error("arch: sm_75");
        assert!(e.help.unwrap().contains("sm_80"));
        assert!(parse_str("name: r#type").is_err());
        let e = first_error("name: \"my kernel\"");
        assert_eq!(e.message, "`\"my kernel\"` is not a valid kernel name");
        assert!(parse_str("copy: tma(multicast = x)").is_err());
        assert!(parse_str("stages").is_err());
        assert!(parse_str("stages:").is_err());
        assert!(parse_str("3: 4").is_err());
        assert!(parse_str("tile: 99999999999x1x1").is_err());
    }

    #[test]
    fn rust_keywords_are_not_names() {
        for keyword in RUST_KEYWORDS {
            let e = first_error(&format!("name: {keyword}, arch: sm_80"));
            assert_eq!(
                e.message,
                format!("`{keyword}` is a Rust keyword, and the name becomes a Rust module")
            );
            assert_eq!(e.span.start().column, 6, "{keyword}");
            assert_eq!(
                e.help,
                Some(format!(
                    "`name` takes an identifier that is not a Rust keyword, e.g. `{keyword}_gemm`"
                ))
            );
        }
        // Keywords are whole names: identifiers that contain one are fine.
        for name in ["fn_k", "types", "selfish", "r_type", "union", "gemm"] {
            assert_eq!(spec(&format!("name: {name}")).name, name);
        }
    }

    #[test]
    fn untokenizable_text_is_an_error_not_a_panic() {
        assert!(parse_str("name: (k").is_err());
        assert!(parse_str("name: \"k").is_err());
    }
}
