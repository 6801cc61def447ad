//! Which gateway build a configuration runs, so that an A/B of two commits (or of a
//! feature, a profile, an allocator) is an ordinary experiment: measured in the same
//! interleaved rounds, with intervals and a differential flamegraph on its page.
//!
//! A `[[config]]` may say `build = { binary = "PATH" }` (a gateway built elsewhere) or
//! `build = { revision = "REV", profile = "release", features = [...],
//! default_features = true }`: the gateway of that commit of the lab's own repository
//! (the one loadgen runs in), built once and kept.
//!
//! **How a revision is built.** Before the first round, each revision is resolved to
//! its commit (`git rev-parse`), and its binary looked for in the cache,
//! `target/gateway-builds/<commit>-<profile>[-<features>]/gateway`. A missing one is
//! built from the commit's files (`git archive`, so the working tree's uncommitted
//! changes never leak into it) with `cargo build --locked -p gateway`, into
//! `target/gateway-builds/target`, a target directory shared by every revision so that
//! dependencies compile once. The first build of all copies the workspace's own
//! `target/<profile>` there first (`cp -a`: the timestamps cargo compares must stay
//! as they were), which makes it an incremental build of the
//! workspace's crates. Every build is bounded by [`BUILD_DEADLINE`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

use super::experiment::ConfigSpec;
use super::manifest::{self, BinaryInfo};
use super::reaper::TrackedChild;

/// The longest one revision's build may take before the run gives up on it.
pub const BUILD_DEADLINE: Duration = Duration::from_secs(45 * 60);

/// `build = { ... }` as written in a `[[config]]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildFile {
    binary: Option<String>,
    revision: Option<String>,
    profile: Option<String>,
    #[serde(default)]
    features: Vec<String>,
    default_features: Option<bool>,
}

/// Which gateway a configuration runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayBuild {
    /// A binary built elsewhere.
    Binary { path: PathBuf },
    /// A commit of the lab's repository, built by the runner.
    Revision {
        revision: String,
        profile: String,
        features: Vec<String>,
        default_features: bool,
    },
}

/// A name safe on a command line and in a folder name: letters, digits, `-`, `_`,
/// `.`, `/`, `~`, `^`, not starting with `-`.
fn plain(text: &str, extra: &str) -> bool {
    !text.is_empty()
        && !text.starts_with('-')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c) || extra.contains(c))
}

impl BuildFile {
    /// Check the table; `at` names the configuration for messages.
    pub fn check(self, at: &str) -> Result<GatewayBuild, String> {
        match (self.binary, self.revision) {
            (Some(_), Some(_)) | (None, None) => Err(format!(
                "{at}: build: give either binary = \"PATH\" or revision = \"REV\""
            )),
            (Some(path), None) => {
                if self.profile.is_some()
                    || !self.features.is_empty()
                    || self.default_features.is_some()
                {
                    return Err(format!(
                        "{at}: build: profile, features and default_features go with revision, not binary"
                    ));
                }
                Ok(GatewayBuild::Binary {
                    path: PathBuf::from(path),
                })
            }
            (None, Some(revision)) => {
                if !plain(&revision, "./~^") {
                    return Err(format!(
                        "{at}: build.revision = {revision:?}: a commit, branch or tag (letters, digits, - _ . / ~ ^)"
                    ));
                }
                let profile = self.profile.unwrap_or_else(|| "release".into());
                if !plain(&profile, "") {
                    return Err(format!(
                        "{at}: build.profile = {profile:?}: not a profile name"
                    ));
                }
                if let Some(f) = self.features.iter().find(|f| !plain(f, "/")) {
                    return Err(format!("{at}: build.features: {f:?} is not a feature name"));
                }
                Ok(GatewayBuild::Revision {
                    revision,
                    profile,
                    features: self.features,
                    default_features: self.default_features.unwrap_or(true),
                })
            }
        }
    }
}

/// A configuration's build, resolved: what it is and where its binary is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedBuild {
    pub config: String,
    pub build: GatewayBuild,
    /// The commit a revision resolved to.
    pub commit: Option<String>,
    pub binary: PathBuf,
    /// Whether this run built it (false: found in the cache, or a given binary).
    pub built_now: bool,
}

