//! The one request a benchmark sends over and over.
//!
//! Everything that can be decided before the first request is decided here, once: the
//! target address, the method, the headers (with `host` and, for GraphQL bodies,
//! `content-type`), and the body as shared [`Bytes`]. The request goes out as a
//! [`WireRequest`]: its head already written out as HTTP/1.1 bytes, and its body. For
//! the one-query form the whole head is written once, so a send costs two
//! reference-count bumps.
//!
//! With `--unique-literals` the body is kept split at every `{{n}}` placeholder instead,
//! and [`RequestTemplate::build_numbered`] joins the pieces around a request number and
//! writes the head's length: two small allocations per request, paid only by runs that
//! ask for it. A workload writes each request's own headers the same way
//! ([`RequestTemplate::build_with`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Uri};

/// Why a request could not be prepared. Every variant names the flag at fault.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("--url: {0}")]
    Url(String),
    #[error("--method: {0:?} is not an HTTP method")]
    Method(String),
    #[error("-H: {0:?} is not `Name: value`")]
    Header(String),
    #[error("--variables: not a JSON object: {0}")]
    Variables(String),
    #[error("--variables needs --query-file")]
    VariablesWithoutQuery,
    #[error("--body-file and --query-file are mutually exclusive")]
    TwoBodies,
    #[error(
        "--unique-literals: the body has no {{{{n}}}} to number (put {{{{n}}}} in the document, in --variables or in --body-file)"
    )]
    NoPlaceholder,
}

/// The placeholder `--unique-literals` replaces with a per-request number.
pub const PLACEHOLDER: &str = "{{n}}";

/// What goes in the request body.
#[derive(Debug, Clone, PartialEq)]
pub enum BodySource {
    /// No body.
    Empty,
    /// Raw bytes (`--body-file`), sent as they are.
    Raw(Vec<u8>),
    /// A GraphQL document (`--query-file`) and optional variables (`--variables`),
    /// sent as `{"query": ..., "variables": ...}` with `content-type: application/json`.
    GraphQl {
        query: String,
        variables: Option<String>,
    },
    /// A GraphQL request body already written as JSON (with its `operationName`, say),
    /// sent as it is with `content-type: application/json`.
    Json(Vec<u8>),
}

/// One request as it goes on the wire.
#[derive(Debug, Clone)]
pub struct WireRequest {
    /// Request line and headers, through the blank line.
    pub head: Bytes,
    pub body: Bytes,
    /// The method is `HEAD`: its answer has no body.
    pub head_request: bool,
}

/// A fully prepared request: build one per send with [`RequestTemplate::build`].
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    /// The address connections are opened to (resolved once, before the run).
    pub addr: SocketAddr,
    /// The URL as given, for reports.
    pub url: String,
    pub method: Method,
    /// Path and query only: HTTP/1.1 requests use origin-form.
    pub path: Uri,
    pub headers: HeaderMap,
    /// The body; with `--unique-literals`, the text with its `{{n}}` placeholders.
    pub body: Bytes,
    /// `--unique-literals`: the body split at every `{{n}}` (at least two pieces).
    pub numbered: Option<Arc<[Bytes]>>,
    /// `METHOD path HTTP/1.1\r\n`.
    request_line: Bytes,
    /// The whole head for [`RequestTemplate::body`].
    fixed_head: Bytes,
}

impl RequestTemplate {
    /// Prepare a request from the command-line pieces.
    ///
    /// `method` defaults to POST when there is a body and GET otherwise.
    pub fn new(
        url: &str,
        method: Option<&str>,
        headers: &[String],
        body: BodySource,
    ) -> Result<RequestTemplate, TemplateError> {
        RequestTemplate::with_numbering(url, method, headers, body, false)
    }

