# Settings shared by install.sh and start.sh (sourced, not run).
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${PERFCAST_CACHE:-$HOME/.cache/perfcast}"
DEFAULT_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$HERE/pom.xml")"
VERSION="${KAFKA_VERSION:-$DEFAULT_VERSION}"
LIBS="$CACHE/kafka/$VERSION/libs"
