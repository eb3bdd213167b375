# Sourced by the Paddle-free GPU benches' runners: with PREBUILT=DIR, where DIR holds <bench>.tar.xz
# (what scripts/gpu/prebuild.sh packs: the binaries a seventh of their size, so that several fit
# in one carry) but not <bench>/, unpacks it under /tmp/prebuilt and points PREBUILT there.
use_prebuilt() {  # use_prebuilt BENCH
  [ -n "${PREBUILT:-}" ] && [ ! -d "$PREBUILT/$1" ] && [ -f "$PREBUILT/$1.tar.xz" ] || return 0
  mkdir -p /tmp/prebuilt && xz -dc "$PREBUILT/$1.tar.xz" | tar xf - -C /tmp/prebuilt ||
    { echo "cannot unpack $PREBUILT/$1.tar.xz" >&2; exit 2; }
  PREBUILT=/tmp/prebuilt
}