    /// Like [`RequestTemplate::new`]; with `unique_literals`, every `{{n}}` of the body
    /// (document, variables or raw body) is replaced per request by a number unique in
    /// the run (see [`RequestTemplate::build_numbered`]). A body without `{{n}}` is
    /// refused. In `variables`, `{{n}}` may stand inside a string (`"p{{n}}"`) or for a
    /// whole number (`{"id": {{n}}}`).
    pub fn with_numbering(
        url: &str,
        method: Option<&str>,
        headers: &[String],
        body: BodySource,
        unique_literals: bool,
    ) -> Result<RequestTemplate, TemplateError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| TemplateError::Url(format!("{url:?}: {e}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(TemplateError::Url(format!(
                    "{url:?}: scheme {other:?} is not supported (plain http only)"
                )))
            }
            None => {
                return Err(TemplateError::Url(format!(
                    "{url:?}: needs http://host:port/path"
                )))
            }
        }
        let authority = uri
            .authority()
            .ok_or_else(|| TemplateError::Url(format!("{url:?}: no host")))?
            .clone();
        let port = authority.port_u16().unwrap_or(80);
        let addr = (
            authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']'),
            port,
        )
            .to_socket_addrs()
            .map_err(|e| TemplateError::Url(format!("{url:?}: cannot resolve host: {e}")))?
            .next()
            .ok_or_else(|| TemplateError::Url(format!("{url:?}: host has no address")))?;
        let path: Uri = uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .parse()
            .map_err(|e| TemplateError::Url(format!("{url:?}: {e}")))?;

        let mut header_map = HeaderMap::new();
        let host_value = HeaderValue::from_str(authority.as_str())
            .map_err(|e| TemplateError::Url(format!("{url:?}: host is not a header value: {e}")))?;
        header_map.insert(HOST, host_value);

        let (body, json) = match body {
            BodySource::Empty => (Bytes::new(), false),
            BodySource::Raw(bytes) => (Bytes::from(bytes), false),
            BodySource::Json(bytes) => (Bytes::from(bytes), true),
            BodySource::GraphQl { query, variables } if unique_literals => {
                (numbered_graphql_body(&query, variables.as_deref())?, true)
            }
            BodySource::GraphQl { query, variables } => {
                (graphql_body(&query, variables.as_deref())?, true)
            }
        };
        let numbered = if unique_literals {
            let pieces = split_placeholders(&body);
            if pieces.len() < 2 {
                return Err(TemplateError::NoPlaceholder);
            }
            Some(Arc::from(pieces))
        } else {
            None
        };
        if json {
            header_map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        for raw in headers {
            let (name, value) = raw
                .split_once(':')
                .ok_or_else(|| TemplateError::Header(raw.clone()))?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| TemplateError::Header(raw.clone()))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|_| TemplateError::Header(raw.clone()))?;
            // A header given on the command line replaces the default of the same name.
            header_map.insert(name, value);
        }

        let method = match method {
            Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                .map_err(|_| TemplateError::Method(m.to_string()))?,
            None if body.is_empty() => Method::GET,
            None => Method::POST,
        };
        let request_line = Bytes::from(format!("{method} {path} HTTP/1.1\r\n"));
        let mut template = RequestTemplate {
            request_line,
            addr,
            url: url.to_string(),
            method,
            path,
            headers: header_map,
            body,
            numbered,
            fixed_head: Bytes::new(),
        };
        template.fixed_head = Bytes::from(template.head(template.body.len(), &[]));
        Ok(template)
    }

    /// The request for one send.
    pub fn build(&self) -> WireRequest {
        WireRequest {
            head: self.fixed_head.clone(),
            body: self.body.clone(),
            head_request: self.method == Method::HEAD,
        }
    }

    /// The request whose `{{n}}` placeholders read `number` (`--unique-literals`); the
    /// plain one when the template is not numbered.
    pub fn build_numbered(&self, number: u64) -> WireRequest {
        let Some(pieces) = &self.numbered else {
            return self.build();
        };
        self.build_with(join_numbered(pieces, number), &[])
    }

    /// A request with this template's method, path and headers, another body, and
    /// `extra` headers (name, value) that replace the template's of the same name (a
    /// workload renders both per request).
    pub fn build_with(&self, body: Bytes, extra: &[(&HeaderName, &[u8])]) -> WireRequest {
        WireRequest {
            head: Bytes::from(self.head(body.len(), extra)),
            body,
            head_request: self.method == Method::HEAD,
        }
    }

    /// A `GET` of this template's path with `query` (`?query=…`, already encoded) and
    /// `extra` headers, without a body (a workload's reads by GET).
    pub fn build_get(&self, query: &[u8], extra: &[(&HeaderName, &[u8])]) -> WireRequest {
        let path = self.path.path().as_bytes();
        let mut line = Vec::with_capacity(path.len() + query.len() + 16);
        line.extend_from_slice(b"GET ");
        line.extend_from_slice(path);
        line.extend_from_slice(query);
        line.extend_from_slice(b" HTTP/1.1\r\n");
        WireRequest {
            head: Bytes::from(self.head_with(&line, true, 0, extra)),
            body: Bytes::new(),
            head_request: false,
        }
    }

    /// The head, written out: request line, the template's headers less those `extra`
    /// replaces, `extra`, and `content-length` (left out for an empty body of a method
    /// that has none, as GET).
    fn head(&self, body_len: usize, extra: &[(&HeaderName, &[u8])]) -> Vec<u8> {
        let bodiless = matches!(self.method, Method::GET | Method::HEAD | Method::DELETE);
        self.head_with(&self.request_line, bodiless, body_len, extra)
    }

    /// [`RequestTemplate::head`] with another request line.
    fn head_with(
        &self,
        request_line: &[u8],
        bodiless: bool,
        body_len: usize,
        extra: &[(&HeaderName, &[u8])],
    ) -> Vec<u8> {
        let mut head = Vec::with_capacity(128 + self.headers.len() * 32);
        head.extend_from_slice(request_line);
        let mut line = |name: &[u8], value: &[u8]| {
            head.extend_from_slice(name);
            head.extend_from_slice(b": ");
            head.extend_from_slice(value);
            head.extend_from_slice(b"\r\n");
        };
        for (name, value) in &self.headers {
            if !extra.iter().any(|(n, _)| *n == name) {
                line(name.as_str().as_bytes(), value.as_bytes());
            }
        }
        for (name, value) in extra {
            line(name.as_str().as_bytes(), value);
        }
        if body_len > 0 || !bodiless {
            line(
                b"content-length",
                itoa::Buffer::new().format(body_len).as_bytes(),
            );
        }
        head.extend_from_slice(b"\r\n");
        head
    }

    /// The body with every `{{n}}` read as `number` (the plain body when not numbered).
    pub fn body_for(&self, number: u64) -> Bytes {
        match &self.numbered {
            Some(pieces) => join_numbered(pieces, number),
            None => self.body.clone(),
        }
    }
}

