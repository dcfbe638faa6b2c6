//! The evaluation dataset of the tests (`tests/src/eval_dataset.rs`),
//! written out for scripts that measure on it (`bench/eval_tokens.sh`):
//!
//!   eval_dataset DIR
//!
//! DIR/repos/ (the instances' repositories), DIR/dataset.jsonl (the rows,
//! for `forgehand eval`) and DIR/scripts/INSTANCE.json (for
//! `scripted_model`: a model that looks for the code the problem names,
//! reads the file, makes the fix and finishes).

use std::path::PathBuf;

use forgehand_tests::eval_dataset;
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or_else(|| anyhow::anyhow!("usage: eval_dataset DIR"))?,
    );
    let instances = eval_dataset::build(&dir.join("repos"));
    eval_dataset::write_jsonl(&instances, &dir.join("dataset.jsonl"));
    std::fs::create_dir_all(dir.join("scripts"))?;
    for instance in &instances {
        let (path, old, new) = &instance.fix;
        let first = old.lines().find(|l| !l.trim().is_empty()).unwrap_or(old);
        let script = json!([
            {"call": "bash", "args": {"command": format!("grep -rn -F -- {} .", shell_quote(first.trim()))}},
            {"call": "bash", "args": {"command": format!("cat -n {}", shell_quote(path))}},
            {"call": "edit_file", "args": {"path": path, "old_string": old, "new_string": new}},
            {"finish": "Fixed the bug the issue describes.", "title": "Fix the bug"},
        ]);
        std::fs::write(
            dir.join("scripts")
                .join(format!("{}.json", instance.instance_id)),
            serde_json::to_vec_pretty(&script)?,
        )?;
    }
    println!("{}", instances.len());
    Ok(())
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
