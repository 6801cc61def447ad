# The lab's edge cache: Varnish in front of one gateway, keeping what the gateway's
# `Cache-Control` allows and nothing longer, and purging by surrogate key.
#
# The crate local-varnish renders this file, with the gateway's port in place of
# 41853, for the matrix runner (`edge = "varnish"` in a `[[config]]`: the
# rendered copy sits beside the round's logs) and for the gateway's tests.
#
# - `/edge/health` is Varnish's own answer (200), without asking the gateway.
# - GET and HEAD are looked up; anything else (POST, mutations) passes to the gateway.
# - A request with `Authorization` or `Cookie` passes (Varnish's built-in rule, kept).
# - An answer is kept for its `max-age` (`s-maxage` first), never past it: grace and
#   keep are 0, so no stale copy is served and nothing is held after it expires.
#   `private`, `no-store`, `no-cache` and `Set-Cookie` answers are never kept (the
#   built-in rule marks them uncacheable).
# - `PURGE` from loopback with `Surrogate-Key: Post:p1 Post` bans every kept answer
#   whose own `Surrogate-Key` names one of those keys; `Surrogate-Key: *` bans all.
#   The gateway sends it after a mutation and on `POST /invalidate` (`--edge-purge`).

vcl 4.1;

import std;

backend gateway {
    .host = "127.0.0.1";
    .port = "41853";
    .connect_timeout = 2s;
    .first_byte_timeout = 60s;
    .between_bytes_timeout = 60s;
}

acl purgers {
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    # Varnish's own health, answered without the gateway (whose first refusals would
    # otherwise hold the backend down for a moment).
    if (req.url == "/edge/health") {
        return (synth(200, "edge up"));
    }
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) {
            return (synth(403, "PURGE is taken from loopback only"));
        }
        if (!req.http.Surrogate-Key) {
            return (synth(400, "PURGE needs a Surrogate-Key header: keys, or *"));
        }
        if (req.http.Surrogate-Key == "*") {
            if (!std.ban("obj.status != 0")) {
                return (synth(400, std.ban_error()));
            }
            return (synth(200, "banned everything"));
        }
        # Keys are space-separated names of letters, digits and `_:.@-` (the gateway
        # purges a key with other characters by its type); each must match a whole
        # key of the kept answer's header. A ban's arguments are split at spaces and
        # take no quotes, so the expression holds none.
        if (req.http.Surrogate-Key !~ "^[A-Za-z0-9_:.@ -]+$") {
            return (synth(400, "Surrogate-Key holds a character other than letters, digits, space and _:.@-"));
        }
        set req.http.X-Ban-Keys = regsuball(req.http.Surrogate-Key, "^ +| +$", "");
        set req.http.X-Ban-Keys = regsuball(req.http.X-Ban-Keys, "[.]", "[.]");
        set req.http.X-Ban-Keys = regsuball(req.http.X-Ban-Keys, " +", "|");
        if (!std.ban("obj.http.Surrogate-Key ~ (^|[[:blank:]])(" + req.http.X-Ban-Keys + ")([[:blank:]]|$)")) {
            return (synth(400, std.ban_error()));
        }
        return (synth(200, "banned"));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
}

sub vcl_backend_response {
    # Never past the gateway's own lifetime: no grace (stale while fetching) and no keep.
    set beresp.grace = 0s;
    set beresp.keep = 0s;
}

sub vcl_deliver {
    # Whether this answer came from the edge, for tests and curious users.
    if (obj.hits > 0) {
        set resp.http.X-Edge = "hit";
    } else {
        set resp.http.X-Edge = "miss";
    }
}
