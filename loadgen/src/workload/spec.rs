//! The `[workload]` table of an experiment file (or of a file given to
//! `loadgen bench --workload`): key sets, weighted operations, what each answer says
//! about which entity, and which operations write.
//!
//! Parsing checks everything up front and names the key at fault
//! (`workload.operation "me".reads[0].at`). The result, [`Workload`], is immutable and
//! shared by every connection of a run.

use std::collections::BTreeMap;
use std::path::Path;

use hyper::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::document::OperationFacts;
use super::keys::{KeyFile, KeySet};
use super::source::{Origin, Place};
use super::template::Template;

/// The seed when the file gives none.
pub const DEFAULT_SEED: u64 = 1;
/// Writer connections when `write_rate` is set and `writers` is not.
pub const DEFAULT_WRITERS: usize = 2;

/// The `[workload]` table as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Seeds every connection's draws: the same seed sends the same operations.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Open-loop writes: operations with `write` are sent at this total rate by
    /// `writers` connections of their own, and the other connections send only reads.
    #[serde(default)]
    pub write_rate: Option<f64>,
    #[serde(default)]
    pub writers: Option<i64>,
    /// The GraphQL endpoint's path on the gateway (default `/graphql`).
    #[serde(default)]
    pub path: Option<String>,
    /// How reads are sent: `"POST"` (the default) or `"GET"`, the document and
    /// variables in the query string, as an HTTP cache in front can keep them.
    /// Writes are always POST.
    #[serde(default)]
    pub read_method: Option<String>,
    #[serde(default)]
    pub keys: BTreeMap<String, KeyFile>,
    #[serde(default, rename = "operation")]
    pub operations: Vec<OperationFile>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OperationFile {
    pub name: String,
    pub weight: f64,
    /// The GraphQL document inline, or `document_file` (relative to the file).
    #[serde(default)]
    pub document: Option<String>,
    #[serde(default)]
    pub document_file: Option<String>,
    /// Which operation of the document runs (needed when it has several).
    #[serde(default)]
    pub operation_name: Option<String>,
    /// GraphQL variables; string values may hold `{key set}` and `{version}`.
    #[serde(default)]
    pub variables: Option<toml::Table>,
    /// `Name: value`; the value may hold `{key set}`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// The entities the answer carries, checked for freshness and identity.
    #[serde(default)]
    pub reads: Vec<ReadFile>,
    /// The entity this mutation writes; its variables carry `{version}`.
    #[serde(default)]
    pub write: Option<WriteFile>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// Where in `data` the entity is: `getPost`, `topPosts[]`, `me.topPosts[]`.
    pub at: String,
    /// The entity's type, as the writes name it (`Post`).
    #[serde(rename = "type")]
    pub type_name: String,
    /// The field holding the entity's id (`pid`).
    pub id: String,
    /// The field holding its version (`title`); without it only the id is checked.
    #[serde(default)]
    pub version: Option<String>,
    /// The id the answer must carry (`u{user}`): another id is a wrong answer.
    #[serde(default)]
    pub expect_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    #[serde(rename = "type")]
    pub type_name: String,
    /// The written entity's id (`p{post}`).
    pub id: String,
}

/// One step of a read's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Field(String),
    /// Every element of a list.
    Each,
}

/// A checked read: where the entity is and what to compare.
#[derive(Debug, Clone)]
pub struct Read {
    pub at: String,
    pub path: Vec<Step>,
    pub type_index: usize,
    pub id_field: String,
    pub version_field: Option<String>,
    pub expect_id: Option<Template>,
}

/// The entity a write operation writes.
#[derive(Debug, Clone)]
pub struct Write {
    pub type_index: usize,
    pub id: Template,
}

/// One operation of the mix, ready to render.
#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub weight: f64,
    pub document: String,
    pub operation_name: Option<String>,
    /// Where the document's first line is, and the `variables` key's line.
    pub document_at: Option<Place>,
    pub variables_at: Option<Place>,
    /// What the document's operation is (a mutation; its variables).
    pub facts: OperationFacts,
    /// The whole JSON body, `{"query":…,"variables":…}`, with its placeholders.
    pub body: Template,
    /// A read by GET (`read_method = "GET"`): what follows the path,
    /// `?query=…&operationName=…&variables=…`, encoded, with its placeholders.
    pub get: Option<Template>,
    pub headers: Vec<(HeaderName, Template)>,
    pub reads: Vec<Read>,
    pub write: Option<Write>,
    /// The key sets this operation draws, each once, in the order of first use.
    pub draws: Vec<usize>,
}

