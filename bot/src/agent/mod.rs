//! The agent: the model's loop on the host, its tools in the sandbox.

pub mod tools;