fn git(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("running git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("git {} failed in {}", args.join(" "), root.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The cache folder name of a revision's build.
fn build_name(commit: &str, profile: &str, features: &[String], default_features: bool) -> String {
    let mut name = format!("{}-{profile}", &commit[..12.min(commit.len())]);
    if !default_features {
        name.push_str("-no-default");
    }
    for f in features {
        name.push('-');
        name.push_str(&f.replace('/', "_"));
    }
    name
}

/// `target/<dir>` of a cargo profile.
fn profile_dir(profile: &str) -> &str {
    match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    }
}

/// Build the gateway of `commit` into `cache`, returning its binary.
fn build(
    root: &Path,
    cache: &Path,
    commit: &str,
    profile: &str,
    features: &[String],
    default_features: bool,
) -> anyhow::Result<PathBuf> {
    let target = cache.join("target");
    let seed = root.join("target").join(profile_dir(profile));
    if !target.exists() && seed.is_dir() {
        eprintln!(
            "loadgen matrix: seeding {} from {} (dependencies built once)",
            target.display(),
            seed.display()
        );
        std::fs::create_dir_all(&target)?;
        TrackedChild::run_to_end(
            "cp",
            Command::new("cp").arg("-a").arg(&seed).arg(&target),
            BUILD_DEADLINE,
        )?;
    }
    let src = cache.join(format!("src-{commit}"));
    if src.exists() {
        std::fs::remove_dir_all(&src)?;
    }
    std::fs::create_dir_all(&src)?;
    // git archive | tar -x: the commit's files, never the working tree's changes.
    let archive = cache.join(format!("src-{commit}.tar"));
    TrackedChild::run_to_end(
        "git archive",
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["archive", "--format=tar", "-o"])
            .arg(&archive)
            .arg(commit),
        BUILD_DEADLINE,
    )?;
    TrackedChild::run_to_end(
        "tar",
        Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&src),
        BUILD_DEADLINE,
    )?;
    std::fs::remove_file(&archive).ok();
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--locked", "-p", "gateway", "--profile", profile]);
    if !default_features {
        cargo.arg("--no-default-features");
    }
    if !features.is_empty() {
        cargo.arg("--features").arg(features.join(","));
    }
    eprintln!(
        "loadgen matrix: building the gateway of {commit} ({profile}{}{}); at most {} min",
        if default_features {
            ""
        } else {
            ", no default features"
        },
        if features.is_empty() {
            String::new()
        } else {
            format!(", features {}", features.join(","))
        },
        BUILD_DEADLINE.as_secs() / 60
    );
    let built = TrackedChild::run_to_end("cargo build", &mut cargo, BUILD_DEADLINE);
    std::fs::remove_dir_all(&src).ok();
    built?;
    Ok(target.join(profile_dir(profile)).join("gateway"))
}

/// Resolve every configuration's build before the first round: check given binaries,
/// and find or build each revision. `root` is the lab's repository.
pub fn prepare(
    builds: &[(String, GatewayBuild)],
    root: &Path,
) -> anyhow::Result<Vec<ResolvedBuild>> {
    let mut resolved = Vec::new();
    for (config, b) in builds {
        let at = format!("config {config:?}: build");
        match b {
            GatewayBuild::Binary { path } => {
                let meta = std::fs::metadata(path)
                    .map_err(|e| anyhow!("{at}.binary = {}: {e}", path.display()))?;
                use std::os::unix::fs::PermissionsExt;
                if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                    bail!("{at}.binary = {}: not an executable file", path.display());
                }
                resolved.push(ResolvedBuild {
                    config: config.clone(),
                    build: b.clone(),
                    commit: None,
                    binary: std::fs::canonicalize(path)?,
                    built_now: false,
                });
            }
            GatewayBuild::Revision {
                revision,
                profile,
                features,
                default_features,
            } => {
                let commit = git(
                    root,
                    &["rev-parse", "--verify", &format!("{revision}^{{commit}}")],
                )
                .map_err(|_| {
                    anyhow!(
                        "{at}.revision = {revision:?}: not a commit of {}",
                        root.display()
                    )
                })?;
                let cache = root.join("target").join("gateway-builds");
                let keep = cache
                    .join(build_name(&commit, profile, features, *default_features))
                    .join("gateway");
                let built_now = !keep.is_file();
                if built_now {
                    let binary = build(root, &cache, &commit, profile, features, *default_features)
                        .with_context(|| format!("{at}.revision = {revision:?}"))?;
                    std::fs::create_dir_all(keep.parent().unwrap_or(&cache))?;
                    let partial = keep.with_extension("partial");
                    std::fs::copy(&binary, &partial)?;
                    std::fs::rename(&partial, &keep)?;
                } else {
                    eprintln!(
                        "loadgen matrix: {config}: the gateway of {revision} ({commit}) from {}",
                        keep.display()
                    );
                }
                resolved.push(ResolvedBuild {
                    config: config.clone(),
                    build: b.clone(),
                    commit: Some(commit),
                    binary: keep,
                    built_now,
                });
            }
        }
    }
    Ok(resolved)
}

