use hive_router_query_planner::ast::normalization::normalize_operation;
use hive_router_query_planner::graph::PlannerOverrideContext;
use hive_router_query_planner::planner::{Planner, QueryPlannerOptions};
use hive_router_query_planner::utils::cancellation::CancellationToken;
use hive_router_query_planner::utils::parsing::{parse_operation, parse_schema};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sdl = std::fs::read_to_string(&args[1]).unwrap();
    let q = std::fs::read_to_string(&args[2]).unwrap();
    let t = std::time::Instant::now();
    let planner =
        Planner::new_from_supergraph(&parse_schema(&sdl), QueryPlannerOptions::default()).unwrap();
    eprintln!("planner built in {:?}", t.elapsed());
    if args.len() > 3 {
        println!("{}", planner.consumer_schema.document);
    }
    let t = std::time::Instant::now();
    let doc = parse_operation(&q);
    let norm = normalize_operation(&planner.supergraph, &doc, None).unwrap();
    println!("normalized: {}", norm.operation);
    let plan = planner
        .plan_from_normalized_operation(
            &norm.operation,
            PlannerOverrideContext::default(),
            &CancellationToken::new(),
        )
        .unwrap();
    eprintln!("planned in {:?}", t.elapsed());
    println!("{}", plan);
    println!("{}", serde_json::to_string_pretty(&plan).unwrap());
}
#[allow(dead_code)]
fn unused() {}
