# Sourced by scripts/run and scripts/test: defines policyd_env, which makes .venv (once) and
# installs policyd and ./exporters into it. Sourcing reads no arguments: the caller's own
# arguments (`scripts/run --help`) are never taken for pip extras.
#   . scripts/env.sh; policyd_env          policyd alone (scripts/run)
#   . scripts/env.sh; policyd_env test     with the "test" extra of both packages (scripts/test:
#                                          policyd's test tools and the training frameworks the
#                                          exporters' tests run)
# POLICYD_VENV chooses another venv, PYTHON another interpreter to make it with.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${POLICYD_VENV:-$ROOT/.venv}

# policyd_env [EXTRA]: install once, and again only when the project's metadata (policyd's or the
# exporters') is newer than the last install. The stamp file lists the extras installed with it
# (one a line), so a venv that has the "test" extra serves scripts/run without reinstalling, and
# a reinstall keeps every extra installed before.
policyd_env() {
  local extra=${1:-} stamp="$VENV/.policyd-installed" extras=() spec
  if [ ! -x "$VENV/bin/python" ]; then
    echo "policyd: creating $VENV" >&2
    "${PYTHON:-python3}" -m venv "$VENV"
  fi
  if [ -f "$stamp" ] && [ ! "$ROOT/pyproject.toml" -nt "$stamp" ] \
     && [ ! "$ROOT/exporters/pyproject.toml" -nt "$stamp" ] \
     && { [ -z "$extra" ] || grep -qxF -- "$extra" "$stamp"; }; then
    export PATH="$VENV/bin:$PATH"
    return 0
  fi
  if [ -f "$stamp" ]; then
    mapfile -t extras < <(grep -v '^$' "$stamp" || true)
  fi
  if [ -n "$extra" ] && ! printf '%s\n' "${extras[@]}" | grep -qxF -- "$extra"; then
    extras+=("$extra")
  fi
  spec=$ROOT exporters=$ROOT/exporters
  if [ "${#extras[@]}" -gt 0 ]; then
    spec="$ROOT[$(IFS=,; echo "${extras[*]}")]"
    exporters="$ROOT/exporters[$(IFS=,; echo "${extras[*]}")]"
  fi
  echo "policyd: installing $spec and ./exporters into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -e "$spec" -e "$exporters"
  printf '%s\n' "${extras[@]}" > "$stamp"
  export PATH="$VENV/bin:$PATH"
}
