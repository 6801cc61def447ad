//! What became of one request: the error classes a report counts separately.
//!
//! A request either got a response or it did not. Without one it is a `Transport` error
//! (refused, reset, closed mid-response) or a `Timeout` (`--timeout` elapsed). With one,
//! the status may be outside 2xx (`Non2xx`, or `Shed`: a `503`, the server refusing
//! load), or it may be a 2xx whose body is a GraphQL response carrying `errors`
//! (`GraphQl`): the case plain HTTP tools count as success. For those, [`error_paths`]
//! tells where in the answer the errors are.

use serde::Deserialize;

/// The class of one finished request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx response without GraphQL errors.
    Ok,
    /// A response whose status is not 2xx (nor 503).
    Non2xx,
    /// A `503`: the server shed the request (overload, or a drain).
    Shed,
    /// A 2xx response whose JSON body has a non-empty top-level `errors`.
    GraphQl,
    /// No response: connect failure, reset, or the connection closed early.
    Transport,
    /// No response within `--timeout`.
    Timeout,
}

impl Outcome {
    /// Whether a response arrived (so its latency belongs in the histogram).
    pub fn has_response(self) -> bool {
        matches!(
            self,
            Outcome::Ok | Outcome::Non2xx | Outcome::Shed | Outcome::GraphQl
        )
    }
}

/// The part of a GraphQL response we look at; every other key is skipped unparsed.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    errors: Option<serde_json::Value>,
}

/// Whether a response body is a GraphQL response that carries errors.
///
/// Cheap on the common path: a body without the bytes `"errors"` is not parsed at all.
/// When they appear, the body is parsed to tell a real top-level `errors` key from the
/// word inside data. `errors: null` and `errors: []` do not count.
pub fn body_has_graphql_errors(body: &[u8]) -> bool {
    if !crate::bench::errors_key::contains(body) {
        return false;
    }
    match serde_json::from_slice::<Envelope>(body) {
        Ok(Envelope {
            errors: None | Some(serde_json::Value::Null),
        }) => false,
        Ok(Envelope {
            errors: Some(serde_json::Value::Array(list)),
        }) => !list.is_empty(),
        Ok(Envelope { errors: Some(_) }) => true,
        Err(_) => false,
    }
}

/// Where a GraphQL response's errors are: each error's `path` with list indices as
/// `[]` (`["me","topPosts",0,"pid"]` → `me.topPosts[].pid`), or `(no path)`; each
/// distinct place once per response.
pub fn error_paths(body: &[u8]) -> Vec<String> {
    error_places(body)
        .into_iter()
        .map(|(place, _)| place)
        .collect()
}

/// [`error_paths`], each place with the message of its first error.
pub fn error_places(body: &[u8]) -> Vec<(String, String)> {
    #[derive(Deserialize)]
    struct Errors {
        #[serde(default)]
        errors: Vec<Located>,
    }
    #[derive(Deserialize)]
    struct Located {
        #[serde(default)]
        path: Option<Vec<serde_json::Value>>,
        #[serde(default)]
        message: Option<String>,
    }
    let Ok(Errors { errors }) = serde_json::from_slice::<Errors>(body) else {
        return Vec::new();
    };
    let mut places: Vec<(String, String)> = errors
        .iter()
        .map(|e| {
            let place = match e.path.as_deref() {
                None | Some([]) => "(no path)".to_string(),
                Some(path) => {
                    let mut place = String::new();
                    for item in path {
                        match item {
                            serde_json::Value::String(key) => {
                                if !place.is_empty() {
                                    place.push('.');
                                }
                                place.push_str(key);
                            }
                            _ => place.push_str("[]"),
                        }
                    }
                    place
                }
            };
            (place, e.message.clone().unwrap_or_default())
        })
        .collect();
    // Sorted by place, the first error of each kept (a stable sort).
    places.sort_by(|a, b| a.0.cmp(&b.0));
    places.dedup_by(|later, first| later.0 == first.0);
    places
}

/// Classify a finished response from its status and (for 2xx) its body.
pub fn classify(status: u16, body: &[u8]) -> Outcome {
    if status == 503 {
        Outcome::Shed
    } else if !(200..300).contains(&status) {
        Outcome::Non2xx
    } else if body_has_graphql_errors(body) {
        Outcome::GraphQl
    } else {
        Outcome::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_errors_are_found_only_at_top_level() {
        assert!(body_has_graphql_errors(
            br#"{"data":null,"errors":[{"message":"x"}]}"#
        ));
        assert!(body_has_graphql_errors(
            br#"{"errors":[{"message":"x"}],"data":{"a":1}}"#
        ));
        assert!(!body_has_graphql_errors(br#"{"data":{"a":"\"errors\""}}"#));
        assert!(!body_has_graphql_errors(br#"{"data":{"errors":[1]}}"#));
        assert!(!body_has_graphql_errors(br#"{"data":{},"errors":[]}"#));
        assert!(!body_has_graphql_errors(br#"{"data":{},"errors":null}"#));
        assert!(!body_has_graphql_errors(b"not json \"errors\""));
        assert!(!body_has_graphql_errors(b""));
    }

    #[test]
    fn classify_puts_status_before_body() {
        assert_eq!(classify(200, br#"{"data":{}}"#), Outcome::Ok);
        assert_eq!(classify(204, b""), Outcome::Ok);
        assert_eq!(
            classify(200, br#"{"errors":[{"message":"x"}]}"#),
            Outcome::GraphQl
        );
        assert_eq!(
            classify(500, br#"{"errors":[{"message":"x"}]}"#),
            Outcome::Non2xx
        );
        assert_eq!(classify(301, b""), Outcome::Non2xx);
        assert_eq!(classify(503, b""), Outcome::Shed);
    }

    #[test]
    fn error_paths_name_the_fields() {
        let body = br#"{"data":{"me":{"topPosts":null}},"errors":[
            {"message":"a","path":["me","topPosts"]},
            {"message":"b","path":["topPosts",0,"author","name"]},
            {"message":"c","path":["topPosts",1,"author","name"]},
            {"message":"d"}]}"#;
        assert_eq!(
            error_paths(body),
            ["(no path)", "me.topPosts", "topPosts[].author.name"]
        );
        assert!(error_paths(b"not json").is_empty());
        assert_eq!(
            error_places(body)[2],
            ("topPosts[].author.name".to_string(), "b".to_string())
        );
    }
}
