//! Federation: serial mutations and `@skip`/`@include` (graph `operations`, in
//! `tests/supergraphs/operations/`).
//!
//! One account in three subgraphs that share its state: `ledger` owns `deposit` and
//! the balance, `cards` owns `charge`, and `audit` answers each account's `history`.
//! A mutation's root fields must run one after another, each with everything beneath
//! it (entity fetches included) done before the next starts: `ledger` holds every
//! deposit for 100 ms, so a gateway that ran them at once would apply a later charge
//! first, and `audit` every request for 50 ms, so a history fetched beside the next
//! mutation would show it. The `@skip` and
//! `@include` tests check the answer and that a skipped selection costs no fetch.

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_graphql::dynamic::Object;
use common::federated::schema::{arg, computed, Subgraph};
use common::federated::Federation;
use parking_lot::Mutex;
use serde_json::{json, Value as Json};

const GRAPH: &str = "operations";

#[derive(Default)]
struct Account {
    balance: i64,
    history: Vec<String>,
}

type Shared = Arc<Mutex<Account>>;

fn acc1() -> Json {
    json!({ "__typename": "Account", "id": "acc1" })
}

/// The account, for a representation or an id.
fn known(id: &Json) -> Json {
    if id == "acc1" {
        acc1()
    } else {
        Json::Null
    }
}

fn id_field() -> async_graphql::dynamic::Field {
    common::federated::schema::field("id", "ID!")
}

fn ledger(state: Shared) -> Subgraph {
    let (deposit, balance) = (state.clone(), state);
    Subgraph::new(
        "ledger",
        Object::new("Query").field(
            computed("account", "Account", |_, args| Ok(known(&args["id"])))
                .argument(arg("id", "ID!")),
        ),
    )
    .mutation(
        Object::new("Mutation").field(
            computed("deposit", "Account!", move |_, args| {
                let amount = args["amount"].as_i64().unwrap_or_default();
                let mut account = deposit.lock();
                account.balance += amount;
                account.history.push(format!("deposit {amount}"));
                Ok(acc1())
            })
            .argument(arg("amount", "Int!")),
        ),
    )
    .with(
        Object::new("Account")
            .key("id")
            .field(id_field())
            .field(computed("balance", "Int!", move |_, _| {
                Ok(json!(balance.lock().balance))
            })),
    )
    .entities(|rep| known(&rep["id"]))
    .delay(|query| {
        if query.contains("deposit") {
            Duration::from_millis(100)
        } else {
            Duration::ZERO
        }
    })
}

fn cards(state: Shared) -> Subgraph {
    Subgraph::new(
        "cards",
        Object::new("Query").field(computed("cardsVersion", "Int!", |_, _| Ok(json!(1)))),
    )
    .mutation(
        Object::new("Mutation").field(
            computed("charge", "Account!", move |_, args| {
                let amount = args["amount"].as_i64().unwrap_or_default();
                let mut account = state.lock();
                account.balance -= amount;
                account.history.push(format!("charge {amount}"));
                Ok(acc1())
            })
            .argument(arg("amount", "Int!")),
        ),
    )
    .with(Object::new("Account").key("id").field(id_field()))
    .entities(|rep| known(&rep["id"]))
}

fn audit(state: Shared) -> Subgraph {
    Subgraph::new(
        "audit",
        Object::new("Query").field(computed("auditVersion", "Int!", |_, _| Ok(json!(1)))),
    )
    .with(
        Object::new("Account")
            .key("id")
            .field(id_field())
            .field(computed("history", "[String!]!", move |_, _| {
                Ok(json!(state.lock().history))
            })),
    )
    .entities(|rep| known(&rep["id"]))
    // Read late: run beside the next mutation, a history would show it.
    .delay(|_| Duration::from_millis(50))
}

/// The three subgraphs over one account holding 100.
fn subgraphs() -> (Vec<Subgraph>, Shared) {
    let state: Shared = Arc::new(Mutex::new(Account {
        balance: 100,
        history: Vec::new(),
    }));
    (
        vec![
            ledger(state.clone()),
            cards(state.clone()),
            audit(state.clone()),
        ],
        state,
    )
}

async fn start() -> (Federation, Shared) {
    let (subgraphs, state) = subgraphs();
    (Federation::start(GRAPH, subgraphs).await, state)
}

#[tokio::test]
async fn committed_sdl_files_are_what_the_subgraphs_serve() {
    Federation::check(GRAPH, subgraphs().0).await;
}

