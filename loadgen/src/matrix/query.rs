//! A query table of an experiment file (`[query]`, or a configuration's own `query`):
//! one document, its variables and the exact answer it must get. The document must
//! parse, name its operation when it has several, and declare the variables given
//! ([`crate::workload::document`]).
//!
//! `send` says how the load names the document ([`Send`]): its text (the default), an
//! automatic persisted query's hash by POST or by GET, or a trusted document's id. The
//! answer check always sends what registers the document (the text with its hash
//! under APQ), so the load's first request already finds it registered.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bench::request_template::{percent_encoded, PLACEHOLDER};
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
    /// How the load names the document: "text", "get", "apq", "apq-get" or "document-id".
    #[serde(default)]
    send: Option<String>,
}

/// How the load names the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Send {
    /// `{"query": text}` by POST.
    Text,
    /// The text in the URL of a GET (`?query=…`), with no body: what an HTTP cache in
    /// front can keep.
    Get,
    /// `extensions.persistedQuery.sha256Hash` alone, by POST.
    Apq,
    /// The same in the URL of a GET, with no body.
    ApqGet,
    /// `{"documentId": sha256}` by POST: a trusted document whose id is its SHA-256,
    /// as in Apollo's manifest (the gateway needs `--persisted-documents`).
    DocumentId,
}

impl Send {
    const NAMES: &'static str = "\"text\", \"get\", \"apq\", \"apq-get\" or \"document-id\"";

    /// As an experiment file names it.
    pub fn name(self) -> &'static str {
        match self {
            Send::Text => "text",
            Send::Get => "get",
            Send::Apq => "apq",
            Send::ApqGet => "apq-get",
            Send::DocumentId => "document-id",
        }
    }

    fn parse(name: &str) -> Option<Send> {
        Some(match name {
            "text" => Send::Text,
            "get" => Send::Get,
            "apq" => Send::Apq,
            "apq-get" => Send::ApqGet,
            "document-id" => Send::DocumentId,
            _ => return None,
        })
    }
}

/// The SHA-256 of `text`, in lower-case hexadecimal: an APQ hash, and the id of a
/// trusted document in Apollo's manifest.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the load sends, prepared once: the method, what follows the configuration's
/// path (a query string, for a GET), and the body.
pub struct LoadRequest {
    pub method: &'static str,
    pub query_string: String,
    pub body: Option<String>,
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
    /// How the load names the document.
    pub send: Send,
}

impl QuerySpec {
    /// The body of the answer check: [`QuerySpec::body`] with every `{{n}}` read as 0;
    /// under APQ, the text with its hash (which registers it); for a trusted document,
    /// its id.
    pub fn check_body(&self) -> String {
        let body = match self.send {
            Send::Text | Send::Get => self.body(),
            Send::Apq | Send::ApqGet => self.body_with(true, true, false),
            Send::DocumentId => self.body_with(false, false, true),
        };
        if self.unique_literals {
            body.replace(PLACEHOLDER, "0")
        } else {
            body
        }
    }

    /// The JSON body of the document's text.
    pub fn body(&self) -> String {
        self.body_with(true, false, false)
    }

    /// What the load sends ([`Send`]).
    pub fn load_request(&self) -> LoadRequest {
        let post = |body: String| LoadRequest {
            method: "POST",
            query_string: String::new(),
            body: Some(body),
        };
        match self.send {
            Send::Text => post(self.body()),
            Send::Apq => post(self.body_with(false, true, false)),
            Send::DocumentId => post(self.body_with(false, false, true)),
            Send::Get | Send::ApqGet => {
                let mut query_string = match self.send {
                    Send::Get => format!("?query={}", percent_encoded(&self.document)),
                    _ => format!(
                        "?extensions={}",
                        percent_encoded(&self.persisted_query().to_string())
                    ),
                };
                if let Some(name) = &self.operation_name {
                    query_string.push_str(&format!("&operationName={}", percent_encoded(name)));
                }
                if let Some(v) = &self.variables {
                    query_string
                        .push_str(&format!("&variables={}", percent_encoded(&v.to_string())));
                }
                LoadRequest {
                    method: "GET",
                    query_string,
                    body: None,
                }
            }
        }
    }

    fn persisted_query(&self) -> serde_json::Value {
        serde_json::json!({
            "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(&self.document) }
        })
    }

    /// A JSON body: the text, the APQ hash and the trusted document's id as asked.
    fn body_with(&self, text: bool, hash: bool, id: bool) -> String {
        let mut body = serde_json::Map::new();
        if text {
            body.insert(
                "query".into(),
                serde_json::Value::String(self.document.clone()),
            );
        }
        if hash {
            body.insert("extensions".into(), self.persisted_query());
        }
        if id {
            body.insert(
                "documentId".into(),
                serde_json::Value::String(sha256_hex(&self.document)),
            );
        }
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
        send: match q.send.as_deref() {
            None => Send::Text,
            Some(name) => Send::parse(name)
                .ok_or_else(|| format!("{at}.send {name:?}: expected {}", Send::NAMES))?,
        },
    };
    if unique_literals && spec.send != Send::Text {
        return Err(format!(
            "{at}: unique_literals needs send = \"text\" (a persisted document is one fixed text)"
        ));
    }
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
