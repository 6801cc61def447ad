//! The report's table of what the load sent, when some configuration names its
//! document instead of sending its text (`send = "apq"`, `"apq-get"` or
//! `"document-id"` in its query): how, by which method, and the bytes of one request
//! on the wire (head and body), beside its CPU per request and req/s ratio.

use std::fmt::Write;

use crate::matrix::summary::Summary;

/// The table, when some configuration sends other than its text.
pub fn table(summary: &Summary) -> Option<String> {
    let sent =
        |c: &crate::matrix::summary::ConfigSummary| c.rounds.iter().find_map(|r| r.request.clone());
    if !summary
        .configs
        .iter()
        .any(|c| sent(c).is_some_and(|s| s.sent_as != "text"))
    {
        return None;
    }
    let mut out = String::from(
        "\n**What the load sent.** A persisted document is named by its hash or id instead \
         of its text; one request's bytes are its head and body as written on the wire.\n\n\
         | config | sent as | method | request bytes |\n|---|---|---|---:|\n",
    );
    for c in &summary.configs {
        let Some(s) = sent(c) else { continue };
        let bytes = s
            .bytes
            .map_or_else(|| "varies".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {bytes} |",
            c.name, s.sent_as, s.method
        );
    }
    Some(out)
}
