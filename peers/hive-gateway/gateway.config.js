'use strict'
// Hive Gateway's configuration for the lab (read by its CLI, see gateway.js): logging at
// "error", the caller's `authorization` header passed on to the subgraphs, and the
// response cache when gateway.js set a TTL. The cache's session is the
// caller's `authorization` header, so that an answer with credentials is never served to
// another caller; without one, answers are shared.
const ttl = process.env.LAB_RESPONSE_TTL_MS

module.exports.gatewayConfig = {
  logging: 'error',
  // The caller's credentials go on to every subgraph, as the lab's gateway sends them.
  propagateHeaders: {
    fromClientToSubgraphs: ({ request }) => {
      const authorization = request.headers.get('authorization')
      return authorization ? { authorization } : {}
    }
  },
  ...(ttl === undefined
    ? {}
    : {
        responseCaching: {
          ttl: Number(ttl),
          session: (request) => request.headers.get('authorization') || null
        }
      })
}
