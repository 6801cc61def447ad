//! Which operation of a document a request names: the one `operationName` names, or
//! the only one when it names none, with async-graphql's messages when there is no
//! such operation.

use async_graphql::ServerError;
use async_graphql_parser::types::{DocumentOperations, ExecutableDocument, OperationDefinition};

/// The operation of `doc` that `name` selects.
pub fn operation<'d>(
    doc: &'d ExecutableDocument,
    name: Option<&str>,
) -> Result<&'d OperationDefinition, ServerError> {
    let unknown = |n: &str| ServerError::new(format!(r#"Unknown operation named "{n}""#), None);
    match (&doc.operations, name) {
        (DocumentOperations::Single(op), None) => Ok(&op.node),
        (DocumentOperations::Single(_), Some(n)) => Err(unknown(n)),
        (DocumentOperations::Multiple(ops), Some(n)) => {
            ops.get(n).map(|op| &op.node).ok_or_else(|| unknown(n))
        }
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => {
            Ok(&ops.values().next().expect("one operation").node)
        }
        (DocumentOperations::Multiple(_), None) => Err(ServerError::new(
            "Operation name required in request.",
            None,
        )),
    }
}
