'use strict'
// Hive Gateway as a peer of the lab's gateway: the Guild's federation gateway, run by its
// own CLI (`hive-gateway supergraph FILE`), the way its docs recommend for Node.js, with
// its response cache when a TTL is given. `loadgen matrix` starts it for a configuration
// with `peer = "hive-gateway"`, on the supergraph the lab's gateway composes from the
// experiment's subgraphs (`gateway compose`):
//
//   node gateway.js --port 4000 --supergraph supergraph.graphql [--response-ttl SECONDS]
//
// Settings: the CLI's defaults (one process, `--fork 1`; masked errors), its logging at
// "error", NODE_ENV=production, listening on 127.0.0.1. With --response-ttl the response
// cache (`responseCaching`, in memory) keeps whole answers for that many seconds, keyed by
// document, variables and the caller's `authorization` header (its session), and drops
// the entities a mutation returns. GET /readiness answers once the supergraph is loaded.
process.env.NODE_ENV = process.env.NODE_ENV || 'production'
const path = require('node:path')
const { parseFlags } = require('../flags')

// The flags loadgen passes (../flags.js says how they are read).
const FLAGS = {
  '--port': { key: 'port', kind: 'port', required: true },
  '--supergraph': { key: 'supergraph', kind: 'text', required: true },
  '--response-ttl': { key: 'responseTtl', kind: 'seconds' }
}

try {
  const args = parseFlags(process.argv.slice(2), FLAGS)
  // gateway.config.js reads the cache's TTL from here.
  if (args.responseTtl !== undefined) process.env.LAB_RESPONSE_TTL_MS = String(Math.round(args.responseTtl * 1000))
  // The CLI's ES module build: its CommonJS build default-imports cache-control-parser,
  // which 2.2.0 no longer provides, and its response cache then fails on every subgraph
  // answer that carries Cache-Control ("Cannot read properties of undefined (reading
  // 'parse')"); Node's ES modules take the package's exports whole.
  const bin = path.join(__dirname, 'node_modules', '@graphql-hive', 'gateway', 'dist', 'bin.js')
  process.argv = [process.argv[0], bin, 'supergraph', args.supergraph,
    '--host', '127.0.0.1', '--port', String(args.port),
    '--config-path', path.join(__dirname, 'gateway.config.js')]
  import(bin).catch((err) => {
    console.error(`hive-gateway peer: ${err.message}`)
    process.exit(1)
  })
} catch (err) {
  console.error(`hive-gateway peer: ${err.message}`)
  process.exit(1)
}