impl Operation {
    pub fn is_write(&self) -> bool {
        self.write.is_some()
    }
}

/// A validated workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub seed: u64,
    pub keys: Vec<KeySet>,
    pub operations: Vec<Operation>,
    /// Entity types named by reads and writes; a read's `type_index` points here.
    pub types: Vec<String>,
    pub write_rate: Option<f64>,
    pub writers: usize,
    /// The table as written, for run records.
    pub file: WorkloadFile,
}

/// Two workloads are the same when their tables are.
impl PartialEq for Workload {
    fn eq(&self, other: &Workload) -> bool {
        self.seed == other.seed && self.file == other.file
    }
}

/// A workload is recorded as its table, with the seed in force.
impl Serialize for Workload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut file = self.file.clone();
        file.seed = Some(self.seed);
        file.serialize(s)
    }
}

impl Workload {
    /// Validate a `[workload]` table whose files (none) would be in the current
    /// directory. Errors start with `workload` and name the key.
    pub fn from_file(file: WorkloadFile) -> Result<Workload, String> {
        Workload::from_file_in(file, &Origin::in_dir(Path::new(".")))
    }

    /// Validate a workload table that came from `origin`: its `values_file`s and
    /// `document_file`s are read relative to `origin.base_dir`, and an error about an
    /// operation's document or variables starts with the file and line (`ops.toml:12:
    /// workload.operation "x": …`).
    pub fn from_file_in(mut file: WorkloadFile, origin: &Origin) -> Result<Workload, String> {
        if let Some(p) = &file.path {
            if !p.starts_with('/') {
                return Err(format!("workload.path {p:?} must start with '/'"));
            }
        }
        let by_get = match file.read_method.as_deref().map(str::to_ascii_uppercase) {
            None => false,
            Some(m) if m == "POST" => false,
            Some(m) if m == "GET" => true,
            Some(_) => {
                return Err(format!(
                    "workload.read_method = {:?}: must be \"GET\" or \"POST\"",
                    file.read_method.as_deref().unwrap_or_default()
                ))
            }
        };
        let mut keys = Vec::new();
        for (name, k) in file.keys.iter_mut() {
            if let Some(listed) = k.values_file.take() {
                if k.values.is_some() {
                    return Err(format!(
                        "workload.keys.{name}: give either values or values_file, not both"
                    ));
                }
                k.values =
                    Some(read_values(&origin.base_dir, &listed).map_err(|e| {
                        format!("workload.keys.{name}.values_file {listed:?}: {e}")
                    })?);
            }
            keys.push(KeySet::new(name, k).map_err(|e| format!("workload.{e}"))?);
        }
        if file.operations.is_empty() {
            return Err("workload: needs at least one [[workload.operation]]".into());
        }
        let mut types: Vec<String> = Vec::new();
        let mut type_index = |name: &str| {
            if let Some(i) = types.iter().position(|t| t == name) {
                i
            } else {
                types.push(name.to_string());
                types.len() - 1
            }
        };
        let mut operations = Vec::new();
        for (index, o) in file.operations.iter().enumerate() {
            let at = format!("workload.operation {:?}", o.name);
            if o.name.is_empty()
                || !o
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(format!(
                    "{at}: name must be non-empty and use only letters, digits, '-', '_' and '.'"
                ));
            }
            if operations.iter().any(|p: &Operation| p.name == o.name) {
                return Err(format!("{at}: the name is used twice"));
            }
            if !(o.weight.is_finite() && o.weight > 0.0) {
                return Err(format!(
                    "{at}.weight = {}: must be a positive number",
                    o.weight
                ));
            }
            let places = origin.operation(index);
            let (document, document_at) = super::document::text_of(o, &places, origin, &at)?;
            let facts =
                super::document::facts_of(o, &document, &places, document_at.as_ref(), &at)?;
            let variables = match &o.variables {
                Some(table) => {
                    serde_json::to_string(table).map_err(|e| format!("{at}.variables: {e}"))?
                }
                None => String::new(),
            };
            let mut head = format!(
                "{{\"query\":{}",
                serde_json::to_string(&document).map_err(|e| format!("{at}.document: {e}"))?
            );
            if let Some(name) = &o.operation_name {
                head.push_str(",\"operationName\":");
                head.push_str(&serde_json::to_string(name).map_err(|e| format!("{at}: {e}"))?);
            }
            let parsed = Template::parse(&variables, &keys, &format!("{at}.variables"))?;
            let mut body = parsed.clone();
            if variables.is_empty() {
                body = Template::literal(&format!("{head}}}"));
            } else {
                body.wrap(&format!("{head},\"variables\":"), "}");
            }
            let get = if by_get && !facts.mutation {
                let encoded = crate::bench::request_template::percent_encoded;
                let mut line = format!("?query={}", encoded(&document));
                if let Some(name) = &o.operation_name {
                    line.push_str(&format!("&operationName={}", encoded(name)));
                }
                Some(if variables.is_empty() {
                    Template::literal(&line)
                } else {
                    let mut get = parsed
                        .percent_encoded()
                        .map_err(|e| format!("{at}.variables: {e}"))?;
                    get.wrap(&format!("{line}&variables="), "");
                    get
                })
            } else {
                None
            };
            let mut headers = Vec::new();
            for (i, raw) in o.headers.iter().enumerate() {
                let here = format!("{at}.headers[{i}]");
                let (name, value) = raw
                    .split_once(':')
                    .ok_or_else(|| format!("{here}: {raw:?} is not `Name: value`"))?;
                let name = HeaderName::from_bytes(name.trim().as_bytes())
                    .map_err(|_| format!("{here}: {name:?} is not a header name"))?;
                let value = Template::parse(value.trim(), &keys, &here)?;
                if value.has_version() {
                    return Err(format!(
                        "{here}: {{version}} belongs in a write's variables"
                    ));
                }
                // A value that renders to something a header cannot carry fails here, once.
                HeaderValue::from_str(&value.render(&vec![1; keys.len()], 1))
                    .map_err(|_| format!("{here}: {raw:?} is not a header value"))?;
                headers.push((name, value));
            }
            if facts.mutation && o.write.is_none() {
                return Err(format!(
                    "{at}: the document is a mutation; say what it writes (write = {{ type = …, id = … }}, its variables carrying {{version}})"
                ));
            }
            if !facts.mutation && o.write.is_some() {
                return Err(format!(
                    "{at}: write = {{ … }} is for mutations; this document is a query"
                ));
            }
            let write = match &o.write {
                Some(w) => {
                    if !body.has_version() {
                        return Err(format!(
                            "{at}: a write needs {{version}} in its variables (the value it writes, e.g. title = \"{{version}}\")"
                        ));
                    }
                    if !o.reads.is_empty() {
                        return Err(format!(
                            "{at}: a write's answer is not checked; give reads to read operations"
                        ));
                    }
                    let id = Template::parse(&w.id, &keys, &format!("{at}.write.id"))?;
                    if id.has_version() {
                        return Err(format!("{at}.write.id: an id cannot hold {{version}}"));
                    }
                    Some(Write {
                        type_index: type_index(&w.type_name),
                        id,
                    })
                }
                None if body.has_version() => {
                    return Err(format!(
                        "{at}: {{version}} is only for writes (add write = {{ type = …, id = … }})"
                    ))
                }
                None => None,
            };
            let mut reads = Vec::new();
            for (i, r) in o.reads.iter().enumerate() {
                let here = format!("{at}.reads[{i}]");
                let path = parse_path(&r.at).map_err(|e| format!("{here}.at: {e}"))?;
                let expect_id = r
                    .expect_id
                    .as_deref()
                    .map(|t| Template::parse(t, &keys, &format!("{here}.expect_id")))
                    .transpose()?;
                if expect_id.as_ref().is_some_and(Template::has_version) {
                    return Err(format!("{here}.expect_id: an id cannot hold {{version}}"));
                }
                for (key, value) in [("type", &r.type_name), ("id", &r.id)] {
                    if value.is_empty() {
                        return Err(format!("{here}.{key} is empty"));
                    }
                }
                reads.push(Read {
                    at: r.at.clone(),
                    path,
                    type_index: type_index(&r.type_name),
                    id_field: r.id.clone(),
                    version_field: r.version.clone(),
                    expect_id,
                });
            }
            let mut draws: Vec<usize> = Vec::new();
            let used = body
                .key_sets()
                .chain(headers.iter().flat_map(|(_, v)| v.key_sets()))
                .chain(write.iter().flat_map(|w| w.id.key_sets()))
                .chain(
                    reads
                        .iter()
                        .flat_map(|r| r.expect_id.iter().flat_map(Template::key_sets)),
                );
            for k in used {
                if !draws.contains(&k) {
                    draws.push(k);
                }
            }
            operations.push(Operation {
                name: o.name.clone(),
                weight: o.weight,
                document,
                operation_name: o.operation_name.clone(),
                document_at,
                variables_at: places.variables.clone(),
                facts,
                body,
                get,
                headers,
                reads,
                write,
                draws,
            });
        }
        let write_rate = match file.write_rate {
            None => None,
            Some(r) if r.is_finite() && r > 0.0 => {
                if !operations.iter().any(Operation::is_write) {
                    return Err(format!(
                        "workload.write_rate = {r}: no operation has write = {{ … }}"
                    ));
                }
                if operations.iter().all(Operation::is_write) {
                    return Err(format!(
                        "workload.write_rate = {r}: every operation writes; the mix needs reads"
                    ));
                }
                Some(r)
            }
            Some(r) => {
                return Err(format!(
                    "workload.write_rate = {r}: must be a positive number of writes per second"
                ))
            }
        };
        let writers = match (file.writers, write_rate) {
            (None, _) => DEFAULT_WRITERS,
            (Some(_), None) => return Err("workload.writers needs workload.write_rate".into()),
            (Some(n), Some(_)) if (1..=1000).contains(&n) => n as usize,
            (Some(n), Some(_)) => return Err(format!("workload.writers = {n}: must be 1 to 1000")),
        };
        Ok(Workload {
            seed: file.seed.unwrap_or(DEFAULT_SEED),
            keys,
            operations,
            types,
            write_rate,
            writers,
            file,
        })
    }

    /// Parse the `[workload]` table of a TOML document (an experiment file, or a file
    /// holding only that table); `None` when it has none. Reading one from a file, with
    /// its lines known: [`super::load`].
    pub fn from_toml(text: &str) -> Result<Option<Workload>, String> {
        super::load::from_toml_at(text, Path::new("workload.toml"))
    }

    /// The GraphQL endpoint's path.
    pub fn path(&self) -> &str {
        self.file.path.as_deref().unwrap_or("/graphql")
    }

    /// Whether writes go out on their own open-loop connections.
    pub fn separate_writes(&self) -> bool {
        self.write_rate.is_some()
    }
}

