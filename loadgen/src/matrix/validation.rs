//! Whether what a configuration sends is valid against the graph, asked of the gateway
//! itself before anything is measured: every operation of its workload (writes too:
//! the gateway's `POST /validate` checks and plans a request without running it) and
//! its query, each rendered with the first key of every key set. The first refusal
//! stops the run, naming the file and the line of the document (the gateway's error
//! location, counted from where the document begins) or of its variables.

use std::net::SocketAddr;

use anyhow::{anyhow, bail, Context};
use hyper::Method;

use super::experiment::ConfigSpec;
use super::http_probe;
use super::lifecycle::PROBE_DEADLINE;
use crate::workload::source::Place;

/// What the gateway said of one request.
enum Said {
    Valid,
    /// Its first error: the message, and the line in the document when it gives one.
    Invalid {
        message: String,
        line: Option<usize>,
    },
}

/// Ask `gateway` to validate `body` (with `headers`).
async fn ask(
    gateway: SocketAddr,
    path: &str,
    headers: &[String],
    body: String,
) -> anyhow::Result<Said> {
    let answer = http_probe::request(
        gateway,
        Method::POST,
        path,
        headers,
        Some(body),
        PROBE_DEADLINE,
    )
    .await
    .context("asking the gateway's POST /validate")?;
    if answer.status == 404 {
        bail!("the gateway has no POST /validate (an older build?): rebuild it");
    }
    let json: serde_json::Value = serde_json::from_slice(&answer.body).map_err(|_| {
        anyhow!(
            "POST /validate answered HTTP {} without JSON: {:.200}",
            answer.status,
            answer.text()
        )
    })?;
    if json.get("valid").and_then(|v| v.as_bool()) == Some(true) {
        return Ok(Said::Valid);
    }
    let first = json.get("errors").and_then(|e| e.get(0));
    let message = first
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .map(String::from)
        .unwrap_or_else(|| format!("HTTP {}: {:.200}", answer.status, answer.text()));
    let line = first
        .and_then(|e| e.get("locations"))
        .and_then(|l| l.get(0))
        .and_then(|l| l.get("line"))
        .and_then(|l| l.as_u64())
        .map(|l| l as usize);
    Ok(Said::Invalid { message, line })
}

/// The place of an error: its line in the document, else the fallback's.
fn place_of(
    document: Option<&Place>,
    line: Option<usize>,
    fallback: Option<&Place>,
) -> Option<Place> {
    match (document, line) {
        (Some(d), Some(l)) if l >= 1 => Some(d.down(l - 1)),
        _ => fallback.or(document).cloned(),
    }
}

fn refusal(place: Option<Place>, what: &str, message: &str) -> anyhow::Error {
    let text = format!("{what} does not validate against the gateway's graph: {message}");
    match place {
        Some(p) => anyhow!("{p}: {text}"),
        None => anyhow!(text),
    }
}

/// Validate everything `config` sends against the gateway at `gateway`.
pub async fn validate(gateway: SocketAddr, config: &ConfigSpec) -> anyhow::Result<()> {
    if let Some(query) = &config.query {
        if let Said::Invalid { message, line } = ask(
            gateway,
            &validate_path(&query.path),
            &query.headers,
            query.check_body(),
        )
        .await?
        {
            let at = place_of(query.document_at.as_ref(), line, None);
            return Err(refusal(at, "the experiment's query", &message));
        }
    }
    let Some(workload) = &config.workload else {
        return Ok(());
    };
    let keys: Vec<u64> = workload.keys.iter().map(|k| k.first).collect();
    for op in &workload.operations {
        let headers: Vec<String> = op
            .headers
            .iter()
            .map(|(name, value)| format!("{}: {}", name, value.render(&keys, 1)))
            .collect();
        let body = op.body.render(&keys, 1);
        if let Said::Invalid { message, line } =
            ask(gateway, &validate_path(workload.path()), &headers, body).await?
        {
            // Without a line the error is about the request (its variables).
            let fallback = if line.is_none() {
                op.variables_at.as_ref()
            } else {
                None
            };
            let at = place_of(op.document_at.as_ref(), line, fallback);
            return Err(refusal(at, &format!("operation {:?}", op.name), &message));
        }
    }
    Ok(())
}

/// `/validate` beside the GraphQL endpoint's path (`/graphql` → `/validate`).
fn validate_path(graphql: &str) -> String {
    match graphql.rsplit_once('/') {
        Some((prefix, _)) => format!("{prefix}/validate"),
        None => "/validate".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn an_error_is_placed_at_its_line_in_the_document() {
        let doc = Place {
            file: PathBuf::from("ops.toml"),
            line: 10,
        };
        let vars = Place {
            file: PathBuf::from("ops.toml"),
            line: 14,
        };
        assert_eq!(place_of(Some(&doc), Some(3), Some(&vars)).unwrap().line, 12);
        assert_eq!(place_of(Some(&doc), None, Some(&vars)).unwrap().line, 14);
        assert_eq!(place_of(Some(&doc), None, None).unwrap().line, 10);
        assert!(place_of(None, Some(2), None).is_none());
        assert_eq!(validate_path("/graphql"), "/validate");
        assert_eq!(validate_path("/api/graphql"), "/api/validate");
    }
}
