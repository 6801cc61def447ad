# Sourced by the side-by-side scripts (ceilings.sh, compare-mercurius.sh): what they
# share about recording a run and finding ports.

# record_output NAME: from here on, everything the script prints is also kept in
# results/<UTC stamp>-NAME/summary.txt, headed by the commit ("(dirty)" when the tree
# outside results/ has changes).
record_output() {
  out=results/$(date -u +%Y%m%d-%H%M%S)-$1
  mkdir -p "$out"
  exec > >(tee "$out/summary.txt") 2>&1
  local changes
  changes=$(git status --porcelain -- . ':!results')
  echo "commit $(git rev-parse HEAD)${changes:+ (dirty)}"
}

# port: a free TCP port on 127.0.0.1.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
