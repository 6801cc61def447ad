# Sourced by the commerce graph's scripts: start the four subgraphs of commerce-service
# on free 127.0.0.1 ports, and stop them by PID on exit.
#   start_commerce_services [DATA FLAGS...]   # e.g. --products 2000 --data-seed 7
# Sets commerce_urls to "products=http://127.0.0.1:PORT/graphql" and so on, one word per
# subgraph (in products, inventory, reviews, accounts order). Needs target/debug/commerce-service
# (cargo build -p commerce-graph --bin commerce-service).
commerce_pids=()
commerce_urls=()
commerce_logs=$(mktemp -d)
stop_commerce_services() {
  for p in "${commerce_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${commerce_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$commerce_logs"
}
trap stop_commerce_services EXIT
start_commerce_services() {
  local s line deadline
  for s in products inventory reviews accounts; do
    target/debug/commerce-service --subgraph "$s" --listen 127.0.0.1:0 "$@" 2> "$commerce_logs/$s.log" &
    commerce_pids+=($!)
  done
  for s in products inventory reviews accounts; do
    deadline=$((SECONDS + 30))
    until line=$(grep -o 'listening on http://[0-9.:]*/graphql' "$commerce_logs/$s.log"); do
      if [ $SECONDS -ge $deadline ]; then
        echo "commerce-service --subgraph $s did not start within 30 s:" >&2
        cat "$commerce_logs/$s.log" >&2
        return 1
      fi
      sleep 0.1
    done
    commerce_urls+=("$s=${line#listening on }")
  done
}
