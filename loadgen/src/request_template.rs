//! The one request a benchmark sends over and over.
//!
//! Everything that can be decided before the first request is decided here, once: the
//! target address, the method, the headers (with `host` and, for GraphQL bodies,
//! `content-type`), and the body as shared [`Bytes`]. Building a request per send then
//! costs only a header-map clone and a reference-count bump on the body.

use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Uri};

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
}

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
    pub body: Bytes,
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
            BodySource::GraphQl { query, variables } => {
                (graphql_body(&query, variables.as_deref())?, true)
            }
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
        Ok(RequestTemplate {
            addr,
            url: url.to_string(),
            method,
            path,
            headers: header_map,
            body,
        })
    }

    /// A fresh request for one send.
    pub fn build(&self) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.path.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
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
        assert_eq!(req.uri(), "/x?y=1");
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
