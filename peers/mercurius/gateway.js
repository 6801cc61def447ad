'use strict'
// The seed's own gateway as a peer of the lab's: @mercuriusjs/gateway on Fastify, with
// mercurius-cache when a TTL is given. `loadgen matrix` starts it for a configuration
// with `peer = "mercurius"`, on the subgraphs the experiment's graph names, in its order:
//
//   node gateway.js --port 4000 --subgraph user=http://127.0.0.1:4001/graphql \
//     --subgraph post=http://127.0.0.1:4002/graphql [--ttl SECONDS]
//
// Settings, as Mercurius's docs recommend for production: the graphql-jit compiler after
// the first request (`jit: 1`), Fastify's logger off, NODE_ENV=production (set here,
// before any module reads it). With --ttl, mercurius-cache caches every Query field
// (`all: true`) for that many seconds (0: only concurrent identical resolutions are
// shared; mercurius-cache keys by field, arguments and selection, not by caller). The
// caller's `authorization` header is passed on to every subgraph. Each subgraph's SDL is read once (`_service { sdl }`), rewritten into the
// Federation 1 that Mercurius's gateway speaks (federation1.js), and given to it; a
// graph it cannot run stops the launcher with the reason. GET /health answers once the
// gateway serves.
process.env.NODE_ENV = process.env.NODE_ENV || 'production'
const Fastify = require('fastify')
const mercuriusGateway = require('@mercuriusjs/gateway')
const cache = require('mercurius-cache')
const { toFederation1 } = require('./federation1')
const { parseFlags } = require('../flags')

// How long a subgraph may take to give its SDL.
const SDL_DEADLINE_MS = 10000

// The flags loadgen passes (../flags.js says how they are read).
const FLAGS = {
  '--port': { key: 'port', kind: 'port', required: true },
  '--subgraph': { key: 'subgraphs', kind: 'list', required: true },
  '--ttl': { key: 'ttl', kind: 'seconds' }
}

// `--subgraph NAME=URL`, as a name and a URL.
function subgraphOf (value) {
  const at = value.indexOf('=')
  if (at < 1) throw new Error(`--subgraph ${value}: expected NAME=URL`)
  return { name: value.slice(0, at), url: value.slice(at + 1) }
}

async function sdlOf ({ name, url }) {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ _service { sdl } }' }),
    signal: AbortSignal.timeout(SDL_DEADLINE_MS)
  })
  const body = await answer.json()
  const sdl = body && body.data && body.data._service && body.data._service.sdl
  if (typeof sdl !== 'string') throw new Error(`subgraph ${name} at ${url} gave no _service.sdl (HTTP ${answer.status})`)
  return { name, sdl }
}

async function main () {
  const args = parseFlags(process.argv.slice(2), FLAGS)
  args.subgraphs = args.subgraphs.map(subgraphOf)
  const sdls = toFederation1(await Promise.all(args.subgraphs.map(sdlOf)))
  // The caller's credentials go on to every subgraph, as the lab's gateway sends them.
  const rewriteHeaders = (headers) => (headers && headers.authorization ? { authorization: headers.authorization } : {})
  const services = args.subgraphs.map((s, i) => ({ name: s.name, url: s.url, schema: sdls[i].sdl, rewriteHeaders }))
  const app = Fastify({ logger: false })
  await app.register(mercuriusGateway, { jit: 1, gateway: { services } })
  if (args.ttl !== undefined) await app.register(cache, { all: true, ttl: args.ttl })
  app.get('/health', async () => 'ok')
  await app.listen({ host: '127.0.0.1', port: args.port })
  console.log(`mercurius gateway on 127.0.0.1:${args.port}, cache: ${args.ttl === undefined ? 'none' : `all, ttl=${args.ttl}`}`)
}

main().catch((err) => { console.error(`mercurius peer: ${err.message}`); process.exit(1) })
