//! Reading a workload from a file: the `[workload]` table of an experiment (or of a
//! file holding only that table), or an **operations file**, the same table at the top
//! level (`[keys.*]`, `[[operation]]`, …) that an experiment's `[graph] operations`
//! names. Either way its files (`document_file`, `values_file`) are read relative to
//! it and its refusals name its lines ([`super::source`]).

use std::path::Path;

use super::source::{Origin, Table};
use super::spec::{Workload, WorkloadFile};

/// The `[workload]` table of `text`, the contents of `path`; `None` when it has none.
pub fn from_toml_at(text: &str, path: &Path) -> Result<Option<Workload>, String> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let Some(value) = table.remove("workload") else {
        return Ok(None);
    };
    let file: WorkloadFile = value
        .try_into()
        .map_err(|e: toml::de::Error| format!("workload: {}", e.to_string().trim_end()))?;
    let origin = Origin::of(text, path, Table::Workload);
    Workload::from_file_in(file, &origin).map(Some)
}

/// The operations file `path`, whose contents are `text`. Every error names the file
/// (and, for an operation's document or variables, the line).
pub fn operations_file(text: &str, path: &Path) -> Result<Workload, String> {
    operations_file_reading_by(text, path, None)
}

/// [`operations_file`], its reads sent by `read_method` when given (an experiment's
/// `[graph] read_method`, over the file's own).
fn operations_file_reading_by(
    text: &str,
    path: &Path,
    read_method: Option<&str>,
) -> Result<Workload, String> {
    let mut file: WorkloadFile = toml::from_str(text)
        .map_err(|e| format!("{}: {}", path.display(), e.to_string().trim_end()))?;
    if let Some(method) = read_method {
        file.read_method = Some(method.to_string());
    }
    let origin = Origin::of(text, path, Table::TopLevel);
    Workload::from_file_in(file, &origin).map_err(|e| {
        if e.starts_with(&path.display().to_string())
            || e.starts_with(&origin.base_dir.display().to_string())
        {
            e
        } else {
            format!("{}: {e}", path.display())
        }
    })
}

/// Read the operations file at `path`.
pub fn read_operations_file(path: &Path) -> Result<Workload, String> {
    read_operations_file_reading_by(path, None)
}

/// Read the operations file at `path`, its reads sent by `read_method` when given.
pub fn read_operations_file_reading_by(
    path: &Path,
    read_method: Option<&str>,
) -> Result<Workload, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    operations_file_reading_by(&text, path, read_method)
}

/// What `loadgen bench --workload FILE` sends: the file's `[workload]`, the operations
/// file an experiment's `[graph] operations` names, or the file itself read as an
/// operations file.
pub fn any(path: &Path) -> Result<Workload, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    if let Some(w) = from_toml_at(&text, path)? {
        return Ok(w);
    }
    let table: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
    let named = table
        .get("graph")
        .and_then(|g| g.get("operations"))
        .and_then(|o| o.as_str());
    match named {
        Some(file) => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            read_operations_file(&dir.join(file))
        }
        None if table.contains_key("operation") => operations_file(&text, path),
        None => {
            Err("has no [workload] table, no [graph] operations file, and no [[operation]]".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPS: &str = r#"seed = 4
[keys]
upc = { distribution = "zipf", exponent = 0.99, values = ["000000000017", "000000000024"] }

[[operation]]
name = "product"
weight = 1
document = '''
query Product($upc: ID!) {
  product(upc: $upc) { upc name }
}'''
variables = { upc = "{upc}" }
reads = [{ at = "product", type = "Product", id = "upc", expect_id = "{upc}" }]
"#;

    #[test]
    fn an_operations_file_is_a_workload_at_the_top_level() {
        let w = operations_file(OPS, Path::new("ops.toml")).unwrap();
        assert_eq!(w.seed, 4);
        let op = &w.operations[0];
        assert_eq!(op.document_at.as_ref().unwrap().to_string(), "ops.toml:9");
        assert_eq!(
            op.body.render(&[1], 0),
            r#"{"query":"query Product($upc: ID!) {\n  product(upc: $upc) { upc name }\n}","variables":{"upc":"000000000024"}}"#
        );
    }

    #[test]
    fn refusals_name_the_file_and_the_line() {
        let no_variables = OPS
            .replace("query Product($upc: ID!) {", "query Product {")
            .replace("product(upc: $upc)", "product(upc: \"1\")");
        let e = operations_file(&no_variables, Path::new("ops.toml")).unwrap_err();
        assert_eq!(
            e,
            "ops.toml:12: workload.operation \"product\": the document declares no variables, but variables gives upc"
        );
        let broken = OPS.replace("{ upc name }", "{ upc name ");
        let e = operations_file(&broken, Path::new("ops.toml")).unwrap_err();
        assert!(e.starts_with("ops.toml:1"), "{e}");
        assert!(e.contains("does not parse"), "{e}");
        let e = operations_file("[[operation]]\nname = 3\n", Path::new("ops.toml")).unwrap_err();
        assert!(e.starts_with("ops.toml: "), "{e}");
        let mutation = OPS.replace("query Product", "mutation Product");
        let e = operations_file(&mutation, Path::new("ops.toml")).unwrap_err();
        assert!(
            e.contains("the document is a mutation; say what it writes"),
            "{e}"
        );
    }
}
