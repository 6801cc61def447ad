//! The response's errors: the request-level ones of a request that was not executed
//! ([`write_errors`]), and those the writer reports at the place it stands
//! (`Writer::error`), or explains by what execution recorded there: a subgraph's own
//! error, already reported, or a failed fetch's, reported at each place it leaves
//! without a value (`Writer::unexplained`); and the one error that replaces a response
//! grown past `--max-answer-bytes` (`Writer::over`). Paths are written as JSON arrays
//! ([`write_path`]).

use async_graphql::ServerError;
use async_graphql_parser::Pos;

use super::{Step, Writer};
use crate::execute::FoundError;
use crate::upstream::PathItem;

/// `{"errors":[…]}` for a request that was not executed.
pub fn write_errors(out: &mut Vec<u8>, errors: &[ServerError]) {
    out.extend_from_slice(b"{\"errors\":");
    // ServerErrors always serialize.
    let _ = serde_json::to_writer(&mut *out, errors);
    out.push(b'}');
}

/// What execution recorded about a place of the response.
pub(super) enum Explanation<'a> {
    None,
    /// A subgraph's error, already in the response.
    Reported,
    /// A fetch for it failed with this message.
    Failed(&'a str),
}

impl<'a> Writer<'a> {
    /// Whether writing must stop: the response has grown past its bound (the error
    /// that says so is then kept, once), or it did before.
    #[inline]
    pub(super) fn over(&mut self, out: &[u8]) -> bool {
        // One comparison on the common path: once stopped, the bound is 0, which a
        // response that has begun is always past.
        if out.len() <= self.max_bytes {
            return false;
        }
        self.stop();
        true
    }

    /// Keep the error that stops the response at the current path (the first time).
    #[cold]
    fn stop(&mut self) {
        if self.stopped.is_some() {
            return;
        }
        let mut error = Vec::with_capacity(128);
        error.extend_from_slice(b"{\"message\":");
        let message = format!(
            "the response grew past {} bytes (--max-answer-bytes) and was not finished; it stopped at this path",
            self.limit
        );
        let _ = serde_json::to_writer(&mut error, &message);
        error.extend_from_slice(b",\"path\":");
        write_path(&mut error, &self.path, &[]);
        error.extend_from_slice(b",\"extensions\":{\"code\":\"ANSWER_TOO_LARGE\"}}");
        self.stopped = Some(error);
        self.max_bytes = 0;
    }

    pub(super) fn separator(&mut self) {
        if self.count > 0 {
            self.errors.push(b',');
        }
        self.count += 1;
    }

    pub(super) fn found_error(&mut self, e: &FoundError) {
        self.separator();
        let out = &mut self.errors;
        out.extend_from_slice(b"{\"message\":");
        let _ = serde_json::to_writer(&mut *out, &e.message);
        if !e.path.is_empty() {
            out.extend_from_slice(b",\"path\":");
            write_path(out, &[], &e.path);
        }
        if let Some(extensions) = &e.extensions {
            out.extend_from_slice(b",\"extensions\":");
            let _ = serde_json::to_writer(&mut *out, extensions);
        }
        out.push(b'}');
    }

    /// Report `message` at the current path.
    pub(super) fn error(&mut self, message: &str, at: Option<Pos>) {
        self.separator();
        let out = &mut self.errors;
        out.extend_from_slice(b"{\"message\":");
        let _ = serde_json::to_writer(&mut *out, message);
        if let Some(pos) = at {
            out.extend_from_slice(
                format!(
                    ",\"locations\":[{{\"line\":{},\"column\":{}}}]",
                    pos.line, pos.column
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(b",\"path\":");
        write_path(out, &self.path, &[]);
        out.push(b'}');
    }

    /// What execution recorded about the current path: a subgraph error at it, above
    /// or below it (already reported), or a failed fetch for it or an object above
    /// it (to report here).
    pub(super) fn explanation(&self) -> Explanation<'a> {
        let mut found = Explanation::None;
        for e in &self.outcome.errors {
            let related = e.path.iter().zip(&self.path).all(|(a, b)| match (a, b) {
                (PathItem::Key(k), Step::Key(s)) => k == s,
                (PathItem::Index(i), Step::Index(j)) => i == j,
                _ => false,
            });
            if !related {
                continue;
            }
            if !e.failed_fetch {
                return Explanation::Reported;
            }
            if e.path.len() <= self.path.len() {
                found = Explanation::Failed(&e.message);
            }
        }
        found
    }

    /// Report what leaves the current field without a value: the failed fetch that
    /// explains it, or `message` when nothing does (a subgraph's own error explains
    /// it without another).
    pub(super) fn unexplained(&mut self, message: impl FnOnce() -> String, at: Pos) {
        match self.explanation() {
            Explanation::Reported => {}
            Explanation::Failed(failure) => self.error(failure, Some(at)),
            Explanation::None => self.error(&message(), Some(at)),
        }
    }
}

/// A response path as a JSON array: the writer's steps, then `rest`.
pub(super) fn write_path(out: &mut Vec<u8>, steps: &[Step<'_>], rest: &[PathItem]) {
    let rest = rest.iter().map(|item| match item {
        PathItem::Key(k) => Step::Key(k),
        PathItem::Index(i) => Step::Index(*i),
    });
    out.push(b'[');
    for (n, step) in steps.iter().copied().chain(rest).enumerate() {
        if n > 0 {
            out.push(b',');
        }
        match step {
            Step::Key(k) => {
                let _ = serde_json::to_writer(&mut *out, k);
            }
            Step::Index(i) => out.extend_from_slice(i.to_string().as_bytes()),
        }
    }
    out.push(b']');
}