/// The keys of a `values_file`: one a line, blank lines and `#` comments skipped.
fn read_values(base_dir: &Path, file: &str) -> Result<Vec<String>, String> {
    let full = base_dir.join(file);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| format!("cannot read {}: {e}", full.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}

/// `a.b[].c` → Field(a), Field(b), Each, Field(c).
fn parse_path(text: &str) -> Result<Vec<Step>, String> {
    if text.is_empty() {
        return Err("is empty (name a field of data, e.g. getPost)".into());
    }
    let mut steps = Vec::new();
    for part in text.split('.') {
        let (name, lists) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("{text:?}: {part:?} is not a field name"));
        }
        steps.push(Step::Field(name.to_string()));
        let mut rest = lists;
        while let Some(r) = rest.strip_prefix("[]") {
            steps.push(Step::Each);
            rest = r;
        }
        if !rest.is_empty() {
            return Err(format!("{text:?}: after {name:?} only [] may follow"));
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const EXAMPLE: &str = r#"
[workload]
seed = 7
[workload.keys]
post = { distribution = "zipf", exponent = 0.99, count = 100 }
user = { distribution = "hotspot", count = 50, hot_fraction = 0.1, hot_share = 0.9 }

[[workload.operation]]
name = "post"
weight = 70
document = 'query($pid: ID!) { getPost(pid: $pid) { pid title } }'
variables = { pid = "p{post}" }
reads = [{ at = "getPost", type = "Post", id = "pid", version = "title", expect_id = "p{post}" }]

[[workload.operation]]
name = "me"
weight = 27
document = '{ me { id name topPosts(count: 2) { pid title } } }'
headers = ["authorization: Bearer u{user}"]
reads = [
  { at = "me", type = "User", id = "id", version = "name", expect_id = "u{user}" },
  { at = "me.topPosts[]", type = "Post", id = "pid", version = "title" },
]

[[workload.operation]]
name = "retitle"
weight = 3
document = 'mutation($pid: ID!, $t: String!) { updatePostTitle(pid: $pid, title: $t) { pid } }'
variables = { pid = "p{post}", t = "{version}" }
write = { type = "Post", id = "p{post}" }
"#;

    #[test]
    fn reads_by_get_carry_their_document_and_variables_in_the_query_string() {
        let text = EXAMPLE.replace("seed = 7", "seed = 7\nread_method = \"get\"");
        let w = Workload::from_toml(&text).unwrap().unwrap();
        let post = &w.operations[0];
        let get = post.get.as_ref().expect("a read by GET");
        let rendered = get.render(&[12, 0], 0);
        assert!(
            rendered.starts_with("?query=query%28%24pid%3A%20ID%21%29"),
            "{rendered}"
        );
        assert!(
            rendered.ends_with("&variables=%7B%22pid%22%3A%22p12%22%7D"),
            "{rendered}"
        );
        assert!(w.operations[2].get.is_none(), "a write stays a POST");
        let bad = EXAMPLE.replace("seed = 7", "seed = 7\nread_method = \"PUT\"");
        let error = Workload::from_toml(&bad).unwrap_err();
        assert!(error.contains("read_method"), "{error}");
    }

    #[test]
    fn the_example_compiles() {
        let w = Workload::from_toml(EXAMPLE).unwrap().unwrap();
        assert_eq!(w.seed, 7);
        assert_eq!(w.types, ["Post", "User"]);
        assert_eq!(w.operations.len(), 3);
        let post = &w.operations[0];
        assert_eq!(post.draws, [0]);
        assert_eq!(
            post.body.render(&[12, 0], 0),
            r#"{"query":"query($pid: ID!) { getPost(pid: $pid) { pid title } }","variables":{"pid":"p12"}}"#
        );
        let me = &w.operations[1];
        assert_eq!(me.draws, [1]);
        assert_eq!(me.headers[0].1.render(&[0, 4], 0), "Bearer u4");
        assert_eq!(
            me.reads[1].path,
            [
                Step::Field("me".into()),
                Step::Field("topPosts".into()),
                Step::Each
            ]
        );
        assert_eq!(me.reads[1].type_index, 0);
        let retitle = &w.operations[2];
        assert!(retitle.is_write() && !post.is_write());
        assert_eq!(
            retitle.body.render(&[5, 0], 9),
            r#"{"query":"mutation($pid: ID!, $t: String!) { updatePostTitle(pid: $pid, title: $t) { pid } }","variables":{"pid":"p5","t":"v9"}}"#
        );
        assert!(Workload::from_toml("[load]\nrate = 1.0\n")
            .unwrap()
            .is_none());
    }

    #[test]
    fn bad_workloads_name_the_key() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "exponent = 0.99, count = 100",
                "exponent = -1.0, count = 100",
                "workload.keys.post.exponent = -1",
            ),
            (
                "exponent = 0.99, count = 100",
                "count = 100",
                "workload.keys.post: zipf needs exponent",
            ),
            (
                "count = 100 }",
                "count = 0 }",
                "workload.keys.post.count = 0",
            ),
            (
                "distribution = \"hotspot\"",
                "distribution = \"pareto\"",
                "workload.keys.user.distribution = \"pareto\"",
            ),
            (
                "hot_fraction = 0.1",
                "hot_fraction = 1.5",
                "workload.keys.user.hot_fraction = 1.5",
            ),
            (
                "weight = 70",
                "weight = 0",
                "workload.operation \"post\".weight = 0",
            ),
            (
                "pid = \"p{post}\" }",
                "pid = \"p{posts}\" }",
                "{posts} is not a key set",
            ),
            (
                "Bearer u{user}",
                "Bearer u{user}\\u0001",
                "headers[0]: \"authorization: Bearer u{user}\\u{1}\" is not a header value",
            ),
            (
                "at = \"me.topPosts[]\"",
                "at = \"me.topPosts[0]\"",
                "reads[1].at: \"me.topPosts[0]\": after \"topPosts\" only [] may follow",
            ),
            (
                "t = \"{version}\"",
                "t = \"fixed\"",
                "a write needs {version}",
            ),
            (
                "name = \"me\"",
                "name = \"post\"",
                "\"post\": the name is used twice",
            ),
            (
                "seed = 7",
                "seed = 7\nwrite_rate = -1.0",
                "workload.write_rate = -1",
            ),
            (
                "seed = 7",
                "seed = 7\nwriters = 3",
                "workload.writers needs workload.write_rate",
            ),
            ("seed = 7", "seed = 7\ncolour = 1", "unknown field `colour`"),
        ];
        for (from, to, expected) in cases {
            assert!(EXAMPLE.contains(from), "{from}");
            let text = EXAMPLE.replacen(from, to, 1);
            let e = Workload::from_toml(&text).unwrap_err();
            assert!(e.contains(expected), "{to}: expected {expected:?} in {e}");
            assert!(e.starts_with("workload"), "{e}");
        }
    }
}
