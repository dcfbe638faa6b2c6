//! Checks requests against a forge's own API description (Swagger 2.0 for
//! Gitea, OpenAPI 3.0 for GitHub, from `../shared/testdata`): the method
//! and path must be an operation it describes, path parameters of the
//! declared types, required query parameters present, and a JSON body
//! valid against the operation's schema. Bodies are checked strictly: a
//! property the description does not name is reported (the real server
//! would ignore it, so a client sending it has misunderstood the API).

use std::path::Path;

use serde_json::{Map, Value};

pub struct ApiSpec {
    /// The description's schemas, made strict, where `$ref`s point.
    root: Value,
    base_path: String,
    operations: Vec<Operation>,
}

struct Operation {
    method: String,
    template: String,
    segments: Vec<String>,
    /// Declared parameters: (name, in, type, required).
    parameters: Vec<(String, String, String, bool)>,
    body: Option<Value>,
}

/// Which operation a request was, in the description's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub method: String,
    /// `/repos/{owner}/{repo}/issues/{index}`.
    pub template: String,
    /// The query parameters the operation declares: a list that takes
    /// `per_page` (GitHub) or `limit` (Gitea) is served in pages.
    pub query: Vec<String>,
}

impl Matched {
    /// Whether the operation declares the query parameter `name`.
    pub fn takes(&self, name: &str) -> bool {
        self.query.iter().any(|q| q == name)
    }
}

