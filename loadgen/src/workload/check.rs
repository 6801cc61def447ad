//! Reading an answer: find each declared entity, check its identity, and ask the
//! oracle whether its version is fresh.
//!
//! The body is parsed once into a borrowed tree ([`Node`]); a read's path
//! (`me.topPosts[]`) is walked from `data`. What cannot be right is a **wrong answer**: no `data`, a
//! missing field, `null` where the operation asked for one entity, an id other than the
//! one asked for (`expect_id`: another user's `me`), or a version that no write of
//! that entity carried (another entity's data).

use super::answer::Node;

use super::oracle::{Oracle, Verdict};
use super::recorder::FreshnessRecorder;
use super::spec::{Read, Step, Workload};
use super::template::{version_of, version_of_number};

/// Check one 2xx answer without GraphQL errors to `op`, sent at `sent_ns` (oracle
/// clock) with `keys` drawn. Fresh and stale reads count when `in_window`; wrong
/// answers always do. Without an oracle only structure and identities are checked.
#[allow(clippy::too_many_arguments)]
pub fn check_answer(
    workload: &Workload,
    op_index: usize,
    keys: &[u64],
    body: &[u8],
    oracle: Option<&Oracle>,
    sent_ns: u64,
    in_window: bool,
    recorder: &mut FreshnessRecorder,
) {
    let op = &workload.operations[op_index];
    if op.reads.is_empty() {
        return;
    }
    let answer = match Node::parse(body) {
        Ok(v) => v,
        Err(e) => {
            recorder.wrong(&op.name, format!("the answer is not JSON: {e}"));
            return;
        }
    };
    let Some(data) = answer.get("data").filter(|d| d.is_object()) else {
        recorder.wrong(&op.name, "the answer has no data".to_string());
        return;
    };
    for read in &op.reads {
        let mut found = Vec::new();
        if let Err(problem) = walk(data, &read.path, &mut found) {
            recorder.wrong(&op.name, format!("{}: {problem}", read.at));
            continue;
        }
        for entity in found {
            check_entity(
                workload, op_index, read, keys, entity, oracle, sent_ns, in_window, recorder,
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check_entity(
    workload: &Workload,
    op_index: usize,
    read: &Read,
    keys: &[u64],
    entity: &Node<'_>,
    oracle: Option<&Oracle>,
    sent_ns: u64,
    in_window: bool,
    recorder: &mut FreshnessRecorder,
) {
    let op = &workload.operations[op_index];
    let type_name = &workload.types[read.type_index];
    let Some(id) = entity.get(&read.id_field).and_then(Node::as_str) else {
        recorder.wrong(
            &op.name,
            format!(
                "{}: a {type_name} without its id field {:?}",
                read.at, read.id_field
            ),
        );
        return;
    };
    if let Some(expected) = &read.expect_id {
        if !expected.matches(id, keys) {
            recorder.wrong(
                &op.name,
                format!(
                    "{}: asked for {type_name} {}, got {type_name} {id}",
                    read.at,
                    expected.render(keys, 0)
                ),
            );
            return;
        }
    }
    let (Some(field), Some(oracle)) = (&read.version_field, oracle) else {
        return;
    };
    let version = match entity.get(field) {
        Some(Node::Str(s)) => version_of(s),
        Some(Node::Number(n)) => version_of_number(n.as_f64().unwrap_or(0.0)),
        Some(Node::Null) => 0,
        other => {
            recorder.wrong(
                &op.name,
                format!(
                    "{}: {type_name} {id}.{field} is {other:?}, not a string or a number",
                    read.at
                ),
            );
            return;
        }
    };
    match oracle.judge(read.type_index, id, version, sent_ns) {
        Verdict::Fresh => recorder.fresh(in_window),
        Verdict::Stale {
            age_ns,
            out_of_date_ns,
        } => recorder.stale(op_index, in_window, age_ns, out_of_date_ns),
        Verdict::Foreign => recorder.wrong(
            &op.name,
            format!(
                "{}: {type_name} {id} answered {field} v{version}, a version written to another entity",
                read.at
            ),
        ),
    }
}

/// Collect the objects at `path` under `value`; an error says what is missing.
fn walk<'v, 'a>(
    value: &'v Node<'a>,
    path: &[Step],
    found: &mut Vec<&'v Node<'a>>,
) -> Result<(), String> {
    let Some((step, rest)) = path.split_first() else {
        return match value {
            Node::Object(_) => {
                found.push(value);
                Ok(())
            }
            Node::Null => Err("null where an entity was asked for".into()),
            other => Err(format!("{other} where an entity was asked for")),
        };
    };
    match step {
        Step::Field(name) => match value.get(name) {
            Some(next) => walk(next, rest, found),
            None => Err(format!("no field {name:?}")),
        },
        Step::Each => match value {
            Node::Array(items) => {
                for item in items {
                    walk(item, rest, found)?;
                }
                Ok(())
            }
            other => Err(format!("{other} where a list was asked for")),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Instant;

    /// `me` for ten users, with their posts: also the recorder's tests' workload.
    pub(crate) const WORKLOAD: &str = r#"
[workload]
[workload.keys]
user = { distribution = "uniform", count = 10 }
[[workload.operation]]
name = "me"
weight = 1
document = "{ me { id name topPosts(count: 2) { pid title } } }"
headers = ["authorization: Bearer u{user}"]
reads = [
  { at = "me", type = "User", id = "id", version = "name", expect_id = "u{user}" },
  { at = "me.topPosts[]", type = "Post", id = "pid", version = "title" },
]
"#;

    fn check(body: &str, oracle: &Oracle) -> FreshnessRecorder {
        let w = Workload::from_toml(WORKLOAD).unwrap().unwrap();
        let mut r = FreshnessRecorder::new(&w);
        check_answer(
            &w,
            0,
            &[3],
            body.as_bytes(),
            Some(oracle),
            oracle.clock(Instant::now()),
            true,
            &mut r,
        );
        r
    }

    #[test]
    fn fresh_reads_are_counted_per_entity() {
        let oracle = Oracle::new(2);
        let r = check(
            r#"{"data":{"me":{"id":"u3","name":"John","topPosts":[{"pid":"p1","title":"Post 1"},{"pid":"p3","title":"Post 3"}]}}}"#,
            &oracle,
        );
        assert_eq!((r.reads_checked, r.stale_reads, r.wrong_answers), (3, 0, 0));
    }

    #[test]
    fn wrong_answers_say_what_is_wrong() {
        let oracle = Oracle::new(2);
        for (body, expected) in [
            (
                r#"{"data":{"me":{"id":"u4","name":"Jane","topPosts":[]}}}"#,
                "me: asked for User u3, got User u4",
            ),
            (
                r#"{"data":{"me":null}}"#,
                "me: null where an entity was asked for",
            ),
            (r#"{"data":null}"#, "the answer has no data"),
            (
                r#"{"data":{"me":{"id":"u3","name":"v999999999999","topPosts":[]}}}"#,
                "User u3 answered name v999999999999, a version written to another entity",
            ),
            (
                r#"{"data":{"me":{"id":"u3","name":"J","topPosts":{"pid":"p1"}}}}"#,
                "me.topPosts[]: {\"pid\":\"p1\"} where a list was asked for",
            ),
            (
                r#"{"data":{"me":{"id":"u3","name":"J"}}}"#,
                "me.topPosts[]: no field \"topPosts\"",
            ),
            ("not json", "the answer is not JSON"),
        ] {
            let r = check(body, &oracle);
            assert!(r.wrong_answers >= 1, "{body}");
            assert!(
                r.wrong_examples.iter().any(|e| e.contains(expected)),
                "{body}: expected {expected:?} in {:?}",
                r.wrong_examples
            );
        }
    }
}
