//! The strategy guide (`docs/strategies.md`) quotes its worked example,
//! `ttl_jitter.rs`, whole (up to the tests): these fail when the two drift
//! apart, and when the example is no longer in the catalogue it claims to be in.

use cache_core::strategies::{self, CATALOGUE};

const GUIDE: &str = include_str!("../../../docs/strategies.md");
const EXAMPLE: &str = include_str!("../../src/strategies/ttl_jitter.rs");

#[test]
fn guide_quotes_the_example_strategy_as_it_is() {
    let code = EXAMPLE[..EXAMPLE.find("#[cfg(test)]").expect("the example has tests")].trim_end();
    let marker = "<!-- the example: cache-core/src/strategies/ttl_jitter.rs";
    let after = &GUIDE[GUIDE.find(marker).expect("the guide marks the example")..];
    let start = after
        .find("```rust\n")
        .expect("a rust block follows the marker")
        + "```rust\n".len();
    let end = start + after[start..].find("```").expect("the block ends");
    assert_eq!(
        after[start..end].trim_end(),
        code,
        "docs/strategies.md must quote cache-core/src/strategies/ttl_jitter.rs as it is"
    );
}

#[test]
fn guide_example_is_registered_and_built_by_name() {
    assert!(CATALOGUE.iter().any(|e| e.name == "ttl-jitter"));
    let built = strategies::parse_and_build::<String>("ttl-jitter:spread=0.5").unwrap();
    assert_eq!(built.name(), "ttl-jitter");
    let error = strategies::parse_and_build::<String>("ttl-jitter:spread=2")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("expected 0 to 1") && error.contains("second-hit"),
        "{error}"
    );
    assert!(
        GUIDE.contains("ttl_jitter::TtlJitter,"),
        "the registration line is shown"
    );
}
