//! Where a spec's keys and values were written: what errors point at. Below the parser and
//! the rules, so both can use it.

use crate::spec::Key;
use proc_macro2::Span;
use std::collections::BTreeMap;

/// Where each given key and its value sit in the source.
#[derive(Clone, Debug)]
pub struct SpecSpans {
    /// The whole spec (the macro call site, or the whole string); used for defaulted keys.
    pub whole: Span,
    pub(crate) keys: BTreeMap<Key, WrittenKey>,
}

/// Where a written key's value is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WrittenKey {
    /// The value's tokens joined where spans join (text), else its first token (a macro).
    pub(crate) value: Span,
    /// The value's last token: a macro's error spans from `value` to it.
    pub(crate) value_last: Span,
}

impl SpecSpans {
    /// Spans for a spec that was not parsed from text: everything points at `whole`.
    pub fn synthetic(whole: Span) -> Self {
        SpecSpans {
            whole,
            keys: BTreeMap::new(),
        }
    }

    /// The value's span if the key was written, else the whole spec's.
    pub fn value(&self, key: Key) -> Span {
        self.keys
            .get(&key)
            .map_or(self.whole, |written| written.value)
    }

    /// The span of the value's last token if the key was written, else the whole spec's:
    /// with [`SpecSpans::value`], the range a macro's error underlines.
    pub fn value_last(&self, key: Key) -> Span {
        self.keys
            .get(&key)
            .map_or(self.whole, |written| written.value_last)
    }

    /// Whether the key was written explicitly (not defaulted).
    pub fn given(&self, key: Key) -> bool {
        self.keys.contains_key(&key)
    }
}
