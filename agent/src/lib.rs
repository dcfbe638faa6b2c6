//! The agent: the model's loop on the host, its tools in the sandbox,
//! budgets the host enforces, prompts from `prompts/`, and a transcript.

pub mod budget;
pub mod config;
pub mod prompts;
pub mod run;
pub mod session;
pub mod testing;
pub mod tools;
pub mod transcript;

pub use budget::Budgets;
pub use run::{run_agent, AgentReport, AgentSettings, Conversation, Outcome};
pub use session::{HostTestError, HostTestRunner, Session, SessionError};
pub use transcript::Transcript;
