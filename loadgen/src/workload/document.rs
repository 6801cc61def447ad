//! A workload operation's GraphQL document, read with async-graphql's parser: that it
//! parses, which of its operations runs, whether that is a query or a mutation, and
//! which variables it declares, so that a file whose variables do not fit its document
//! is refused before anything is sent (whether the document fits the *schema* is the
//! gateway's to say: [`crate::matrix::validation`]). Its errors start with the file
//! and line they concern ([`super::source`]).

use async_graphql_parser::types::{DocumentOperations, OperationType};

use super::source::{OperationPlaces, Origin, Place};
use super::spec::OperationFile;

/// `message`, after its place when known.
pub fn located(place: Option<&Place>, message: String) -> String {
    match place {
        Some(place) => format!("{place}: {message}"),
        None => message,
    }
}

/// An operation's document text (inline, or its `document_file` read relative to the
/// origin's directory) and where its first line is. `at` names the operation.
pub fn text_of(
    o: &OperationFile,
    places: &OperationPlaces,
    origin: &Origin,
    at: &str,
) -> Result<(String, Option<Place>), String> {
    let (text, place) = match (&o.document, &o.document_file) {
        (Some(d), None) => (d.clone(), places.document.clone()),
        (None, Some(f)) => {
            let full = origin.base_dir.join(f);
            let text = std::fs::read_to_string(&full).map_err(|e| {
                located(
                    places.name.as_ref(),
                    format!(
                        "{at}.document_file {f:?}: cannot read {}: {e}",
                        full.display()
                    ),
                )
            })?;
            (
                text,
                Some(Place {
                    file: full,
                    line: 1,
                }),
            )
        }
        (Some(_), Some(_)) => {
            return Err(located(
                places.name.as_ref(),
                format!("{at}: give either document or document_file, not both"),
            ))
        }
        (None, None) => {
            return Err(located(
                places.name.as_ref(),
                format!("{at}: needs document or document_file"),
            ))
        }
    };
    if text.trim().is_empty() {
        return Err(located(place.as_ref(), format!("{at}.document is empty")));
    }
    Ok((text, place))
}

/// What the operation's document runs, with the file's variables checked against the
/// variables it declares.
pub fn facts_of(
    o: &OperationFile,
    document: &str,
    places: &OperationPlaces,
    document_at: Option<&Place>,
    at: &str,
) -> Result<OperationFacts, String> {
    let facts = read(document, o.operation_name.as_deref()).map_err(|e| {
        let place = document_at.map(|p| p.down(e.line - 1));
        located(place.as_ref(), format!("{at}: {}", e.message))
    })?;
    let given: Vec<String> = o
        .variables
        .as_ref()
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    facts.check_variables(&given).map_err(|e| {
        let place = places
            .variables
            .clone()
            .or_else(|| document_at.map(|p| p.down(facts.line - 1)));
        located(place.as_ref(), format!("{at}: {e}"))
    })?;
    Ok(facts)
}

/// A problem at a line of the document (1-based; 1 when the parser gives none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentError {
    pub line: usize,
    pub message: String,
}

/// One declared variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub name: String,
    /// Non-null without a default: a request must give it.
    pub required: bool,
}

/// What the operation that runs is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationFacts {
    pub mutation: bool,
    pub variables: Vec<Declared>,
    /// The line of the operation's definition in the document.
    pub line: usize,
}

