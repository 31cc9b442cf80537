//! The old name of [`super::table::Table`], kept only until
//! `plugin::published` moves onto the table itself.

pub use super::table::{Packed, VALUE_WORDS};

/// A [`super::table::Table`] of six-word values.
pub type SeqTable<V> = super::table::Table<V, VALUE_WORDS>;
