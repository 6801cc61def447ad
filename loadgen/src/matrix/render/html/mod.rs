//! The pages a browser opens from disk, with no server and nothing fetched from a
//! network: a run's page ([`run`], `results/<run>/index.html`), the index of every run
//! ([`index`], `results/index.html`) and two runs side by side ([`compare`], `loadgen
//! compare A B --html OUT`), all in the shell of [`page`]; a run page's
//! [`configurations`] and [`manifest`] tables have files of their own. They are written by
//! [`crate::matrix::report`] from the files of the run folders.
pub mod compare;
pub mod configurations;
pub mod index;
pub mod manifest;
pub mod page;
pub mod run;
