#!/bin/sh
# The container's entry point.
#   ferrymq-container [ferrymq standalone options]   run the name server and the broker (the default)
#   ferrymq-container health                         exit 0 once a broker is registered with the name server
#
# The config `ferrymq standalone` reads is written fresh at each start: the image's defaults, then a
# mounted /etc/ferrymq/broker.conf, then one line per FERRYMQ_<key>=<value> environment variable.
# The last line of a key wins, so the environment overrides the file and the file the defaults.
set -eu

DEFAULTS=/opt/ferrymq/etc/defaults.conf
MOUNTED=${FERRYMQ_CONF:-/etc/ferrymq/broker.conf}
EFFECTIVE=${TMPDIR:-/tmp}/ferrymq-effective.conf

# The value of key $1 in the effective config (its last line).
value_of() {
    sed -n "s/^[[:space:]]*$1[[:space:]]*[=:][[:space:]]*//p" "$EFFECTIVE" | tail -n 1 | tr -d '[:space:]'
}

if [ "${1:-}" = health ]; then
    port=$(value_of namesrvListenPort)
    # clusterList prints a header line, then one line per registered broker
    ferrymq admin clusterList -n "127.0.0.1:${port:-9876}" | sed 1d | grep -q .
    exit
fi

{
    echo "# $DEFAULTS"
    cat "$DEFAULTS"
    if [ -f "$MOUNTED" ]; then
        echo "# $MOUNTED"
        cat "$MOUNTED"
        echo
    fi
    echo "# FERRYMQ_<key> environment variables"
    env | sed -n 's/^FERRYMQ_\([A-Za-z][A-Za-z0-9_.]*\)=/\1=/p' | grep -v '^CONF='
} > "$EFFECTIVE"
exec ferrymq standalone -c "$EFFECTIVE" "$@"
