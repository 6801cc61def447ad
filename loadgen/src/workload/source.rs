//! Where a workload's operations stand in the files they came from, so that a refusal
//! can name the file and the line: the line where each operation's document text
//! begins (in the TOML file, or in its `document_file`), and the line of its
//! `variables`.
//!
//! The TOML text is read a second time for this, into spanned values
//! (`toml::Spanned`); everything else about the table is [`super::spec`]'s.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A line of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
}

impl Place {
    /// The place `lines` lines further down (`0`: this one).
    pub fn down(&self, lines: usize) -> Place {
        Place {
            file: self.file.clone(),
            line: self.line + lines,
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One operation's places.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperationPlaces {
    /// Where its document's first line is (an inline document's, or line 1 of its
    /// `document_file`, which [`super::spec`] fills in).
    pub document: Option<Place>,
    /// The `variables` key's line.
    pub variables: Option<Place>,
    /// The `name` key's line.
    pub name: Option<Place>,
}

/// Where a workload table came from: the directory its files are relative to, and
/// each operation's places (by index; missing when unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub base_dir: PathBuf,
    pub operations: Vec<OperationPlaces>,
}

/// Which table of the file holds the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `[workload]` of an experiment (or of a `--workload` file).
    Workload,
    /// The file's top level: an operations file.
    TopLevel,
}

#[derive(Deserialize)]
struct Spans {
    #[serde(default, rename = "operation")]
    operations: Vec<OperationSpans>,
}

#[derive(Deserialize)]
struct Nested {
    #[serde(default)]
    workload: Option<Spans>,
}

#[derive(Deserialize)]
struct OperationSpans {
    #[serde(default)]
    name: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    document: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    variables: Option<toml::Spanned<toml::Value>>,
}

impl Origin {
    /// No places known, files relative to `base_dir`.
    pub fn in_dir(base_dir: &Path) -> Origin {
        Origin {
            base_dir: base_dir.to_path_buf(),
            operations: Vec::new(),
        }
    }

    /// The places of the operations of `table` in `text`, the contents of `file`. A
    /// text that does not parse gives no places (its error is reported by the parse
    /// that matters).
    pub fn of(text: &str, file: &Path, table: Table) -> Origin {
        let base_dir = match file.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let spans = match table {
            Table::TopLevel => toml::from_str::<Spans>(text).ok(),
            Table::Workload => toml::from_str::<Nested>(text).ok().and_then(|n| n.workload),
        };
        let place = |offset: usize| Place {
            file: file.to_path_buf(),
            line: line_at(text, offset),
        };
        let operations = spans
            .map(|s| s.operations)
            .unwrap_or_default()
            .into_iter()
            .map(|o| OperationPlaces {
                document: o
                    .document
                    .as_ref()
                    .map(|d| place(document_start(text, d.span().start))),
                variables: o.variables.as_ref().map(|v| place(v.span().start)),
                name: o.name.as_ref().map(|n| place(n.span().start)),
            })
            .collect();
        Origin {
            base_dir,
            operations,
        }
    }

    /// Operation `index`'s places.
    pub fn operation(&self, index: usize) -> OperationPlaces {
        self.operations.get(index).cloned().unwrap_or_default()
    }
}

/// The 1-based line of byte `offset` of `text`.
pub fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Where a string value's text begins, given where the value does: after its opening
/// quote(s), and after the newline that TOML drops right after a `'''` or `"""`.
fn document_start(text: &str, value: usize) -> usize {
    let rest = &text[value.min(text.len())..];
    for delimiter in ["'''", "\"\"\"", "'", "\""] {
        if let Some(after) = rest.strip_prefix(delimiter) {
            let skipped = delimiter.len()
                + if delimiter.len() == 3 {
                    if after.starts_with("\r\n") {
                        2
                    } else {
                        usize::from(after.starts_with('\n'))
                    }
                } else {
                    0
                };
            return value + skipped;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_document_is_placed_on_the_line_its_text_begins() {
        let text = "seed = 1\n\n[[operation]]\nname = \"a\"\ndocument = '{ a }'\n\n[[operation]]\nname = \"b\"\ndocument = '''\nquery($x: ID!) {\n  b(x: $x)\n}'''\nvariables = { x = \"1\" }\n";
        let origin = Origin::of(text, Path::new("dir/ops.toml"), Table::TopLevel);
        assert_eq!(origin.base_dir, Path::new("dir"));
        let a = origin.operation(0);
        assert_eq!(a.document.unwrap().to_string(), "dir/ops.toml:5");
        assert_eq!(a.name.unwrap().line, 4);
        assert!(a.variables.is_none());
        let b = origin.operation(1);
        assert_eq!(b.document.as_ref().unwrap().line, 10);
        assert_eq!(b.document.unwrap().down(1).line, 11);
        assert_eq!(b.variables.unwrap().line, 13);
        assert_eq!(origin.operation(7), OperationPlaces::default());
        let nested = format!(
            "[run]\nrounds = 1\n{}",
            text.replace("[[operation]]", "[[workload.operation]]")
                .replace("seed = 1\n", "[workload]\nseed = 1\n")
        );
        let origin = Origin::of(&nested, Path::new("e.toml"), Table::Workload);
        assert_eq!(origin.base_dir, Path::new("."));
        assert_eq!(origin.operation(1).document.unwrap().line, 13);
    }
}