#[tokio::test]
async fn mutations_run_one_after_another_each_with_its_entity_fetches() {
    let (fed, state) = start().await;
    let answer = fed
        .query(
            "mutation { first: deposit(amount: 10) { balance history } \
             second: charge(amount: 4) { balance history } third: deposit(amount: 1) { balance } }",
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": {
            "first": { "balance": 110, "history": ["deposit 10"] },
            "second": { "balance": 106, "history": ["deposit 10", "charge 4"] },
            "third": { "balance": 107 },
        } })
    );
    assert_eq!(
        state.lock().history,
        ["deposit 10", "charge 4", "deposit 1"]
    );
    // A read after the mutation sees all of it.
    let answer = fed
        .query("{ account(id: \"acc1\") { balance history } }")
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "account": { "balance": 107, "history": ["deposit 10", "charge 4", "deposit 1"] } } })
    );
}

#[tokio::test]
async fn a_mutations_arguments_come_from_variables() {
    let (fed, state) = start().await;
    let answer = fed
        .query_with(
            "mutation Pay($in: Int!, $out: Int!) { deposit(amount: $in) { balance } charge(amount: $out) { balance } }",
            json!({ "in": 5, "out": 50 }),
        )
        .await;
    assert_eq!(
        answer,
        json!({ "data": { "deposit": { "balance": 105 }, "charge": { "balance": 55 } } })
    );
    assert_eq!(state.lock().history, ["deposit 5", "charge 50"]);
}

#[tokio::test]
async fn include_follows_its_variable_and_the_variables_default() {
    let (fed, _) = start().await;
    let query = "query($withHistory: Boolean = false) { account(id: \"acc1\") { balance history @include(if: $withHistory) } }";
    let answer = fed.query(query).await;
    assert_eq!(answer, json!({ "data": { "account": { "balance": 100 } } }));
    assert_eq!(fed.counts(), [("ledger", 1), ("cards", 0), ("audit", 0)]);
    let answer = fed.query_with(query, json!({ "withHistory": true })).await;
    assert_eq!(
        answer,
        json!({ "data": { "account": { "balance": 100, "history": [] } } })
    );
    assert_eq!(fed.counts(), [("ledger", 2), ("cards", 0), ("audit", 1)]);
}

#[tokio::test]
async fn skip_and_include_on_fragments_spreads_and_root_fields() {
    let (fed, _) = start().await;
    let query = "query($hide: Boolean!) { account(id: \"acc1\") { id ...Money @skip(if: $hide) \
                 ... on Account @include(if: $hide) { history } } \
                 gone: account(id: \"acc1\") @skip(if: true) { id } } \
                 fragment Money on Account { balance }";
    let answer = fed.query_with(query, json!({ "hide": true })).await;
    assert_eq!(
        answer,
        json!({ "data": { "account": { "id": "acc1", "history": [] } } })
    );
    assert_eq!(fed.counts(), [("ledger", 1), ("cards", 0), ("audit", 1)]);
    let answer = fed.query_with(query, json!({ "hide": false })).await;
    assert_eq!(
        answer,
        json!({ "data": { "account": { "id": "acc1", "balance": 100 } } })
    );
    assert_eq!(fed.counts(), [("ledger", 2), ("cards", 0), ("audit", 1)]);
}

#[tokio::test]
async fn skip_and_include_together_include_only_when_both_agree() {
    let (fed, _) = start().await;
    let query = "query($s: Boolean = false, $i: Boolean = true) { account(id: \"acc1\") { id history @skip(if: $s) @include(if: $i) } }";
    for (variables, history) in [
        (json!({}), true),
        (json!({ "s": true }), false),
        (json!({ "i": false }), false),
        (json!({ "s": true, "i": false }), false),
    ] {
        let expected = if history {
            json!({ "data": { "account": { "id": "acc1", "history": [] } } })
        } else {
            json!({ "data": { "account": { "id": "acc1" } } })
        };
        assert_eq!(
            fed.query_with(query, variables.clone()).await,
            expected,
            "{variables}"
        );
    }
    assert_eq!(fed.counts(), [("ledger", 4), ("cards", 0), ("audit", 1)]);
}

#[tokio::test]
async fn a_missing_required_condition_variable_is_refused() {
    let (fed, _) = start().await;
    let answer = fed
        .query("query($hide: Boolean!) { account(id: \"acc1\") { id balance @skip(if: $hide) } }")
        .await;
    assert_eq!(
        answer,
        json!({ "errors": [{ "message": "variable $hide of type Boolean! got nothing" }] })
    );
    assert_eq!(fed.counts(), [("ledger", 0), ("cards", 0), ("audit", 0)]);
}
