//! CANN's C types and constants, defined in [`crate::base::types`] (the C
//! vocabulary belongs to the bottom layer, which every layer may use) and
//! re-exported here, where the C ABI's users look for them.

pub use crate::base::types::*;
