//! Shared pieces of the end-to-end suite.

pub mod harness;
pub mod testdata;
