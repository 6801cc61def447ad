// A reference run of the commerce graph through Apollo's own federation stack, to check
// our supergraph and measure the deep queries before the lab's gateway plans them:
//
// 1. composes the four subgraph SDL files with @apollo/composition as well, and prints
//    its errors and hints (the composer we commit with, @theguild's, gives no hints);
// 2. plans every operation of queries/deep.graphql with @apollo/query-planner over the
//    committed supergraph.graphql: fetches, and levels of fetches that wait on each other;
// 3. runs each through @apollo/gateway against the four running services, and prints
//    the answer's size (compact JSON, as a gateway sends it) and any errors.
//
//   node reference.mjs [--plans DIR] [name=URL ...]
//
// URLs default to the supergraph's (commerce-service's default ports); `name=URL`
// (e.g. reviews=http://127.0.0.1:4013/graphql) points a subgraph elsewhere. --plans
// writes each query plan, pretty-printed, to DIR/<operation>.txt.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, print, Kind } from "graphql";
import { composeServices } from "@apollo/composition";
import { Supergraph, operationFromDocument } from "@apollo/federation-internals";
import { QueryPlanner, prettyFormatQueryPlan } from "@apollo/query-planner";
import { ApolloGateway, RemoteGraphQLDataSource } from "@apollo/gateway";
import { ApolloServer } from "@apollo/server";

const here = dirname(fileURLToPath(import.meta.url));
const graph = join(here, "..");
const names = ["products", "inventory", "reviews", "accounts"];

const urls = {};
let plansDir = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--plans") {
    plansDir = argv[++i];
  } else if (/^[a-z]+=/.test(argv[i])) {
    const [name, url] = argv[i].split(/=(.*)/s);
    if (!names.includes(name)) fail(`${argv[i]}: no subgraph named ${name} (${names.join(", ")})`);
    urls[name] = url;
  } else {
    fail(`unknown argument ${argv[i]}`);
  }
}

function fail(message) {
  console.error(`reference.mjs: ${message}`);
  process.exit(1);
}

// 1. Apollo's composition of the same SDL files.
const services = names.map((name) => ({
  name,
  url: `http://127.0.0.1/${name}`,
  typeDefs: parse(readFileSync(join(graph, "supergraph", `${name}.graphql`), "utf8")),
}));
const composed = composeServices(services);
if (composed.errors) {
  console.log(`apollo composition: ${composed.errors.length} error(s)`);
  for (const e of composed.errors) console.log(`  error: ${e.message}`);
  process.exit(1);
}
console.log(`apollo composition: no errors, ${composed.hints.length} hint(s)`);
for (const h of composed.hints) console.log(`  hint [${h.definition.code}]: ${h.message}`);

// 2. Plans over the committed supergraph.
const supergraphSdl = readFileSync(join(graph, "supergraph", "supergraph.graphql"), "utf8");
const supergraph = Supergraph.build(supergraphSdl);
const planner = new QueryPlanner(supergraph);
const document = parse(readFileSync(join(graph, "queries", "deep.graphql"), "utf8"));
const operations = document.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);

function levels(node) {
  if (!node) return 0;
  switch (node.kind) {
    case "Fetch":
      return 1;
    case "Flatten":
      return levels(node.node);
    case "Sequence":
      return node.nodes.reduce((sum, n) => sum + levels(n), 0);
    case "Parallel":
      return Math.max(0, ...node.nodes.map(levels));
    case "Condition":
      return Math.max(levels(node.ifClause), levels(node.elseClause));
    default:
      throw new Error(`plan node ${node.kind}`);
  }
}

function fetches(node, out = []) {
  if (!node) return out;
  if (node.kind === "Fetch") out.push(node.serviceName);
  for (const child of [node.node, ...(node.nodes ?? []), node.ifClause, node.elseClause]) fetches(child, out);
  return out;
}

// 3. The gateway over the running services.
const gateway = new ApolloGateway({
  supergraphSdl,
  buildService: ({ name, url }) => new RemoteGraphQLDataSource({ url: urls[name] ?? url }),
});
const server = new ApolloServer({ gateway, includeStacktraceInErrorResponses: false });
await server.start();

let failed = false;
if (plansDir) mkdirSync(plansDir, { recursive: true });
for (const op of operations) {
  const name = op.name.value;
  const single = { kind: Kind.DOCUMENT, definitions: [op] };
  const plan = planner.buildQueryPlan(operationFromDocument(supergraph.schema, single));
  const used = fetches(plan.node);
  if (plansDir) writeFileSync(join(plansDir, `${name}.txt`), `${prettyFormatQueryPlan(plan)}\n`);
  const response = await server.executeOperation({ query: print(single), operationName: name });
  const result = response.body.singleResult;
  const bytes = Buffer.byteLength(JSON.stringify({ data: result.data ?? null, ...(result.errors ? { errors: result.errors } : {}) }));
  const errors = result.errors?.length ?? 0;
  if (errors) failed = true;
  const counts = names.map((s) => `${s} ${used.filter((u) => u === s).length}`).join(", ");
  console.log(
    `${name}: ${bytes} bytes, ${errors} error(s); plan: ${used.length} fetches (${counts}), ${levels(plan.node)} levels`,
  );
  for (const e of result.errors ?? []) console.log(`  error: ${e.message} at ${JSON.stringify(e.path)}`);
}
await server.stop();
process.exit(failed ? 1 : 0);