/// `body` cut at every `{{n}}`: n placeholders give n + 1 pieces.
pub fn split_placeholders(body: &[u8]) -> Vec<Bytes> {
    let marker = PLACEHOLDER.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + marker.len() <= body.len() {
        if &body[i..i + marker.len()] == marker {
            pieces.push(Bytes::copy_from_slice(&body[start..i]));
            i += marker.len();
            start = i;
        } else {
            i += 1;
        }
    }
    pieces.push(Bytes::copy_from_slice(&body[start..]));
    pieces
}

/// The pieces joined with `number` in decimal between each two.
pub fn join_numbered(pieces: &[Bytes], number: u64) -> Bytes {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = number;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = &digits[at..];
    let size: usize =
        pieces.iter().map(Bytes::len).sum::<usize>() + digits.len() * (pieces.len() - 1);
    let mut out = Vec::with_capacity(size);
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(digits);
        }
        out.extend_from_slice(piece);
    }
    Bytes::from(out)
}

/// The GraphQL body of a numbered request: as [`graphql_body`], except that `{{n}}` may
/// also stand for a whole JSON value in the variables (`{"id": {{n}}}`); the variables
/// are then checked with `{{n}}` read as 0 and sent as written.
pub fn numbered_graphql_body(query: &str, variables: Option<&str>) -> Result<Bytes, TemplateError> {
    let Some(raw) = variables else {
        return graphql_body(query, None);
    };
    if serde_json::from_str::<serde_json::Value>(raw).is_ok() {
        return graphql_body(query, Some(raw));
    }
    // Check the shape with the placeholders read as a number, then splice the text.
    graphql_body(query, Some(&raw.replace(PLACEHOLDER, "0")))?;
    let mut body = String::from("{\"query\":");
    body.push_str(&serde_json::Value::String(query.to_string()).to_string());
    body.push_str(",\"variables\":");
    body.push_str(raw.trim());
    body.push('}');
    Ok(Bytes::from(body))
}

