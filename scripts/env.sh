# Sourced by scripts/run and scripts/test: makes .venv (once) and installs policyd into it.
# Usage: . scripts/env.sh [extra]   (extra = pip extras of both packages, e.g. "test": policyd's
# test tools and the training frameworks the exporters' tests run)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${POLICYD_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "policyd: creating $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
extra=${1:-}
spec="$ROOT${extra:+[$extra]}"
stamp="$VENV/.policyd-installed${extra:+-$extra}"
# Reinstall only when the project's metadata (policyd's or the exporters') changed since.
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] \
   || [ "$ROOT/exporters/pyproject.toml" -nt "$stamp" ]; then
  echo "policyd: installing $spec and ./exporters into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -e "$spec" -e "$ROOT/exporters${extra:+[$extra]}"
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
