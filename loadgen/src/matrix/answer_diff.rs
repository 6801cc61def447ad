//! Where two JSON answers first differ, said as a path (`data.topPosts[0].pid`) with
//! both values, so that a gateway's wrong answer (a peer's above all) names what is
//! wrong rather than printing two 87 KB documents.

use serde_json::Value;

/// The first place, in document order, where `got` differs from `expected`; `None`
/// when they are equal.
pub fn first_difference(expected: &Value, got: &Value) -> Option<String> {
    walk(expected, got, "")
}

fn walk(expected: &Value, got: &Value, at: &str) -> Option<String> {
    let here = || {
        if at.is_empty() {
            "the answer".to_string()
        } else {
            at.to_string()
        }
    };
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            for (key, ev) in e {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                match g.get(key) {
                    Some(gv) => {
                        if let Some(d) = walk(ev, gv, &path) {
                            return Some(d);
                        }
                    }
                    None => return Some(format!("{path}: expected {}, got nothing", short(ev))),
                }
            }
            g.iter()
                .find(|(key, _)| !e.contains_key(*key))
                .map(|(key, gv)| {
                    let path = if at.is_empty() {
                        key.clone()
                    } else {
                        format!("{at}.{key}")
                    };
                    format!("{path}: not expected, got {}", short(gv))
                })
        }
        (Value::Array(e), Value::Array(g)) => {
            for (i, (ev, gv)) in e.iter().zip(g).enumerate() {
                if let Some(d) = walk(ev, gv, &format!("{at}[{i}]")) {
                    return Some(d);
                }
            }
            (e.len() != g.len())
                .then(|| format!("{}: expected {} items, got {}", here(), e.len(), g.len()))
        }
        (e, g) if e == g => None,
        (e, g) => Some(format!(
            "{}: expected {}, got {}",
            here(),
            short(e),
            short(g)
        )),
    }
}

/// A value as JSON, cut at 120 characters.
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let expected =
            json!({"data": {"topPosts": [{"pid": "p1"}, {"pid": "p2"}], "me": {"id": "u1"}}});
        assert_eq!(first_difference(&expected, &expected), None);
        let got = json!({"data": {"topPosts": [{"pid": "p1"}, {"pid": "p9"}], "me": {"id": "u1"}}});
        assert_eq!(
            first_difference(&expected, &got).unwrap(),
            "data.topPosts[1].pid: expected \"p2\", got \"p9\""
        );
        let got = json!({"data": {"topPosts": [{"pid": "p1"}], "me": {"id": "u1"}}});
        assert_eq!(
            first_difference(&expected, &got).unwrap(),
            "data.topPosts: expected 2 items, got 1"
        );
        let got = json!({"data": null, "errors": [{"message": "no"}]});
        assert!(first_difference(&expected, &got)
            .unwrap()
            .starts_with("data: expected {"));
        let got = json!({"data": {"topPosts": [{"pid": "p1"}, {"pid": "p2"}], "me": {"id": "u1"}}, "errors": []});
        assert_eq!(
            first_difference(&expected, &got).unwrap(),
            "errors: not expected, got []"
        );
        assert_eq!(
            first_difference(&json!(1), &json!("x")).unwrap(),
            "the answer: expected 1, got \"x\""
        );
    }
}
