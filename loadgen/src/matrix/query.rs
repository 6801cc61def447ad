//! A query table of an experiment file (`[query]`, or a configuration's own `query`):
//! one document, its variables and the exact answer it must get. The document must
//! parse, name its operation when it has several, and declare the variables given
//! ([`crate::workload::document`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bench::request_template::PLACEHOLDER;
use crate::workload::document::{located, read as read_document};
use crate::workload::source::Place;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryFile {
    #[serde(default)]
    pub document: Option<String>,
    /// The document read from a file, relative to the experiment file.
    #[serde(default)]
    document_file: Option<String>,
    #[serde(default)]
    variables: Option<toml::Table>,
    #[serde(default)]
    expected: Option<String>,
    /// The expected answer read from a file, relative to the experiment file.
    #[serde(default)]
    expected_file: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    headers: Vec<String>,
    #[serde(default)]
    unique_literals: Option<bool>,
    /// Which operation of the document runs (needed when it has several).
    #[serde(default)]
    operation_name: Option<String>,
}

/// The query every configuration is measured with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuerySpec {
    pub document: String,
    /// Variables as a JSON object, if any.
    pub variables: Option<serde_json::Value>,
    /// The exact answer the gateway must give (compared as JSON).
    pub expected: serde_json::Value,
    /// Path of the GraphQL endpoint on the gateway.
    pub path: String,
    /// Extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// Every `{{n}}` of the document and the variables is numbered per request, unique in
    /// the run (as `loadgen bench --unique-literals`); the answer check reads it as 0.
    pub unique_literals: bool,
    /// The operation of the document that runs, sent as `operationName`.
    pub operation_name: Option<String>,
    /// Where the document's first line is, when it was read from a file.
    #[serde(skip)]
    pub document_at: Option<Place>,
}

impl QuerySpec {
    /// The body of the answer check: [`QuerySpec::body`] with every `{{n}}` read as 0.
    pub fn check_body(&self) -> String {
        if self.unique_literals {
            self.body().replace(PLACEHOLDER, "0")
        } else {
            self.body()
        }
    }

    /// The JSON body sent to the gateway.
    pub fn body(&self) -> String {
        let mut body = serde_json::Map::new();
        body.insert(
            "query".into(),
            serde_json::Value::String(self.document.clone()),
        );
        if let Some(name) = &self.operation_name {
            body.insert(
                "operationName".into(),
                serde_json::Value::String(name.clone()),
            );
        }
        if let Some(v) = &self.variables {
            body.insert("variables".into(), v.clone());
        }
        serde_json::Value::Object(body).to_string()
    }
}

/// A `[query]` table (top-level or a configuration's own); `at` names it in messages,
/// files are read relative to `base_dir` (the experiment file's directory).
pub fn resolve_query(q: QueryFile, at: &str, base_dir: &Path) -> Result<QuerySpec, String> {
    let read = |key: &str, file: &str| {
        let full = base_dir.join(file);
        std::fs::read_to_string(&full)
            .map_err(|e| format!("{at}.{key} {:?}: cannot read {}: {e}", file, full.display()))
    };
    let mut document_place = None;
    let document = match (q.document, q.document_file) {
        (Some(d), None) => d,
        (None, Some(f)) => {
            document_place = Some(Place {
                file: base_dir.join(&f),
                line: 1,
            });
            read("document_file", &f)?
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "{at}: give either document or document_file, not both"
            ))
        }
        (None, None) => return Err(format!("{at}: needs document or document_file")),
    };
    if document.trim().is_empty() {
        return Err(format!("{at}.document is empty"));
    }
    let expected_text = match (q.expected, q.expected_file) {
        (Some(e), None) => e,
        (None, Some(f)) => read("expected_file", &f)?,
        (Some(_), Some(_)) => {
            return Err(format!(
                "{at}: give either expected or expected_file, not both"
            ))
        }
        (None, None) => return Err(format!("{at}: needs expected or expected_file")),
    };
    let expected: serde_json::Value = serde_json::from_str(&expected_text)
        .map_err(|e| format!("{at}.expected is not JSON: {e}"))?;
    let variables = match q.variables {
        Some(table) => {
            Some(serde_json::to_value(table).map_err(|e| format!("{at}.variables: {e}"))?)
        }
        None => None,
    };
    let query_path = q.path.unwrap_or_else(|| "/graphql".into());
    if !query_path.starts_with('/') {
        return Err(format!("{at}.path {query_path:?} must start with '/'"));
    }
    for h in &q.headers {
        if !h.contains(':') {
            return Err(format!("{at}.headers: {h:?} is not `Name: value`"));
        }
    }
    let unique_literals = q.unique_literals.unwrap_or(false);
    // The document's operation, and the variables it declares against those given.
    let readable = document.replace(PLACEHOLDER, "0");
    let facts = read_document(&readable, q.operation_name.as_deref()).map_err(|e| {
        let place = document_place.as_ref().map(|p| p.down(e.line - 1));
        located(place.as_ref(), format!("{at}: {}", e.message))
    })?;
    let given: Vec<String> = variables
        .as_ref()
        .and_then(|v| v.as_object())
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    facts.check_variables(&given).map_err(|e| {
        let place = document_place.as_ref().map(|p| p.down(facts.line - 1));
        located(place.as_ref(), format!("{at}: {e}"))
    })?;
    let spec = QuerySpec {
        document,
        variables,
        expected,
        path: query_path,
        headers: q.headers,
        unique_literals,
        operation_name: q.operation_name,
        document_at: document_place,
    };
    if unique_literals && spec.operation_name.is_some() {
        return Err(format!(
            "{at}: unique_literals and operation_name cannot be combined"
        ));
    }
    if unique_literals && !spec.body().contains(PLACEHOLDER) {
        return Err(format!(
            "{at}.unique_literals = true, but neither the document nor the variables hold {PLACEHOLDER}"
        ));
    }
    Ok(spec)
}
