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
pub use mirror::{branch_name, CopyStrategy, Mirror, MirrorCache};
pub use publish::{push_branch, push_branch_with, PushError, PushRequest};
pub use retry::GitCall;
pub use transport::{Credentials, TransportError};
