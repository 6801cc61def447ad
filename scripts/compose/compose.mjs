// Composes a graph's supergraph from the subgraph SDL files of its folder with
// @theguild/federation-composition, the version package.json beside this script pins.
//
//   node compose.mjs DIR [name=URL ...]          # writes DIR/supergraph.graphql
//   node compose.mjs DIR --check [name=URL ...]  # exits 1 if a file is not what it would be
//
// DIR/subgraphs.json names the subgraphs, in order, each with the URL the supergraph
// gives it ({"products": "http://127.0.0.1:3011/graphql", ...}); DIR/<name>.graphql is
// each one's `_service { sdl }`. Used for the commerce graph (commerce-graph/supergraph,
// by scripts/compose-commerce.sh) and the planner fuzzer's graph
// (gateway/tests/planner_fuzz/supergraph, by scripts/compose-planner-fuzz.sh).
//
// Each `name=URL` (e.g. products=http://127.0.0.1:40121/graphql) first reads that running
// service's `_service { sdl }` into DIR/name.graphql (with --check: compares it with the
// file instead).
//
// Composition errors are printed one per line and exit 1; nothing is written then.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "graphql";
import { composeServices, compositionHasErrors } from "@theguild/federation-composition";

const args = process.argv.slice(2);
const dir = args.shift();
if (!dir || dir.startsWith("-") || dir.includes("=")) {
  console.error("usage: node compose.mjs DIR [--check] [name=URL ...]");
  process.exit(2);
}
let subgraphs;
try {
  subgraphs = Object.entries(JSON.parse(readFileSync(join(dir, "subgraphs.json"), "utf8")));
} catch (e) {
  console.error(`compose.mjs: cannot read ${join(dir, "subgraphs.json")}: ${e.message}`);
  process.exit(1);
}

const check = args.includes("--check");
let stale = false;
for (const arg of args) {
  if (arg === "--check") continue;
  const [name, url] = arg.split(/=(.*)/s);
  if (!url || !subgraphs.some(([n]) => n === name)) {
    console.error(`compose.mjs: ${arg}: expected name=URL with a name of ${subgraphs.map(([n]) => n).join(", ")}`);
    process.exit(1);
  }
  const sdl = await serviceSdl(name, url);
  const file = join(dir, `${name}.graphql`);
  if (check) {
    if (readOr(file) !== sdl) {
      console.error(`compose.mjs: ${file} is not the SDL ${name} at ${url} serves`);
      stale = true;
    }
  } else {
    writeFileSync(file, sdl);
    console.log(`compose.mjs: wrote ${file} from ${url}`);
  }
}

async function serviceSdl(name, url) {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ _service { sdl } }" }),
    });
    const body = await response.json();
    if (!response.ok || body.errors || typeof body.data?._service?.sdl !== "string") {
      throw new Error(`HTTP ${response.status}: ${JSON.stringify(body).slice(0, 300)}`);
    }
    return body.data._service.sdl;
  } catch (e) {
    console.error(`compose.mjs: reading ${name}'s SDL from ${url}: ${e.message}`);
    process.exit(1);
  }
}

function readOr(file) {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

const services = subgraphs.map(([name, url]) => {
  const file = join(dir, `${name}.graphql`);
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    console.error(`compose.mjs: cannot read ${file}: ${e.message}`);
    process.exit(1);
  }
  return { name, url, typeDefs: parse(text) };
});

const result = composeServices(services);
if (compositionHasErrors(result)) {
  console.error(`compose.mjs: composition failed with ${result.errors.length} error(s):`);
  for (const error of result.errors) {
    const code = error.extensions?.code ? `[${error.extensions.code}] ` : "";
    console.error(`  ${code}${error.message}`);
  }
  process.exit(1);
}

const out = join(dir, "supergraph.graphql");
const sdl = result.supergraphSdl.endsWith("\n") ? result.supergraphSdl : `${result.supergraphSdl}\n`;
if (check) {
  if (readOr(out) !== sdl) {
    console.error(`compose.mjs: ${out} is not what the subgraph SDL files compose to`);
    stale = true;
  }
  if (stale) {
    console.error(`compose.mjs: ${dir} is out of date; recompose it`);
    process.exit(1);
  }
  console.log(`compose.mjs: the subgraph SDL files and supergraph.graphql of ${dir} are up to date`);
} else {
  writeFileSync(out, sdl);
  console.log(`compose.mjs: wrote ${out} (${sdl.length} bytes) from ${services.length} subgraphs`);
}
