//! The limits every operation is held to, and the flags that set them.
//!
//! Each limit bounds one step's work before that step runs, in the order a request
//! meets them:
//!
//! | step | limit | flag |
//! |---|---|---|
//! | before parsing ([`super::lexical`]) | tokens; nesting of `{ ( [` | `--max-tokens`; 2 × `--max-depth` + 16 |
//! | after parsing ([`super::admit`]) | fields, fragment uses, root fields, aliases, all with fragments expanded | `--max-fields`, `--max-root-fields`, `--max-aliases` |
//! | validation (async-graphql) | selection depth; directives per field | `--max-depth`; `--max-directives` |
//! | before any fetch ([`super::cost`], the plan) | estimated cost; subgraph requests | `--max-cost` with `--list-size`; `--max-subgraph-requests` |
//! | execution and the response | bytes of one subgraph answer; bytes of the response | `--max-answer-bytes` |
//!
//! `--introspection off` refuses `__schema` and `__type` and leaves field suggestions
//! ("Did you mean …") out of validation errors. The defaults, beside the field's
//! (Apollo Router's, GraphQL Armor's), are listed in docs/gateway.md.

use clap::Args;

/// Limits on one operation, from its text to its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentLimits {
    /// Most tokens in the query text, counted before parsing.
    pub max_tokens: usize,
    /// Deepest selection nesting.
    pub max_depth: usize,
    /// Most fields (every alias counts, fragments expanded); also the most fragment
    /// spreads and inline fragments, counted wherever they are expanded.
    pub max_fields: usize,
    /// Most root fields (each is one subgraph request).
    pub max_root_fields: usize,
    /// Most aliases (fragments expanded); `None`: only `max_fields` bounds them.
    pub max_aliases: Option<usize>,
    /// Most directives on one field.
    pub max_directives: usize,
    /// Highest estimated cost ([`super::cost`]); `None`: no limit.
    pub max_cost: Option<u64>,
    /// The size assumed for a list that neither a size argument nor `@listSize`
    /// bounds.
    pub list_size: u64,
    /// Most subgraph requests one operation's plan may make.
    pub max_subgraph_requests: usize,
    /// Largest subgraph answer read, and largest response written, in bytes.
    pub max_answer_bytes: usize,
    /// Whether `__schema` and `__type` are answered, and errors suggest field names.
    pub introspection: bool,
}

impl DocumentLimits {
    /// The deepest nesting of `{`, `(` and `[` the text may have: room for the
    /// selection depth, with arguments and lists within it.
    pub fn max_nesting(&self) -> usize {
        self.max_depth * 2 + 16
    }
}

/// The default token limit for a field limit: Apollo Router's 15,000, or room for
/// `max_fields` aliased fields (`alias: name`, three tokens each) when that is more.
fn default_tokens(max_fields: usize) -> usize {
    15_000usize.max(max_fields.saturating_mul(4))
}

impl Default for DocumentLimits {
    /// The gateway's defaults, as its flags give them.
    fn default() -> Self {
        DocumentLimits {
            max_tokens: default_tokens(2000),
            max_depth: 32,
            max_fields: 2000,
            max_root_fields: 64,
            max_aliases: None,
            max_directives: 16,
            max_cost: Some(DEFAULT_MAX_COST),
            list_size: DEFAULT_LIST_SIZE,
            max_subgraph_requests: 32,
            max_answer_bytes: 16 << 20,
            introspection: true,
        }
    }
}

const DEFAULT_MAX_COST: u64 = 50_000;
const DEFAULT_LIST_SIZE: u64 = 10;

/// The limits' flags (flattened into the gateway's command line).
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Most tokens in the query text, counted before it is parsed (a larger text is
    /// refused without parsing it). Default: 15000, or 4 × --max-fields when larger.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: Option<u64>,
    /// Deepest accepted selection nesting.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=512))]
    pub max_depth: u64,
    /// Most fields (each alias counts, fragments expanded) in one operation; also the
    /// most fragment spreads and inline fragments, counted wherever they expand.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_fields: u64,
    /// Most root fields in one operation (each is one subgraph request).
    #[arg(long, default_value_t = 64)]
    pub max_root_fields: u64,
    /// Most aliases in one operation, fragments expanded. Default: no limit of its own
    /// (each alias is a field, counted by --max-fields).
    #[arg(long, value_name = "N")]
    pub max_aliases: Option<u64>,
    /// Most directives on one field.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_directives: u64,
    /// Highest estimated cost of an operation, refused before any fetch (0: no limit).
    /// Each object in the answer costs 1, a mutation's root field 10, leaves 0; a list
    /// multiplies what it holds by its size (a size argument, @listSize, or
    /// --list-size).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_COST)]
    pub max_cost: u64,
    /// The size assumed for a list that no size argument (first, last, count, limit)
    /// or @listSize bounds, when estimating cost.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIST_SIZE)]
    pub list_size: u64,
    /// Most subgraph requests one operation's plan may make (the committed experiments'
    /// largest plan makes 15).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_subgraph_requests: u64,
    /// Largest subgraph answer read and largest response written for one operation,
    /// in bytes: past it, the answer is an error naming the path where it stopped.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_answer_bytes: u64,
    /// Answer introspection (__schema, __type) and suggest field names in errors: on
    /// (the default) or off, as in production.
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = crate::cli::parse_switch, action = clap::ArgAction::Set)]
    pub introspection: bool,
}

impl LimitArgs {
    /// The limits the flags describe.
    pub fn limits(&self) -> DocumentLimits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let max_fields = size(self.max_fields);
        DocumentLimits {
            max_tokens: self
                .max_tokens
                .map_or_else(|| default_tokens(max_fields), size),
            max_depth: size(self.max_depth),
            max_fields,
            max_root_fields: size(self.max_root_fields),
            max_aliases: self.max_aliases.map(size),
            max_directives: size(self.max_directives),
            max_cost: (self.max_cost > 0).then_some(self.max_cost),
            list_size: self.list_size,
            max_subgraph_requests: size(self.max_subgraph_requests),
            max_answer_bytes: size(self.max_answer_bytes),
            introspection: self.introspection,
        }
    }
}
