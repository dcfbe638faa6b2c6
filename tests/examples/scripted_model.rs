//! The scripted model server on its own, for trying `forgehand run` by
//! hand where no model is reachable (these machines reach none): it
//! plays the tool calls of a script file and answers in both dialects
//! (`/v1/chat/completions`, `/v1/messages`), printing its base URL.
//!
//!   scripted_model SCRIPT.json
//!
//! SCRIPT.json: a list of `{"call": NAME, "args": {…}}` and
//! `{"finish": SUMMARY, "title": TITLE}`.

use forgehand_tests::model_server::{ModelServer, Step};
use serde_json::Value;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: scripted_model SCRIPT.json"))?;
    let script: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let steps: Vec<Step> = script
        .iter()
        .map(|step| match (step.get("call"), step.get("finish")) {
            (Some(name), _) => Ok(Step::call(
                name.as_str().unwrap_or_default(),
                step["args"].clone(),
            )),
            (_, Some(summary)) => Ok(Step::finish(
                summary.as_str().unwrap_or_default(),
                step["title"].as_str().unwrap_or_default(),
            )),
            _ => Err(anyhow::anyhow!("a step is a call or a finish: {step}")),
        })
        .collect::<anyhow::Result<_>>()?;
    let server = ModelServer::start(steps).await?;
    println!("{}", server.url_for("openai"));
    tokio::signal::ctrl_c().await?;
    Ok(())
}