impl ApiSpec {
    /// Loads a description; `base_path` is what the server's paths start
    /// with (`/api/v1` for Gitea, empty for GitHub).
    pub fn load(path: &Path, base_path: &str) -> anyhow::Result<ApiSpec> {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read the API description {} ({e}): the shared test data belongs at ../shared/testdata",
                path.display()
            )
        })?)?;
        let swagger = doc.get("swagger").is_some();
        let defs_pointer = if swagger {
            "/definitions"
        } else {
            "/components/schemas"
        };
        let mut definitions = doc.pointer(defs_pointer).cloned().unwrap_or(Value::Null);
        strict(&mut definitions);
        let root = if swagger {
            serde_json::json!({ "definitions": definitions })
        } else {
            serde_json::json!({ "components": { "schemas": definitions } })
        };
        let mut operations = Vec::new();
        for (template, item) in doc["paths"].as_object().into_iter().flatten() {
            let shared: Vec<Value> = item["parameters"].as_array().cloned().unwrap_or_default();
            for (method, op) in item.as_object().into_iter().flatten() {
                if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                    continue;
                }
                let mut parameters = Vec::new();
                let mut body = None;
                for p in shared
                    .iter()
                    .chain(op["parameters"].as_array().into_iter().flatten())
                {
                    let p = resolve(&doc, p);
                    let place = p["in"].as_str().unwrap_or_default().to_owned();
                    if place == "body" {
                        body = p.get("schema").cloned();
                        continue;
                    }
                    let kind = p["type"]
                        .as_str()
                        .or_else(|| p["schema"]["type"].as_str())
                        .unwrap_or("string")
                        .to_owned();
                    parameters.push((
                        p["name"].as_str().unwrap_or_default().to_owned(),
                        place,
                        kind,
                        p["required"].as_bool().unwrap_or(false),
                    ));
                }
                if let Some(schema) = op.pointer("/requestBody/content/application~1json/schema") {
                    body = Some(schema.clone());
                }
                let full = template.trim_start_matches(base_path);
                operations.push(Operation {
                    method: method.to_uppercase(),
                    template: full.to_owned(),
                    segments: split(full),
                    parameters,
                    body: body.map(|mut b| {
                        strict(&mut b);
                        b
                    }),
                });
            }
        }
        Ok(ApiSpec {
            root,
            base_path: base_path.to_owned(),
            operations,
        })
    }

    /// The operation `method path?query` with `body` is, or what is wrong
    /// with it. `path` includes the base path.
    pub fn check(
        &self,
        method: &str,
        path: &str,
        query: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Matched, String> {
        let Some(rest) = path.strip_prefix(&self.base_path) else {
            return Err(format!("{path} is not under {}", self.base_path));
        };
        let segments = split(rest);
        let candidates: Vec<&Operation> = self
            .operations
            .iter()
            .filter(|op| matches(&op.segments, &segments))
            .collect();
        if candidates.is_empty() {
            return Err(format!(
                "{method} {path}: no such path in the API description"
            ));
        }
        // The most literal template wins: /issues/comments over /issues/{index}.
        let op = candidates
            .iter()
            .filter(|op| op.method == method)
            .max_by_key(|op| op.segments.iter().filter(|s| !s.starts_with('{')).count())
            .ok_or_else(|| {
                let allowed: Vec<&str> = candidates.iter().map(|o| o.method.as_str()).collect();
                format!(
                    "{method} {path}: the API allows only {}",
                    allowed.join(", ")
                )
            })?;
        for (template, actual) in op.segments.iter().zip(&segments) {
            let Some(name) = template.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else {
                continue;
            };
            let kind = op
                .parameters
                .iter()
                .find(|(n, place, _, _)| n == name && place == "path")
                .map(|(_, _, k, _)| k.as_str())
                .unwrap_or("string");
            if kind == "integer" && actual.parse::<i64>().is_err() {
                return Err(format!(
                    "{method} {}: path parameter {name} must be an integer, got {actual:?}",
                    op.template
                ));
            }
        }
        let pairs: Vec<(String, String)> = query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (name, value) = p.split_once('=').unwrap_or((p, ""));
                (name.to_owned(), value.to_owned())
            })
            .collect();
        let given: Vec<String> = pairs.iter().map(|(name, _)| name.clone()).collect();
        for (name, place, _, required) in &op.parameters {
            if place == "query" && *required && !given.contains(name) {
                return Err(format!(
                    "{method} {}: the query parameter {name} is required",
                    op.template
                ));
            }
        }
        for (name, value) in &pairs {
            let Some((_, _, kind, _)) = op
                .parameters
                .iter()
                .find(|(n, place, _, _)| n == name && place == "query")
            else {
                return Err(format!(
                    "{method} {}: unknown query parameter {name}",
                    op.template
                ));
            };
            if kind == "integer" && value.parse::<i64>().is_err() {
                return Err(format!(
                    "{method} {}: query parameter {name} must be an integer, got {value:?}",
                    op.template
                ));
            }
        }
        match (&op.body, body) {
            (Some(schema), Some(body)) => self.validate(schema, body).map_err(|problems| {
                format!(
                    "{method} {}: the body does not match the API: {problems}",
                    op.template
                )
            })?,
            (None, Some(body)) if !body.is_null() => {
                return Err(format!(
                    "{method} {}: this operation takes no body",
                    op.template
                ));
            }
            _ => {}
        }
        Ok(Matched {
            method: method.to_owned(),
            template: op.template.clone(),
            query: op
                .parameters
                .iter()
                .filter(|(_, place, _, _)| place == "query")
                .map(|(name, _, _, _)| name.clone())
                .collect(),
        })
    }

    fn validate(&self, schema: &Value, instance: &Value) -> Result<(), String> {
        let mut document = self.root.clone();
        let map = document.as_object_mut().expect("an object");
        match schema {
            Value::Object(fields) => {
                for (k, v) in fields {
                    map.insert(k.clone(), v.clone());
                }
            }
            other => {
                map.insert("allOf".into(), Value::Array(vec![other.clone()]));
            }
        }
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .build(&document)
            .map_err(|e| format!("the description's schema does not compile: {e}"))?;
        let problems: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

fn split(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn matches(template: &[String], actual: &[String]) -> bool {
    template.len() == actual.len()
        && template
            .iter()
            .zip(actual)
            .all(|(t, a)| segment_matches(t, a))
}

/// One path segment against its template: a literal, `{name}`, or a
/// mixed one such as Gitea's `{index}.{diffType}`, whose literal parts
/// (the `.`) must be there.
fn segment_matches(template: &str, actual: &str) -> bool {
    if !template.contains('{') {
        return template == actual;
    }
    let mut rest = actual;
    let mut parts = template.split('{').peekable();
    // The literal before the first parameter.
    let Some(head) = parts.next().and_then(|h| rest.strip_prefix(h)) else {
        return false;
    };
    rest = head;
    while let Some(part) = parts.next() {
        let Some((_, literal)) = part.split_once('}') else {
            return false;
        };
        if literal.is_empty() {
            if parts.peek().is_some() {
                return false; // two parameters side by side: ambiguous
            }
            return !rest.is_empty();
        }
        // The parameter takes at least one character, up to the literal.
        match rest.get(1..).and_then(|r| r.find(literal)) {
            Some(at) => rest = &rest[at + 1 + literal.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// A parameter given as a `$ref` to the description's shared ones.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap_or(value),
        None => value,
    }
}

/// Objects with declared properties refuse others; OpenAPI's
/// `nullable: true` becomes a type that admits null.
fn strict(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("properties").is_some_and(Value::is_object)
                && !map.contains_key("additionalProperties")
                && !map.contains_key("allOf")
                && !map.contains_key("anyOf")
                && !map.contains_key("oneOf")
            {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            if map.remove("nullable") == Some(Value::Bool(true)) {
                nullable(map);
            }
            for (_, v) in map.iter_mut() {
                strict(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

fn nullable(map: &mut Map<String, Value>) {
    match map.get("type").cloned() {
        Some(Value::String(t)) => {
            map.insert("type".into(), serde_json::json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            }
        }
        _ => {
            let inner = Value::Object(std::mem::take(map));
            map.insert("anyOf".into(), serde_json::json!([inner, {"type": "null"}]));
        }
    }
}

#[cfg(test)]
mod segment_tests {
    use super::segment_matches;

    #[test]
    fn mixed_segments_need_their_literal_parts() {
        assert!(segment_matches("{index}", "2"));
        assert!(!segment_matches("{index}.{diffType}", "2"));
        assert!(segment_matches("{index}.{diffType}", "2.diff"));
        assert!(!segment_matches("{index}.{diffType}", "2."));
        assert!(segment_matches("pulls", "pulls"));
        assert!(!segment_matches("pulls", "issues"));
    }
}
