//! Recorded subgraph exchanges, answered back: what `loadgen target --replay DIR`
//! serves in place of a graph's subgraphs.
//!
//! `scripts/lib/exchange_recorder.py`, a proxy between a gateway and its subgraphs,
//! keeps each exchange it forwards as `NNN-NAME.request.json` and
//! `NNN-NAME.answer.json`. Loaded here, a POST of one of those request bodies to
//! `/NAME` gets that answer back, byte for byte, at the cost of a bare exchange. A
//! gateway can then be loaded with no subgraph work on the machine: the subgraphs'
//! own CPU (on the deep query, several times the gateway's) no longer competes with
//! it, nor swings its figure from one window to the next.
//!
//! A replay only holds for requests the gateway sends exactly as it did while
//! recording. One it did not record (another document, or entity batches that
//! caching split differently) gets 404 and a GraphQL error naming the subgraph and
//! the request's size: never another request's answer.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;

/// Per subgraph name, each recorded request body with its answer.
#[derive(Debug, Default)]
pub struct Replay {
    by_name: HashMap<String, HashMap<Bytes, Bytes>>,
}

/// Why a folder is not a recording.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{0}: no NNN-NAME.answer.json beside it")]
    NoAnswer(String),
    #[error("{0}: the same request as an earlier one, with another answer")]
    Conflict(String),
    #[error("{0}: no NNN-NAME.request.json in it")]
    Empty(String),
}

impl Replay {
    /// Every `NNN-NAME.request.json` in `dir`, with its `NNN-NAME.answer.json`.
    pub fn load(dir: &Path) -> Result<Replay, ReplayError> {
        let unreadable = |path: &Path| {
            let path = path.display().to_string();
            move |error| ReplayError::Read { path, error }
        };
        let read = |path: &Path| std::fs::read(path).map_err(unreadable(path));
        let entries = std::fs::read_dir(dir).map_err(unreadable(dir))?;
        let mut replay = Replay::default();
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(unreadable(dir))?;
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(stem) = file.strip_suffix(".request.json") {
                names.push(stem.to_owned());
            }
        }
        // In the recorder's order, so that a conflict names the later request.
        names.sort();
        for stem in names {
            let request = dir.join(format!("{stem}.request.json"));
            let answer_path = dir.join(format!("{stem}.answer.json"));
            if !answer_path.is_file() {
                return Err(ReplayError::NoAnswer(request.display().to_string()));
            }
            // `NNN-NAME`: the subgraph's name is what follows the first dash.
            let name = stem.split_once('-').map_or(stem.as_str(), |(_, n)| n);
            let body = Bytes::from(read(&request)?);
            let answer = Bytes::from(read(&answer_path)?);
            let recorded = replay.by_name.entry(name.to_owned()).or_default();
            match recorded.get(&body) {
                Some(earlier) if *earlier != answer => {
                    return Err(ReplayError::Conflict(request.display().to_string()));
                }
                _ => {
                    recorded.insert(body, answer);
                }
            }
        }
        if replay.by_name.is_empty() {
            return Err(ReplayError::Empty(dir.display().to_string()));
        }
        Ok(replay)
    }

    /// The answer recorded for `body` sent to the subgraph `name`.
    pub fn answer(&self, name: &str, body: &[u8]) -> Option<&Bytes> {
        self.by_name.get(name)?.get(body)
    }

    /// How many exchanges it holds (each distinct request once).
    pub fn len(&self) -> usize {
        self.by_name.values().map(HashMap::len).sum()
    }

    /// Whether it holds none (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
