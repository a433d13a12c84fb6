//! Diagnostics: one error type for parse and validation failures, rendered either as a
//! `compile_error!` at the offending token (macro) or as rustc-style text with a caret (CLI).

use crate::spec::Key;
use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use std::fmt;

/// One problem with a spec, located at the token that causes it.
#[derive(Clone, Debug)]
pub struct SpecError {
    pub span: Span,
    /// The last token of what the error points at (`span` itself for one token): a
    /// `compile_error!` underlines from `span` through it, where a macro cannot join spans.
    pub last: Span,
    /// One line: what is wrong.
    pub message: String,
    /// Short text shown under the caret (the numbers behind the message).
    pub label: Option<String>,
    /// Supporting facts, e.g. the itemized shared-memory ledger.
    pub notes: Vec<String>,
    /// A legal value to use instead.
    pub help: Option<String>,
    /// The key whose value the error points at, for the rules' errors (`None`: parse
    /// errors, and errors about the spec as a whole).
    pub key: Option<Key>,
    /// The help as a machine-applicable edit, where it proposes values: each key set to the
    /// value text (`(Key::Stages, "4")`). Empty where the help is advice, not an edit.
    /// Applying it never leaves an error on the same keys (a property test checks).
    pub fix: Vec<(Key, String)>,
}

impl SpecError {
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        SpecError {
            span,
            last: span,
            message: message.into(),
            label: None,
            notes: Vec::new(),
            help: None,
            key: None,
            fix: Vec::new(),
        }
    }

    /// Extends the error through `last`, the last token of what it points at.
    pub fn through(mut self, last: Span) -> Self {
        self.last = last;
        self
    }

    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Sets the help to `key: value`, and the machine-applicable fix to the same edit.
    pub fn fix(mut self, key: Key, value: impl Into<String>) -> Self {
        let value = value.into();
        self.help = Some(format!("{}: {value}", key.name()));
        self.fix = vec![(key, value)];
        self
    }

    /// The message with label, notes and help appended, for `compile_error!`, which carries
    /// a single string.
    pub fn full_message(&self) -> String {
        let mut text = self.message.clone();
        if let Some(label) = &self.label {
            text.push_str(&format!("\n  {label}"));
        }
        for note in &self.notes {
            text.push_str(&format!("\n  = note: {}", indent_continuation(note)));
        }
        if let Some(help) = &self.help {
            text.push_str(&format!("\n  = help: {}", indent_continuation(help)));
        }
        text
    }

    pub fn to_compile_error(&self) -> TokenStream {
        // Two tokens carrying the first and last spans: syn underlines the range between.
        let range: TokenStream = [self.span, self.last]
            .into_iter()
            .map(|span| TokenTree::Ident(Ident::new("spec", span)))
            .collect();
        syn::Error::new_spanned(range, self.full_message()).to_compile_error()
    }

    /// Renders like rustc: message, `--> origin:line:col`, the source line, a caret under the
    /// span with the label, then notes and help. `source` is the text the spec was parsed from.
    pub fn render(&self, source: &str, origin: &str) -> String {
        let start = self.span.start();
        let end = self.span.end();
        let mut out = format!("error: {}\n", self.message);
        let line_text = source.lines().nth(start.line.saturating_sub(1));
        match line_text {
            Some(line_text) if start.line > 0 => {
                let number = start.line.to_string();
                let gutter = " ".repeat(number.len());
                let width = if end.line == start.line && end.column > start.column {
                    end.column - start.column
                } else {
                    1
                };
                let lead: String = line_text
                    .chars()
                    .take(start.column)
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                out.push_str(&format!(
                    "{gutter}--> {origin}:{}:{}\n",
                    start.line,
                    start.column + 1
                ));
                out.push_str(&format!("{gutter} |\n{number} | {line_text}\n"));
                out.push_str(&format!("{gutter} | {lead}{}", "^".repeat(width)));
                if let Some(label) = &self.label {
                    out.push_str(&format!(" {label}"));
                }
                out.push('\n');
                if !self.notes.is_empty() || self.help.is_some() {
                    out.push_str(&format!("{gutter} |\n"));
                }
                self.push_notes(&mut out, &gutter);
            }
            _ => {
                out.push_str(&format!(" --> {origin}\n"));
                if let Some(label) = &self.label {
                    out.push_str(&format!("  {label}\n"));
                }
                self.push_notes(&mut out, " ");
            }
        }
        out
    }

    fn push_notes(&self, out: &mut String, gutter: &str) {
        let pad = " ".repeat(gutter.len() + 9);
        for note in &self.notes {
            out.push_str(&format!(
                "{gutter} = note: {}\n",
                note.replace('\n', &format!("\n{pad}"))
            ));
        }
        if let Some(help) = &self.help {
            out.push_str(&format!(
                "{gutter} = help: {}\n",
                help.replace('\n', &format!("\n{pad}"))
            ));
        }
    }
}

fn indent_continuation(text: &str) -> String {
    text.replace('\n', "\n          ")
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full_message())
    }
}

impl std::error::Error for SpecError {}

/// Every problem found in one spec (never empty).
#[derive(Clone, Debug)]
pub struct SpecErrors(pub Vec<SpecError>);

impl SpecErrors {
    pub fn iter(&self) -> impl Iterator<Item = &SpecError> {
        self.0.iter()
    }

    pub fn to_compile_error(&self) -> TokenStream {
        self.0.iter().map(SpecError::to_compile_error).collect()
    }

    pub fn render(&self, source: &str, origin: &str) -> String {
        let mut out: Vec<String> = self.0.iter().map(|e| e.render(source, origin)).collect();
        if self.0.len() > 1 {
            out.push(format!(
                "error: the spec has {} problems (see above)\n",
                self.0.len()
            ));
        }
        out.join("\n")
    }
}

impl From<SpecError> for SpecErrors {
    fn from(error: SpecError) -> Self {
        SpecErrors(vec![error])
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "error: {error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}