/// Every configuration's own build (`build = {...}`), found or built before anything
/// starts; each such configuration then runs its build's binary.
pub fn resolve(configs: &mut [ConfigSpec]) -> anyhow::Result<Vec<ResolvedBuild>> {
    let wanted: Vec<(String, GatewayBuild)> = configs
        .iter()
        .filter_map(|c| Some((c.name.clone(), c.build.clone()?)))
        .collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let resolved = prepare(&wanted, &repository_root()?)?;
    for b in &resolved {
        if let Some(c) = configs.iter_mut().find(|c| c.name == b.config) {
            c.gateway_binary = Some(b.binary.clone());
        }
    }
    Ok(resolved)
}

impl ResolvedBuild {
    /// The manifest's record of its binary, named `gateway (CONFIG)`.
    pub fn binary_info(&self) -> BinaryInfo {
        manifest::binary_info(&format!("gateway ({})", self.config), &self.binary)
    }
}

/// The lab's repository: the git work tree loadgen runs in.
pub fn repository_root() -> anyhow::Result<PathBuf> {
    let here = std::env::current_dir()?;
    git(&here, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|_| {
            anyhow!(
                "build.revision needs loadgen to run inside the lab's git repository ({} is not in one)",
                here.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> BuildFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_build_is_a_binary_or_a_revision_and_bad_ones_are_named() {
        assert_eq!(
            file(r#"revision = "HEAD~1""#).check("config \"a\""),
            Ok(GatewayBuild::Revision {
                revision: "HEAD~1".into(),
                profile: "release".into(),
                features: vec![],
                default_features: true,
            })
        );
        assert_eq!(
            file(r#"binary = "/opt/gateway""#).check("c"),
            Ok(GatewayBuild::Binary {
                path: "/opt/gateway".into()
            })
        );
        for (text, says) in [
            (
                r#"binary = "a"
revision = "b""#,
                "either binary",
            ),
            ("", "either binary"),
            (
                r#"binary = "a"
profile = "release""#,
                "go with revision",
            ),
            (r#"revision = "--upload-pack=x""#, "build.revision"),
            (
                r#"revision = "main"
profile = "rel ease""#,
                "build.profile",
            ),
            (
                r#"revision = "main"
features = ["a,b"]"#,
                "build.features",
            ),
        ] {
            let err = file(text).check("config \"x\"").unwrap_err();
            assert!(
                err.contains(says) && err.starts_with("config \"x\""),
                "{text}: {err}"
            );
        }
        assert!(toml::from_str::<BuildFile>(r#"commit = "x""#).is_err());
    }

    #[test]
    fn cache_names_tell_builds_apart() {
        let c = "0123456789abcdef0123";
        assert_eq!(build_name(c, "release", &[], true), "0123456789ab-release");
        assert_eq!(
            build_name(c, "release", &["std-hasher".into()], false),
            "0123456789ab-release-no-default-std-hasher"
        );
        assert_eq!(profile_dir("dev"), "debug");
        assert_eq!(profile_dir("release-lto"), "release-lto");
    }

    #[test]
    fn a_missing_binary_or_revision_is_refused_by_name() {
        let err = prepare(
            &[(
                "old".into(),
                GatewayBuild::Binary {
                    path: "/nonexistent/gateway".into(),
                },
            )],
            Path::new("."),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("config \"old\": build.binary = /nonexistent/gateway"),
            "{err}"
        );
        let root = repository_root().unwrap();
        let err = prepare(
            &[(
                "old".into(),
                GatewayBuild::Revision {
                    revision: "no-such-branch-anywhere".into(),
                    profile: "release".into(),
                    features: vec![],
                    default_features: true,
                },
            )],
            &root,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("build.revision = \"no-such-branch-anywhere\": not a commit"),
            "{err}"
        );
    }
}
