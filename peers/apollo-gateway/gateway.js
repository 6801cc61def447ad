'use strict'
// Apollo Gateway as a peer of the lab's gateway: @apollo/gateway 2.x inside @apollo/server,
// with @apollo/server-plugin-response-cache when a TTL is given. `loadgen matrix` starts it
// for a configuration with `peer = "apollo-gateway"`, on the experiment's supergraph with
// its subgraphs' URLs where the runner reaches them:
//
//   node gateway.js --port 4000 --supergraph supergraph.graphql [--response-ttl SECONDS]
//
// Settings: NODE_ENV=production (no landing page, no introspection), Apollo Server's
// defaults otherwise (CSRF prevention on, its in-memory cache of 30 MiB, usage reporting
// off without an APOLLO_KEY); the caller's `authorization` header passed on to every
// subgraph. The HTTP layer is Node's own `http` server calling Apollo Server's
// integration entry point (`executeHTTPGraphQLRequest`), as `startStandaloneServer` does,
// so that it can also answer `GET /health` and `GET /metrics`.
//
// The response cache keeps a whole answer for as long as the answer's cache policy allows:
// Apollo Gateway sets that policy from the subgraphs' `Cache-Control` headers (the
// smallest `max-age`; an answer without one is not cacheable), and --response-ttl caps it.
// An answer that holds a `private` piece is kept per session (the caller's `authorization`
// header). Where the graph's hints leave nothing cacheable, nothing is kept: `/metrics`
// counts such answers as skips, and the lab's report says so.
//
// GET /metrics speaks the lab gateway's names, so that the runner reads this cache as it
// reads the lab's: gateway_request_cache_{hits,misses,skips}_total
// (a miss: an answer that was stored; a skip: one its policy left uncacheable, or a
// private one without a session) and gateway_cache_{entries,bytes}{namespace="response"}.
process.env.NODE_ENV = process.env.NODE_ENV || 'production'
const fs = require('node:fs')
const http = require('node:http')
const { ApolloServer, HeaderMap } = require('@apollo/server')
const { ApolloGateway, RemoteGraphQLDataSource } = require('@apollo/gateway')
const responseCachePlugin = require('@apollo/server-plugin-response-cache').default
const { InMemoryLRUCache } = require('@apollo/utils.keyvaluecache')
const { parseFlags } = require('../flags')

// The largest request body read, as the lab's gateway bounds its own.
const BODY_LIMIT = 1 << 20

// The flags loadgen passes (../flags.js says how they are read).
const FLAGS = {
  '--port': { key: 'port', kind: 'port', required: true },
  '--supergraph': { key: 'supergraph', kind: 'text', required: true },
  '--response-ttl': { key: 'responseTtl', kind: 'seconds' }
}

// What /metrics reports.
const counted = { hits: 0, misses: 0, skips: 0 }

// With the response cache: caps every answer's cache policy at the TTL, and tells a hit,
// a stored answer and an uncacheable one apart.
function countingPlugin (ttl) {
  return {
    async requestDidStart () {
      return {
        async didResolveOperation (ctx) {
          ctx.overallCachePolicy.restrict({ maxAge: Math.floor(ttl) })
        },
        async willSendResponse (ctx) {
          if (ctx.operation?.operation !== 'query') return
          const policy = ctx.overallCachePolicy.policyIfCacheable()
          // The response cache keeps a private answer only under a session.
          const storable = policy && (policy.scope !== 'PRIVATE' || ctx.contextValue.authorization)
          if (ctx.metrics.responseCacheHit) counted.hits += 1
          else if (storable) counted.misses += 1
          else counted.skips += 1
        }
      }
    }
  }
}

// Only the cache's counters: the runner takes the requests a peer served from its own
// count of answers, as a loaded Node event loop answers /metrics late.
function metrics (store) {
  const lines = []
  if (store) {
    lines.push(
      `gateway_request_cache_hits_total ${counted.hits}`,
      `gateway_request_cache_misses_total ${counted.misses}`,
      `gateway_request_cache_skips_total ${counted.skips}`,
      `gateway_cache_entries{namespace="response"} ${store.cache.size}`,
      `gateway_cache_bytes{namespace="response"} ${store.cache.calculatedSize}`
    )
  }
  return lines.join('\n') + '\n'
}

function readBody (req) {
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    req.on('data', (chunk) => {
      size += chunk.length
      if (size > BODY_LIMIT) {
        reject(Object.assign(new Error('request body too large'), { status: 413 }))
        req.destroy()
        return
      }
      chunks.push(chunk)
    })
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

async function main () {
  const args = parseFlags(process.argv.slice(2), FLAGS)
  const supergraphSdl = fs.readFileSync(args.supergraph, 'utf8')
  const gateway = new ApolloGateway({
    supergraphSdl,
    // The caller's credentials go on to every subgraph, as the lab's gateway sends them.
    buildService: ({ url }) => new RemoteGraphQLDataSource({
      url,
      willSendRequest ({ request, context }) {
        if (context.authorization) request.http.headers.set('authorization', context.authorization)
      }
    })
  })
  const store = args.responseTtl === undefined ? undefined : new InMemoryLRUCache()
  const plugins = []
  if (store) {
    plugins.push(countingPlugin(args.responseTtl), responseCachePlugin({
      cache: store,
      sessionId: async ({ request }) => request.http.headers.get('authorization') || null
    }))
  }
  const server = new ApolloServer({ gateway, plugins })
  await server.start()

  const httpServer = http.createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://localhost')
      if (req.method === 'GET' && url.pathname === '/health') {
        res.end('ok')
        return
      }
      if (req.method === 'GET' && url.pathname === '/metrics') {
        res.setHeader('content-type', 'text/plain; version=0.0.4')
        res.end(metrics(store))
        return
      }
      const text = await readBody(req)
      const headers = new HeaderMap()
      for (const [key, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers.set(key, Array.isArray(value) ? value.join(', ') : value)
      }
      let body
      if (text.length > 0) {
        try {
          body = JSON.parse(text)
        } catch {
          res.statusCode = 400
          res.end('request body is not JSON')
          return
        }
      }
      const answer = await server.executeHTTPGraphQLRequest({
        httpGraphQLRequest: { method: req.method.toUpperCase(), headers, search: url.search, body },
        context: async () => ({ authorization: req.headers.authorization })
      })
      for (const [key, value] of answer.headers) res.setHeader(key, value)
      res.statusCode = answer.status || 200
      if (answer.body.kind === 'complete') {
        res.end(answer.body.string)
        return
      }
      for await (const chunk of answer.body.asyncIterator) res.write(chunk)
      res.end()
    } catch (err) {
      res.statusCode = err.status || 500
      res.end(err.message)
    }
  })
  httpServer.keepAliveTimeout = 60000
  await new Promise((resolve, reject) => {
    httpServer.once('error', reject)
    httpServer.listen(args.port, '127.0.0.1', resolve)
  })
  console.log(`apollo gateway on 127.0.0.1:${args.port}, response cache: ${store ? `ttl cap ${args.responseTtl} s` : 'none'}`)
}

main().catch((err) => { console.error(`apollo-gateway peer: ${err.message}`); process.exit(1) })
