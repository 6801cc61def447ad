//! The report's table of configurations whose answers are declared to differ from the
//! expected one (`expected_difference = "why"` in a `[[config]]`, for a peer gateway
//! that answers the same question another way): why, how many of the answer checks
//! found a difference, and the first one.

use std::fmt::Write;

use crate::matrix::summary::Summary;

/// The table, when some configuration declares a difference.
pub fn table(summary: &Summary) -> Option<String> {
    let declared: Vec<_> = summary
        .configs
        .iter()
        .filter_map(|c| Some((c, c.expected_difference.as_deref()?)))
        .collect();
    if declared.is_empty() {
        return None;
    }
    let mut out = String::from(
        "\n**Answers declared to differ.** These configurations' answers are checked as every \
         other's, before and after every window; a difference is recorded here instead of \
         stopping the run.\n\n\
         | config | why it differs | checks that found a difference | first difference |\n|---|---|---|---|\n",
    );
    let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
    for (c, why) in declared {
        let found: Vec<&String> = c
            .rounds
            .iter()
            .flat_map(|r| &r.answer_differences)
            .collect();
        let checks = 2 * c.rounds.len();
        let _ = writeln!(
            out,
            "| {} | {} | {} of {checks} | {} |",
            c.name,
            cell(why),
            found.len(),
            found.first().map_or_else(
                || "none seen".to_string(),
                |f| format!("`{}`", cell(&f.replace('`', "'")))
            )
        );
    }
    Some(out)
}