/// The JSON body of a GraphQL-over-HTTP POST.
pub fn graphql_body(query: &str, variables: Option<&str>) -> Result<Bytes, TemplateError> {
    let mut body = serde_json::Map::new();
    body.insert("query".into(), serde_json::Value::String(query.to_string()));
    if let Some(raw) = variables {
        let value: serde_json::Value =
            serde_json::from_str(raw).map_err(|e| TemplateError::Variables(e.to_string()))?;
        if !value.is_object() {
            return Err(TemplateError::Variables(format!(
                "{raw:?} is not an object"
            )));
        }
        body.insert("variables".into(), value);
    }
    Ok(Bytes::from(serde_json::Value::Object(body).to_string()))
}

/// `text` percent-encoded for a URL's query string (every byte but letters, digits
/// and `-_.~`).
pub fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3 / 2);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_body_sets_post_and_json() {
        let t = RequestTemplate::new(
            "http://127.0.0.1:4000/graphql",
            None,
            &[],
            BodySource::GraphQl {
                query: "{ me { id } }".into(),
                variables: Some(r#"{"n":2}"#.into()),
            },
        )
        .unwrap();
        assert_eq!(t.method, Method::POST);
        assert_eq!(t.path, "/graphql");
        assert_eq!(t.headers[CONTENT_TYPE], "application/json");
        assert_eq!(t.headers[HOST], "127.0.0.1:4000");
        let v: serde_json::Value = serde_json::from_slice(&t.body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"query": "{ me { id } }", "variables": {"n": 2}})
        );
    }

    #[test]
    fn user_headers_override_defaults() {
        let t = RequestTemplate::new(
            "http://127.0.0.1:4000/x?y=1",
            Some("put"),
            &[
                "content-type: text/plain".into(),
                "Authorization:  Bearer u1 ".into(),
            ],
            BodySource::Raw(b"hi".to_vec()),
        )
        .unwrap();
        assert_eq!(t.method, Method::PUT);
        assert_eq!(t.path, "/x?y=1");
        assert_eq!(t.headers[CONTENT_TYPE], "text/plain");
        assert_eq!(t.headers["authorization"], "Bearer u1");
        let req = t.build();
        assert_eq!(
            req.head,
            "PUT /x?y=1 HTTP/1.1\r\nhost: 127.0.0.1:4000\r\ncontent-type: text/plain\r\n\
             authorization: Bearer u1\r\ncontent-length: 2\r\n\r\n"
        );
        assert_eq!(req.body, "hi");
        // A workload's own header replaces the template's; a bodiless GET has no length.
        let get = RequestTemplate::new(
            "http://127.0.0.1:4000/",
            None,
            &["authorization: Bearer u1".into()],
            BodySource::Empty,
        )
        .unwrap();
        let name = HeaderName::from_static("authorization");
        let req = get.build_with(Bytes::new(), &[(&name, b"Bearer u9")]);
        assert_eq!(
            req.head,
            "GET / HTTP/1.1\r\nhost: 127.0.0.1:4000\r\nauthorization: Bearer u9\r\n\r\n"
        );
    }

    #[test]
    fn placeholders_split_and_join() {
        let pieces = split_placeholders(b"a{{n}}b{{n}}{{n}}c{{n");
        assert_eq!(pieces, ["a", "b", "", "c{{n"]);
        assert_eq!(join_numbered(&pieces, 0), "a0b00c{{n");
        assert_eq!(join_numbered(&pieces, 18_446_744_073_709_551_615), {
            let m = u64::MAX.to_string();
            format!("a{m}b{m}{m}c{{{{n")
        });
        assert_eq!(split_placeholders(b"none"), ["none"]);
        assert_eq!(split_placeholders(b"{{n}}"), ["", ""]);
    }

    #[test]
    fn numbered_templates_replace_every_placeholder() {
        let t = RequestTemplate::with_numbering(
            "http://127.0.0.1:4000/graphql",
            None,
            &[],
            BodySource::GraphQl {
                query: r#"{ getPost(pid: "p{{n}}") { pid } }"#.into(),
                variables: Some(r#"{"p": "p{{n}}", "id": {{n}}}"#.into()),
            },
            true,
        )
        .unwrap();
        assert_eq!(t.numbered.as_ref().unwrap().len(), 4);
        let v: serde_json::Value = serde_json::from_slice(&t.body_for(42)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "query": "{ getPost(pid: \"p42\") { pid } }",
                "variables": {"p": "p42", "id": 42}
            })
        );
        let request = t.build_numbered(7);
        let head = std::str::from_utf8(&request.head).unwrap();
        assert!(head.starts_with("POST /graphql HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json\r\n"),
            "{head}"
        );
        let length = format!("content-length: {}\r\n\r\n", request.body.len());
        assert!(head.ends_with(&length), "{head}");
        assert_eq!(request.body, t.body_for(7));
        // Unnumbered templates ignore the number and keep sending their one body.
        let plain = RequestTemplate::new(
            "http://127.0.0.1:4000/graphql",
            None,
            &[],
            BodySource::GraphQl {
                query: "{ a }".into(),
                variables: None,
            },
        )
        .unwrap();
        assert!(plain.numbered.is_none());
        assert_eq!(plain.body_for(3), plain.body);
        // A raw body is numbered too.
        let raw = RequestTemplate::with_numbering(
            "http://127.0.0.1:4000/",
            None,
            &[],
            BodySource::Raw(b"id={{n}}".to_vec()),
            true,
        )
        .unwrap();
        assert_eq!(raw.body_for(5), "id=5");
    }

    #[test]
    fn unique_literals_need_a_placeholder() {
        for body in [
            BodySource::Empty,
            BodySource::Raw(b"x".to_vec()),
            BodySource::GraphQl {
                query: "{ me { id } }".into(),
                variables: Some(r#"{"n": 1}"#.into()),
            },
        ] {
            let e = RequestTemplate::with_numbering("http://127.0.0.1:1/", None, &[], body, true)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("--unique-literals"), "{e}");
            assert!(e.contains("{{n}}"), "{e}");
        }
        // Variables that are not JSON even with {{n}} read as a number name --variables.
        let e = RequestTemplate::with_numbering(
            "http://127.0.0.1:1/",
            None,
            &[],
            BodySource::GraphQl {
                query: "{ a }".into(),
                variables: Some("{{{n}}".into()),
            },
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--variables"), "{e}");
    }

    #[test]
    fn bad_inputs_name_their_flag() {
        let e =
            RequestTemplate::new("https://127.0.0.1/", None, &[], BodySource::Empty).unwrap_err();
        assert!(e.to_string().starts_with("--url"), "{e}");
        let e = RequestTemplate::new("not a url", None, &[], BodySource::Empty).unwrap_err();
        assert!(e.to_string().starts_with("--url"), "{e}");
        let e = RequestTemplate::new(
            "http://127.0.0.1:1/",
            None,
            &["nocolon".into()],
            BodySource::Empty,
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("-H"), "{e}");
        let e = RequestTemplate::new("http://127.0.0.1:1/", Some("GE T"), &[], BodySource::Empty)
            .unwrap_err();
        assert!(e.to_string().starts_with("--method"), "{e}");
        let e = graphql_body("{a}", Some("[1]")).unwrap_err();
        assert!(e.to_string().starts_with("--variables"), "{e}");
        let e = graphql_body("{a}", Some("{nope")).unwrap_err();
        assert!(e.to_string().starts_with("--variables"), "{e}");
    }
}
