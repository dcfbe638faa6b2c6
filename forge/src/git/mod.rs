//! Host-side git: the mirrors, the shared checkouts, the working copies
//! and the push. What stands between the agent's work and a push (the
//! integrity snapshot, the secret scan, the commit) is the gate's crate,
//! `forgehand-gate`.

pub mod checkout;
pub mod mirror;
pub mod publish;
pub mod retry;
pub mod transport;

pub use checkout::{
    working_copy_differs, Checkout, CheckoutError, CheckoutLimits, Checkouts, Differs,
};
pub use mirror::{branch_name, held_ref, CopyStrategy, Mirror, MirrorCache, HELD_PREFIX};
pub use publish::{push_branch, push_branch_with, push_ref, PushError, PushRequest};
pub use retry::GitCall;
pub use transport::{Credentials, TransportError};