/// Parse `document` and find the operation `name` selects (the only one when `None`).
pub fn read(document: &str, name: Option<&str>) -> Result<OperationFacts, DocumentError> {
    let doc = async_graphql_parser::parse_query(document).map_err(|e| DocumentError {
        line: e.positions().next().map_or(1, |p| p.line),
        message: format!("the document does not parse: {e}"),
    })?;
    let at_start = |message: String| DocumentError { line: 1, message };
    let op = match (&doc.operations, name) {
        (DocumentOperations::Single(op), None) => op,
        (DocumentOperations::Single(_), Some(n)) => {
            return Err(at_start(format!(
                "operation_name = {n:?}, but the document's one operation has no such name"
            )))
        }
        (DocumentOperations::Multiple(ops), Some(n)) => ops.get(n).ok_or_else(|| {
            let mut names: Vec<&str> = ops.keys().map(|k| k.as_str()).collect();
            names.sort_unstable();
            at_start(format!(
                "operation_name = {n:?} is not an operation of the document (it has {})",
                names.join(", ")
            ))
        })?,
        (DocumentOperations::Multiple(ops), None) => {
            if ops.len() == 1 {
                ops.values().next().expect("one operation")
            } else {
                let mut names: Vec<&str> = ops.keys().map(|k| k.as_str()).collect();
                names.sort_unstable();
                return Err(at_start(format!(
                    "the document has {} operations ({}): say which with operation_name",
                    ops.len(),
                    names.join(", ")
                )));
            }
        }
    };
    if op.node.ty == OperationType::Subscription {
        return Err(DocumentError {
            line: op.pos.line,
            message: "subscriptions are not load-tested".into(),
        });
    }
    let variables = op
        .node
        .variable_definitions
        .iter()
        .map(|v| Declared {
            name: v.node.name.node.to_string(),
            required: !v.node.var_type.node.nullable && v.node.default_value.is_none(),
        })
        .collect();
    Ok(OperationFacts {
        mutation: op.node.ty == OperationType::Mutation,
        variables,
        line: op.pos.line,
    })
}

impl OperationFacts {
    /// Whether variables named `given` fit the declared ones: none the document does
    /// not declare, every required one given.
    pub fn check_variables(&self, given: &[String]) -> Result<(), String> {
        if self.variables.is_empty() && !given.is_empty() {
            return Err(format!(
                "the document declares no variables, but variables gives {}",
                given.join(", ")
            ));
        }
        let declared: Vec<&str> = self.variables.iter().map(|d| d.name.as_str()).collect();
        if let Some(extra) = given.iter().find(|g| !declared.contains(&g.as_str())) {
            return Err(format!(
                "variables.{extra} is not a variable of the document (it declares ${})",
                declared.join(", $")
            ));
        }
        if let Some(missing) = self
            .variables
            .iter()
            .find(|d| d.required && !given.contains(&d.name))
        {
            return Err(format!(
                "the document needs ${} (non-null, no default), and variables does not give it",
                missing.name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operation_and_its_variables_are_read() {
        let doc = "query A($id: ID!, $n: Int = 2, $m: Int) { a }\nmutation B { b }";
        let a = read(doc, Some("A")).unwrap();
        assert!(!a.mutation);
        assert_eq!(
            a.variables,
            [
                Declared {
                    name: "id".into(),
                    required: true
                },
                Declared {
                    name: "n".into(),
                    required: false
                },
                Declared {
                    name: "m".into(),
                    required: false
                },
            ]
        );
        assert!(read(doc, Some("B")).unwrap().mutation);
        assert_eq!(read(doc, Some("B")).unwrap().line, 2);
        let given = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(a.check_variables(&given(&["id"])).is_ok());
        assert!(a
            .check_variables(&given(&["n"]))
            .unwrap_err()
            .contains("needs $id"));
        assert!(a
            .check_variables(&given(&["id", "x"]))
            .unwrap_err()
            .contains("variables.x is not a variable of the document (it declares $id, $n, $m)"));
        let plain = read("{ a }", None).unwrap();
        assert_eq!(
            plain.check_variables(&given(&["upc"])).unwrap_err(),
            "the document declares no variables, but variables gives upc"
        );
    }

    #[test]
    fn a_document_that_cannot_run_says_where() {
        let e = read("query {\n  a {\n    b(\n", None).unwrap_err();
        assert!(e.message.contains("does not parse"), "{e:?}");
        assert!(e.line >= 3, "{e:?}");
        let two = "query A { a } query B { b }";
        assert!(read(two, None)
            .unwrap_err()
            .message
            .contains("2 operations (A, B): say which with operation_name"));
        assert!(read(two, Some("C"))
            .unwrap_err()
            .message
            .contains("\"C\" is not an operation of the document (it has A, B)"));
        assert!(read("subscription { a }", None)
            .unwrap_err()
            .message
            .contains("subscriptions"));
    }
}
