//! No two template macros anywhere under `codegen/templates/` have the same body: a macro
//! two families need lives once, in `templates/common/` (the project's `duplicates` tool
//! reads no `.tera` file). Bodies are compared after dropping whitespace at the ends of each
//! line, blank lines, tera comments and whitespace control (`{%-`, `-}}`), and again with
//! each macro's parameters renamed by position, so a copy whose only change is the names of
//! its arguments is caught too. Other renames (registers, the names of the macros a body
//! calls) make a different body here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One macro of a template file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Macro {
    /// `file::name`, the file relative to the templates folder.
    place: String,
    params: Vec<String>,
    body: String,
}

/// Every macro of `text` (the contents of `file`).
fn macros(file: &str, text: &str) -> Vec<Macro> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(tag) = next_tag(text, at) {
        at = tag.end;
        let Some(signature) = tag.contents.strip_prefix("macro ") else {
            continue;
        };
        let (name, params) = signature
            .split_once('(')
            .unwrap_or_else(|| panic!("{file}: a macro without parameters: {signature}"));
        let params = params
            .trim_end()
            .strip_suffix(')')
            .unwrap_or_else(|| panic!("{file}: unclosed parameters: {signature}"))
            .split(',')
            .map(|param| param.split('=').next().unwrap_or("").trim().to_string())
            .filter(|param| !param.is_empty())
            .collect();
        // The body runs to the next `endmacro` (tera does not nest macros).
        let body_start = tag.end;
        let body_end = loop {
            let tag = next_tag(text, at)
                .unwrap_or_else(|| panic!("{file}: macro {name} has no endmacro"));
            at = tag.end;
            if tag.contents.starts_with("endmacro") {
                break tag.start;
            }
        };
        found.push(Macro {
            place: format!("{file}::{}", name.trim()),
            params,
            body: normalize(&text[body_start..body_end]),
        });
    }
    found
}

/// A `{% .. %}` tag: its contents (whitespace control and padding trimmed) and where it
/// starts and ends in the text.
struct Tag<'a> {
    contents: &'a str,
    start: usize,
    end: usize,
}

/// The first tag at or after byte `from`.
fn next_tag(text: &str, from: usize) -> Option<Tag<'_>> {
    let start = from + text[from..].find("{%")?;
    let close = start + text[start..].find("%}")?;
    Some(Tag {
        contents: text[start + 2..close].trim_matches('-').trim(),
        start,
        end: close + 2,
    })
}

/// The body without tera comments, whitespace control, line-end whitespace and blank lines.
fn normalize(body: &str) -> String {
    let mut text = String::new();
    let mut rest = body;
    while let Some(start) = rest.find("{#") {
        text.push_str(&rest[..start]);
        let end = rest[start..]
            .find("#}")
            .map_or(rest.len(), |end| start + end + 2);
        rest = &rest[end..];
    }
    text.push_str(rest);
    let text = text
        .replace("{%-", "{%")
        .replace("-%}", "%}")
        .replace("{{-", "{{")
        .replace("-}}", "}}");
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `body` with each whole-word use of a parameter replaced by its position (`$0`, `$1`, ..).
fn with_positional_params(body: &str, params: &[String]) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(body.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match params.iter().position(|param| param == word) {
            Some(position) => out.push_str(&format!("${position}")),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in body.chars() {
        if is_word(c) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Pairs of macros with the same body, each with how they match.
fn duplicates(all: &[Macro]) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen: BTreeMap<String, &Macro> = BTreeMap::new();
    let mut seen_renamed: BTreeMap<String, &Macro> = BTreeMap::new();
    for m in all {
        if let Some(first) = seen.get(&m.body) {
            found.push(format!(
                "`{}` and `{}` have the same body",
                first.place, m.place
            ));
            continue;
        }
        seen.insert(m.body.clone(), m);
        let renamed = with_positional_params(&m.body, &m.params);
        if let Some(first) = seen_renamed.get(&renamed) {
            found.push(format!(
                "`{}` and `{}` have the same body up to the names of their parameters",
                first.place, m.place
            ));
            continue;
        }
        seen_renamed.insert(renamed, m);
    }
    found
}

fn template_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            template_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "tera") {
            files.push(path);
        }
    }
}

#[test]
fn no_two_template_macros_have_the_same_body() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates");
    let mut files = Vec::new();
    template_files(&root, &mut files);
    files.sort();
    let mut all = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("a readable template");
        let name = path
            .strip_prefix(&root)
            .expect("under the templates folder");
        all.extend(macros(&name.to_string_lossy(), &text));
    }
    // The families' templates and the common ones are all read.
    assert!(files.len() >= 10, "{files:?}");
    assert!(all.len() >= 100, "{} macros", all.len());
    let found = duplicates(&all);
    assert!(
        found.is_empty(),
        "move each to templates/common/:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_copies_and_renamed_copies() {
    let text = "{% macro a(p, guard) %}\n\tld {{ p.x }}, {{ guard }};\n{%- endmacro a %}\n\
                {#- b is a's copy, laid out otherwise -#}\n\
                {% macro b(p, guard) -%}\n   ld {{ p.x }}, {{ guard }};   \n\n{% endmacro %}\n\
                {% macro c(plan, g) %}\n\tld {{ plan.x }}, {{ g }};\n{%- endmacro c %}\n\
                {% macro d(p, guard) %}\n\tst {{ p.x }}, {{ guard }};\n{%- endmacro d %}\n";
    let all = macros("t.tera", text);
    let names: Vec<&str> = all.iter().map(|m| m.place.as_str()).collect();
    assert_eq!(names, ["t.tera::a", "t.tera::b", "t.tera::c", "t.tera::d"]);
    assert_eq!(all[0].params, ["p", "guard"]);
    assert_eq!(
        duplicates(&all),
        [
            "`t.tera::a` and `t.tera::b` have the same body",
            "`t.tera::a` and `t.tera::c` have the same body up to the names of their parameters",
        ]
    );
}
