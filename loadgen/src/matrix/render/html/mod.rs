//! The pages a browser opens from disk, with no server and nothing fetched from a
//! network: a run's page ([`run`], `results/<run>/index.html`), the index of every run
//! ([`index`], `results/index.html`) and two runs side by side ([`compare`], `loadgen
//! compare A B --html OUT`), all in the shell of [`page`]; a run page's
//! [`configurations`] and [`manifest`] tables have files of their own, and [`drawing`]
//! says which SVG files a page may draw inline. They are written by
//! [`crate::matrix::report`] from the files of the run folders.
//!
//! The HTML comes from maud templates (`html!`), which escape every string put into
//! them: what a run's files say (configuration, experiment and graph names, error paths
//! and messages, the manifest) is shown as text, never read as markup.
pub mod compare;
pub mod configurations;
pub mod drawing;
#[cfg(test)]
mod hostile_names;
pub mod index;
pub mod manifest;
pub mod page;
pub mod run;
