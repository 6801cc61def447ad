//! The JSON body of a subgraph request.

/// Writes the members of a request's `variables` object.
pub type WriteVariables<'a> = &'a dyn Fn(&mut Vec<u8>);

/// `{"query": <query>}` or `{"query": <query>, "variables": <variables>}`: a
/// subgraph request's JSON body. `variables` writes the variables object's members
/// (without braces); `room` is about how many bytes they take, when that is known (an
/// entity fetch's representations: tens of kilobytes on the deep query, which a body
/// grown by doubling copied several times over).
pub fn request_body(
    query: &str,
    room: usize,
    variables: Option<WriteVariables<'_>>,
) -> bytes::Bytes {
    let mut out = Vec::with_capacity(query.len() + 32 + room);
    out.extend_from_slice(b"{\"query\":");
    // A string always serializes.
    let _ = serde_json::to_writer(&mut out, query);
    if let Some(write) = variables {
        out.extend_from_slice(b",\"variables\":{");
        write(&mut out);
        out.push(b'}');
    }
    out.push(b'}');
    out.into()
}
