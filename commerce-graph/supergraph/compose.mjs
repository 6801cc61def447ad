// Composes the commerce graph's supergraph from the four subgraph SDL files beside this
// script (products.graphql, inventory.graphql, reviews.graphql, accounts.graphql: each
// service's `_service { sdl }`, as scripts/compose-commerce.sh dumps them) with
// @theguild/federation-composition, the version package.json pins.
//
//   node compose.mjs [name=URL ...]          # writes supergraph.graphql
//   node compose.mjs --check [name=URL ...]  # exits 1 if a file is not what it would be
//
// Each `name=URL` (e.g. products=http://127.0.0.1:40121/graphql) first reads that running
// service's `_service { sdl }` into name.graphql (with --check: compares it with the
// file instead).
//
// Each subgraph's URL in the supergraph is its default address (commerce-service
// --subgraph NAME without --listen); a gateway started on other ports is told them.
// Composition errors are printed one per line and exit 1; nothing is written then.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "graphql";
import { composeServices, compositionHasErrors } from "@theguild/federation-composition";

const here = dirname(fileURLToPath(import.meta.url));
const subgraphs = [
  ["products", 3011],
  ["inventory", 3012],
  ["reviews", 3013],
  ["accounts", 3014],
];

const check = process.argv.includes("--check");
let stale = false;
for (const arg of process.argv.slice(2)) {
  if (arg === "--check") continue;
  const [name, url] = arg.split(/=(.*)/s);
  if (!url || !subgraphs.some(([n]) => n === name)) {
    console.error(`compose.mjs: ${arg}: expected name=URL with a name of ${subgraphs.map(([n]) => n).join(", ")}`);
    process.exit(1);
  }
  const sdl = await serviceSdl(name, url);
  const file = join(here, `${name}.graphql`);
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

const services = subgraphs.map(([name, port]) => {
  const file = join(here, `${name}.graphql`);
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    console.error(`compose.mjs: cannot read ${file}: ${e.message}`);
    process.exit(1);
  }
  return { name, url: `http://127.0.0.1:${port}/graphql`, typeDefs: parse(text) };
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

const out = join(here, "supergraph.graphql");
const sdl = result.supergraphSdl.endsWith("\n") ? result.supergraphSdl : `${result.supergraphSdl}\n`;
if (check) {
  if (readOr(out) !== sdl) {
    console.error(`compose.mjs: ${out} is not what the subgraph SDL files compose to`);
    stale = true;
  }
  if (stale) {
    console.error("compose.mjs: out of date; run scripts/compose-commerce.sh");
    process.exit(1);
  }
  console.log("compose.mjs: the subgraph SDL files and supergraph.graphql are up to date");
} else {
  writeFileSync(out, sdl);
  console.log(`compose.mjs: wrote ${out} (${sdl.length} bytes) from ${services.length} subgraphs`);
}
