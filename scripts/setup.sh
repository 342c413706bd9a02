#!/usr/bin/env bash
# Installs what shufflelab needs on a fresh Debian 12 machine; cheap to re-run (idempotent).
#   - Debian packages: iperf3, iproute2, ethtool, Java 17 JDK, openssh-server (the SSH backend's
#     stand-in hosts in tests/hosts run it in namespaces; only those missing)
#   - shufflelab's Spark listener jar (javac against pyspark's jars)
#   - .venv with the pinned Python dependencies (pyspark from PyPI) and shufflelab itself, installed by uv
#   - the Rust extensions under crates/ that have a pyproject.toml (built by maturin via pip, their
#     wheels cached by the Rust workspace's content)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "shufflelab needs root (network namespaces, qdiscs, sysctls); run as root" >&2
  exit 1
fi

missing=()
for pair in iperf3:iperf3 ethtool:ethtool ip:iproute2 ss:iproute2 tc:iproute2 java:openjdk-17-jre-headless \
            javac:openjdk-17-jdk-headless \
            ping:iputils-ping modprobe:kmod ucx_info:ucx-utils mvn:maven \
            /usr/sbin/sshd:openssh-server; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi

# Re-install only when the dependency declarations changed.
stamp=.venv/.shufflelab-setup
want=$({ cat pyproject.toml Cargo.toml crates/*/pyproject.toml crates/*/Cargo.toml crates/*/src/*.rs 2>/dev/null || true; } \
       | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages (pyspark builds its wheel once, ~1 min)"
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/shufflelab
  # uv installs them: it links each package's files from its cache, so a fresh clone's environment
  # takes about 20 s (most of it compiling the byte code) instead of pip's 50 s
  [ -x .venv/bin/uv ] || .venv/bin/pip install -q "uv==0.13.9"
  # pyspark is published as a source archive: its wheel is built once per pinned version and kept
  # (uv would rebuild it on every install: the index here does not let it cache the archive's build)
  pyspark=$(grep -o '"pyspark==[^"]*"' pyproject.toml | tr -d '"')
  wheelhouse="$cache/wheels/${pyspark/==/-}"
  if ! ls "$wheelhouse"/pyspark-*.whl >/dev/null 2>&1; then
    rm -rf "$wheelhouse.tmp"
    .venv/bin/pip wheel -q --no-deps -w "$wheelhouse.tmp" "$pyspark"
    rm -rf "$wheelhouse"
    mv "$wheelhouse.tmp" "$wheelhouse"
  fi
  # --compile-bytecode: the byte code written now, as pip did; where PYTHONDONTWRITEBYTECODE is set
  # (as on this machine) no import writes it, and every Python process compiled every module it
  # imported (pandas, pyspark, duckdb, ...) from source: the test command took 16 min 11 s instead of 14
  .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python --find-links "$wheelhouse" -e ".[dev]"
  # each extension's wheel is built once per content of the Rust workspace (its crates, Cargo.toml,
  # Cargo.lock) and kept in the cache: a fresh clone of the same tree installs it without compiling;
  # a changed tree compiles in the shared target folder (cargo's fingerprints: only what changed)
  rust_key=$({ cat Cargo.toml Cargo.lock; find crates -type f \( -name '*.rs' -o -name '*.toml' \) -print0 | sort -z \
              | xargs -0 cat; } | sha256sum | cut -c1-16)
  for crate in crates/*/; do
    if [ -f "$crate/pyproject.toml" ]; then
      wheels="$cache/wheels/$(basename "$crate")-$rust_key"
      if ! ls "$wheels"/*.whl >/dev/null 2>&1; then
        echo "setup: building $crate"
        rm -rf "$wheels.tmp"
        CARGO_TARGET_DIR="$cache/cargo-target" .venv/bin/pip wheel -q --no-deps -w "$wheels.tmp" "$crate"
        rm -rf "$wheels"
        mv "$wheels.tmp" "$wheels"
      fi
      .venv/bin/uv pip install -q --python .venv/bin/python --no-deps --reinstall "$wheels"/*.whl
    fi
  done
  echo "$want" > "$stamp"
fi
# shufflelab's own byte code, which an editable install does not write (and, where
# PYTHONDONTWRITEBYTECODE is set, no import does): each of the many Python processes of a run or a test
# would compile the modules it imports again. Only what changed is compiled; a stale file is ignored.
.venv/bin/python -m compileall -q src
# The userspace switch binary (crates/switch -> target/release/shufflelab-switch), built as the gates
# build the crates: in the machine's target folder from the workspace's copy (scripts/stage_rust.py),
# so that a fresh clone at any path compiles nothing unchanged; cargo's own change detection makes
# this a no-op when nothing changed. Without cargo its tests are skipped.
if command -v cargo >/dev/null 2>&1; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/shufflelab
  mkdir -p "$cache" target/release
  (
    exec 9>"$cache/rust-workspace.lock"
    flock 9
    ws=$("$PY" scripts/stage_rust.py "$cache/rust-workspace")
    built=${CARGO_TARGET_DIR:-$cache/cargo-target}/release/shufflelab-switch
    (cd "$ws" && CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/cargo-target} cargo build -q --release -p shufflelab-switch)
    # whole or not at all (a test may be starting it)
    cp "$built" target/release/.shufflelab-switch.partial
    mv -f target/release/.shufflelab-switch.partial target/release/shufflelab-switch
  )
else
  echo "setup: cargo not found; the userspace switch is not built (its root tests will skip)" >&2
fi
# shufflelab's Spark task listener, compiled against the installed pyspark's jars (cached by hash).
.venv/bin/python -m shufflelab.listener >/dev/null
# Apache Hadoop's HDFS jars from Maven Central for the storage cluster (once, ~65 MB; cached by the pom's hash).
.venv/bin/python -m shufflelab.ndp.hdfs --fetch >/dev/null
.venv/bin/python -m shufflelab.ndp.connector >/dev/null
# The JVM class-data archive Spark's JVMs start from (recorded once, ~1 min; cached by hash).
.venv/bin/python -m shufflelab.emulate.cds >/dev/null
echo "setup: ready ($(.venv/bin/python -c 'import pyspark; print("pyspark", pyspark.__version__)'))"
